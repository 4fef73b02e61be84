#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# push_back of 1 GiB of uint64_t (bench/vector_push): std::vector under
# glibc, jemalloc, mimalloc, tcmalloc and ductile (LD_PRELOAD), and
# ductile::vector under ductile, in one run, the runs interleaved; prints a
# table of the push_back loop's time (median), its ratio to
# ductile::vector's, the peak RSS (median) and its ratio to the final
# buffer, and the growth steps of a buffer of 2 MiB or more that moved it
# and that copied it (ductile's own count).
#
#   bench/compare-vector-push.sh [--size SIZE] [--reps N] [--build-dir DIR]
#                                [--ductile LIB] [--keep DIR]
#
#   --size SIZE    the bytes pushed (default 1G; K, M and G suffixes)
#   --reps N       runs of each, interleaved (default 3)
#   --build-dir    where bench/vector_push and .libs/libductile.so are
#                  (default $BUILD_DIR, else the directory above this script)
#   --ductile LIB  the library preloaded as ductile
#   --keep DIR     keep the raw outputs in DIR
#   --no-settle    run each timed run straight after the one before (see
#                  settle below)
#
# Environment: BUILD_DIR, DUCTILE_LIB, JEMALLOC_LIB, MIMALLOC_LIB,
# TCMALLOC_LIB. A peer whose library is missing or cannot be preloaded
# shows as "unavailable". The runs are sequential: never two at once.
set -u

script_dir=$(cd "$(dirname "$0")" && pwd)
. "$script_dir/allocators.sh"
build_dir=${BUILD_DIR:-$(dirname "$script_dir")}
ductile_lib=${DUCTILE_LIB:-}
size=1G
reps=3
keep=
settle=yes
parse_options --size=size --reps=reps --build-dir=build_dir --ductile=ductile_lib --keep=keep \
  --no-settle:settle=no -- "$@"
case $reps in *[!0-9]*|''|0) echo "compare-vector-push.sh: --reps takes a number above 0" >&2; exit 2 ;; esac
ductile_lib=${ductile_lib:-$build_dir/.libs/libductile.so}
prog=$build_dir/bench/vector_push
[ -x "$prog" ] || { echo "compare-vector-push.sh: $prog is missing (run 'make bench/vector_push')" >&2; exit 1; }

if [ -n "$keep" ]; then
  out=$keep
  mkdir -p "$out" || exit 1
else
  out=$(mktemp -d "${TMPDIR:-/tmp}/compare-vector-push.XXXXXX") || exit 1
  trap 'rm -rf "$out"' EXIT
fi

names=("std::vector, glibc" "std::vector, jemalloc" "std::vector, mimalloc" "std::vector, tcmalloc"
  "std::vector, ductile" "ductile::vector")
short=(glibc jemalloc mimalloc tcmalloc ductile ductile)
libs=("" "$jemalloc_lib" "$mimalloc_lib" "$tcmalloc_lib" "$ductile_lib" "$ductile_lib")
args=("" "" "" "" "" "--ductile-vector")
n=${#names[@]}
base=5  # the ratios are to ductile::vector's time

avail=()
why=()
for ((i = 0; i < n; i++)); do
  check_allocator "${short[i]}" "${libs[i]}" "$out"
  avail[i]=$status
  why[i]=$detail
done

# Before each timed run, twice the size pushed is mapped with huge-page
# advice, written and unmapped, untimed (vector_push --settle): every run
# starts with memory the (virtual) machine has backed, more than any run
# uses. Without it, ductile::vector's run of 256 MiB took 0.88 s on the
# machine of docs/measurements/vector-push.md (its huge-page faults
# waiting for the machine to back the memory), and 0.07 s after this step.
settle() {
  [ "$settle" = yes ] && env -u LD_PRELOAD "$prog" --settle "$size" >/dev/null 2>&1
  return 0
}

run_one() {  # index rep -> $out/<index>.<rep>
  local i=$1 r=$2 line rc
  settle
  local -a cmd=("$prog")
  [ -n "${args[i]}" ] && cmd+=("${args[i]}")
  cmd+=("$size")
  line=$(preloaded "${libs[i]}" "$out/$i.stderr" "${cmd[@]}")
  rc=$?
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    echo "compare-vector-push.sh: ${names[i]} failed (exit $rc); see $out/$i.stderr" >&2
    return 1
  fi
  echo "$line" >"$out/$i.$r"
}

echo "push_back of $size of uint64_t, $reps run(s) each; $(uname -r), $(nproc) CPUs, THP $(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
for ((r = 0; r < reps; r++)); do
  # Interleave the runs and rotate who starts, so drift hits all alike.
  for ((k = 0; k < n; k++)); do
    i=$(((k + r) % n))
    [ "${avail[i]}" = ok ] || continue
    printf '  run %d/%d: %-22s' $((r + 1)) "$reps" "${names[i]}" >&2
    if run_one "$i" "$r"; then
      sed -n 's/.*seconds=\([^ ]*\).*peak_rss_mib=\([^ ]*\).*/ \1 s, \2 MiB/p' "$out/$i.$r" >&2
    else
      echo >&2
      avail[i]=failed
      why[i]="failed: see the message above"
    fi
  done
done

field() {  # key file -> value
  sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2"
}
median_of() {  # key index -> the median over the runs
  local f
  for f in "$out/$2".[0-9]*; do field "$1" "$f"; done |
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() {  # a b -> a/b
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f\n", a / b }'
}

secs=()
for ((i = 0; i < n; i++)); do
  secs[i]=
  [ "${avail[i]}" = ok ] && secs[i]=$(median_of seconds "$i")
done

echo
printf '%-22s %9s %9s %13s %10s %11s %7s\n' "" seconds "x ductile" "peak RSS MiB" "x final" "moves/steps" copies
printf '%-22s %9s %9s %13s %10s %11s %7s\n' ---------------------- --------- --------- ------------- ---------- ----------- -------
for ((i = 0; i < n; i++)); do
  if [ "${avail[i]}" != ok ]; then
    printf '%-22s %9s   (%s)\n' "${names[i]}" unavailable "${why[i]}"
    continue
  fi
  last=$(ls "$out/$i".[0-9]* | tail -n 1)
  rss=$(median_of peak_rss_mib "$i")
  final_mib=$(awk -v f="$(field final "$last")" 'BEGIN { printf "%.1f", f / 1048576 }')
  x=$(ratio "${secs[i]}" "${secs[base]}")
  [ "$x" != n/a ] && x=${x}x
  copies=$(field copy "$last")
  printf '%-22s %9.3f %9s %13.1f %10s %11s %7s\n' "${names[i]}" "${secs[i]}" "$x" "$rss" \
    "$(ratio "$rss" "$final_mib")" "$(field moves "$last")/$(field steps "$last")" "${copies:--}"
done
echo "x ductile: time over ductile::vector's; x final: peak RSS over the final buffer; moves/steps: growth"
echo "steps of a buffer of 2 MiB or more, and those that moved it; copies: ductile's count of huge blocks copied"
