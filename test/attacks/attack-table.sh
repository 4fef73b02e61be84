#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The attack table: every case of test/attacks/attacks (heap misuses: double
# frees, bad pointers, writes after free, overflows, wrong sizes), each in a
# process of its own (stdin from /dev/null, a timeout, no core file), under
# ductile (the default build; the same with DUCTILE_CONF=hardened:true; an
# --enable-hardened build, as it is and with every freed block filled,
# DUCTILE_CONF=freed_fill:1), LLVM's Scudo, mimalloc built with MI_SECURE and
# glibc. Prints a Markdown table -- per cell where the program stopped and
# the allocator's line, shortened -- then the raw outcomes.
#
#   test/attacks/attack-table.sh [--build-dir DIR] [--ductile LIB]
#       [--hardened LIB] [--scudo LIB] [--mimalloc-secure LIB]
#       [--runs N] [--timeout S] [--cases "NAME ..."]
#
# Environment: BUILD_DIR, DUCTILE_LIB, HARDENED_LIB (an --enable-hardened
# build's libductile.so), SCUDO_LIB (default: the first
# libclang_rt.scudo_standalone-x86_64.so under /usr/lib/llvm-*),
# MIMALLOC_SECURE_LIB (a libmimalloc-secure.so). A column whose library is
# not given or not usable says n/a. mimalloc runs with
# MIMALLOC_SHOW_ERRORS=1 (its release build is silent otherwise), every
# column with LIBC_FATAL_STDERR_=1.
#
# Classes: "at once" (the program stopped at the bad write or the faulting
# call), "next op" (at a later operation on that size or block), "at exit"
# (after the case ended), "reported, ran on" (a report, but the program ran
# to its end), "not detected" (ran to its end, nothing printed), "crash" (a
# fault signal, or a signal without a report), "hang" (the timeout), "n/a"
# (the allocator lacks the interface). With --runs N (default 3) every case
# runs N times; a cell whose runs differ shows each outcome with its count.
set -u

script_dir=$(cd "$(dirname "$0")" && pwd)
. "$script_dir/../../bench/allocators.sh"

build_dir=${BUILD_DIR:-$(dirname "$(dirname "$script_dir")")}
ductile_lib=${DUCTILE_LIB:-}
hardened_lib=${HARDENED_LIB:-}
scudo_lib=${SCUDO_LIB:-}
if [ -z "$scudo_lib" ]; then
  for f in /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-x86_64.so; do
    [ -f "$f" ] && { scudo_lib=$f; break; }
  done
fi
mimalloc_secure_lib=${MIMALLOC_SECURE_LIB:-}
runs=3
timeout_s=5
cases=
parse_options --build-dir=build_dir --ductile=ductile_lib --hardened=hardened_lib --scudo=scudo_lib \
  --mimalloc-secure=mimalloc_secure_lib --runs=runs --timeout=timeout_s --cases=cases -- "$@"
ductile_lib=${ductile_lib:-$build_dir/.libs/libductile.so}
prog=$build_dir/test/attacks/attacks
[ -x "$prog" ] || { echo "$(basename "$0"): $prog not built (make test/attacks/attacks)" >&2; exit 1; }
[ -n "$cases" ] || cases=$("$prog" --list | cut -f1)
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

# The columns: name, library (empty: glibc), environment, what is missing.
names=(ductile "ductile hardened:true" "ductile --enable-hardened" "ductile --enable-hardened freed_fill:1" Scudo
  "mimalloc MI_SECURE" glibc)
libs=("$ductile_lib" "$ductile_lib" "$hardened_lib" "$hardened_lib" "$scudo_lib" "$mimalloc_secure_lib" "")
envs=("" "DUCTILE_CONF=hardened:true" "" "DUCTILE_CONF=freed_fill:1" "" "MIMALLOC_SHOW_ERRORS=1" "")
given=(1 1 "${hardened_lib:+1}" "${hardened_lib:+1}" "${scudo_lib:+1}" "${mimalloc_secure_lib:+1}" 1)
unset_why=("" "" "HARDENED_LIB not set" "HARDENED_LIB not set" "SCUDO_LIB not set, none found"
  "MIMALLOC_SECURE_LIB not set" "")
usable=()
for i in "${!names[@]}"; do
  if [ -z "${given[$i]}" ]; then
    usable[$i]=0
    echo "${names[$i]}: n/a (${unset_why[$i]})"
    continue
  fi
  check_allocator "col$i" "${libs[$i]}" "$logdir"
  if [ "$status" = ok ]; then
    usable[$i]=1
    echo "${names[$i]}: $detail${envs[$i]:+ ($(tr ' ' , <<<"${envs[$i]}"))}"
  else
    usable[$i]=0
    echo "${names[$i]}: n/a ($detail)"
  fi
done
echo

signame() { kill -l "$1" 2>/dev/null || echo "signal $1"; }

# The allocator's line for the table: its name's prefix, addresses and
# sizes in bytes taken out, cut to 70 characters.
shorten() {
  sed -E -e 's/^(ductile: |Scudo ERROR: |mimalloc: (error|warning): )//' \
    -e 's/ 0x[0-9a-fA-F]+//g' -e 's/[[:space:]]+$//' <<<"$1" |
    awk '{ if (length($0) > 70) print substr($0, 1, 69) "…"; else print }'
}

# run_one COLUMN CASE: runs the case once; sets cell (the table's text) and
# raw (the outcome in full).
run_one() {
  local i=$1 c=$2 out=$logdir/out err=$logdir/err rc last notes line cls detail sig
  rc=$( {
    ulimit -c 0
    env LIBC_FATAL_STDERR_=1 ${libs[$i]:+LD_PRELOAD=${libs[$i]}} ${envs[$i]} \
      timeout -k 1 "$timeout_s" "$prog" "$c" >"$out" 2>"$err" </dev/null
    echo $?
  } 2>/dev/null)
  last=$(sed -n 's/^step //p' "$out" | tail -1)
  notes=$(sed -n 's/^note //p' "$out" | paste -sd';' -)
  line=$(grep -m1 -v '^[[:space:]]*$' "$err")
  detail=
  if grep -q '^n/a ' "$out"; then
    cls=n/a
    detail=$(sed -n 's/^n\/a //p' "$out")
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    cls=hang
    detail="killed after ${timeout_s} s"
  elif [ "$rc" -eq 0 ] && [ "$last" = end ]; then
    if [ -n "$line" ]; then cls="reported, ran on"; else cls="not detected"; fi
  else
    sig=
    [ "$rc" -gt 128 ] && sig=$(signame $((rc - 128)))
    case $sig in
      SEGV | BUS | ILL | FPE | TRAP) line= ;;
    esac
    if [ -n "$line" ]; then
      case $last in
        write | attack) cls="at once" ;;
        next) cls="next op" ;;
        end) cls="at exit" ;;
        *) cls="before the attack" ;;
      esac
    else
      cls=crash
      case $last in
        write) detail="SIG$sig at the write" ;;
        attack) detail="SIG$sig at the call" ;;
        next) detail="SIG$sig at the next op" ;;
        end) detail="SIG$sig at exit" ;;
        *) detail="SIG$sig before the attack" ;;
      esac
      [ -n "$sig" ] || detail="exit $rc, step ${last:-none}"
    fi
  fi
  cell=$cls
  if [ -n "$line" ]; then
    cell="$cell: \`$(shorten "$line")\`"
  elif [ -n "$detail" ]; then
    cell="$cell: $detail"
  fi
  [ -n "$notes" ] && cell="$cell; $notes"
  cell=${cell//|/\\|}
  raw="status $rc, last step ${last:-none}${notes:+, notes: $notes}${line:+, stderr: $line}"
}

declare -A table raws
for c in $cases; do
  for i in "${!names[@]}"; do
    if [ "${usable[$i]}" != 1 ]; then
      table[$c,$i]=n/a
      continue
    fi
    declare -A count=()
    order=()
    rawtext=
    for ((r = 1; r <= runs; r++)); do
      run_one "$i" "$c"
      if [ -z "${count[$cell]+x}" ]; then
        order+=("$cell")
        count[$cell]=0
        rawtext+="${rawtext:+; }run $r: $raw"
      fi
      count[$cell]=$((count[$cell] + 1))
    done
    if [ ${#order[@]} -eq 1 ]; then
      table[$c,$i]=${order[0]}
    else
      text=
      for o in "${order[@]}"; do text+="${text:+ / }$o (${count[$o]}/$runs)"; done
      table[$c,$i]=$text
    fi
    raws[$c,$i]=$rawtext
    unset count
  done
done

header="| # | case |"
rule="|---|---|"
for i in "${!names[@]}"; do
  header+=" ${names[$i]} |"
  rule+="---|"
done
echo "$header"
echo "$rule"
# A case's number is its place in attacks --list, whatever --cases picked.
all=$("$prog" --list | cut -f1)
for c in $cases; do
  n=$(grep -nx -- "$c" <<<"$all" | cut -d: -f1)
  row="| ${n:-?} | \`$c\` |"
  for i in "${!names[@]}"; do row+=" ${table[$c,$i]} |"; done
  echo "$row"
done

echo
echo "Cases:"
echo
"$prog" --list | awk -F'\t' -v want=" $(echo $cases) " 'index(want, " " $1 " ") { printf "- `%s`: %s\n", $1, $2 }'
echo
echo "Raw outcomes (status: exit status, 128+N for signal N; the last step the program printed; its notes; the allocator's first line):"
echo
echo '```'
for c in $cases; do
  for i in "${!names[@]}"; do
    [ "${usable[$i]}" = 1 ] || continue
    echo "$c | ${names[$i]} | ${raws[$c,$i]}"
  done
done
echo '```'
