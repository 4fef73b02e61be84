#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The vector-doubling comparison: bench/vector_doubling under glibc,
# jemalloc, mimalloc, tcmalloc and ductile, plus the two bare-memory limits,
# in one go; prints a table (time, ratio to ductile, peak RSS, moves, copies)
# and the vector-doubling goals, and draws a PNG chart with gnuplot (bench/vector.gp)
# from the figures, which it keeps next to the chart (PATH with .dat for
# .png: one line per allocator, and the chart's subtitle).
#
#   bench/compare-vector.sh [--rounds N] [--top SIZE] [--reps N]
#                           [--png PATH | --docs | --no-png] [--build-dir DIR]
#                           [--ductile LIB] [--keep DIR]
#
#   --rounds N     rounds of the loop (default 10)
#   --top SIZE     exclusive top size, e.g. 1G (default 1G: the blocks go from
#                  4 bytes to 512 MiB)
#   --reps N       runs of each, interleaved; the table shows medians (default 1)
#   --png PATH     the chart (default vector-doubling.png in the build
#                  directory; the source tree is left alone)
#   --docs         the chart the README shows, docs/vector-doubling.png in the
#                  source tree, and its figures, docs/vector-doubling.dat: to
#                  be run on purpose, and committed (`make vector-chart`
#                  redraws it from the .dat alone)
#   --build-dir    where bench/vector_doubling and .libs/libductile.so are
#                  (default $BUILD_DIR, else the directory above this script)
#   --ductile LIB  the library preloaded as ductile
#   --keep DIR     keep the raw outputs (and the chart's data) in DIR
#   --many-threads "T..."  the many-blocks case: 64 buffers grown
#                  round-robin by doubling from 4 KiB to 16 MiB, writing each
#                  new half, --many-rounds rounds, once per thread count
#                  given (default "1 2 8"), against two limits, the same
#                  writes into one mapping: faulted before the clock starts
#                  (--bare-faulted: the writes alone), and faulted by the
#                  first round and kept (--bare-kept: memory that stays
#                  faulted, the first round's page faults included)
#   --many-rounds N  rounds of the many-blocks case (default 5)
#   --many-reps N  runs of each in the many-blocks case, interleaved; the
#                  tables show medians (default 1)
#   --no-many      leave the many-blocks case out
#   --no-settle    run each timed run straight after the one before (see settle)
#
# Environment: BUILD_DIR, DUCTILE_LIB, JEMALLOC_LIB, MIMALLOC_LIB,
# TCMALLOC_LIB. A peer whose library is missing, and ductile while its
# library does not export malloc yet, show as "unavailable". The runs are
# sequential: never two benchmarks at once.
set -u

script_dir=$(cd "$(dirname "$0")" && pwd)
. "$script_dir/allocators.sh"
src_dir=$(dirname "$script_dir")
build_dir=${BUILD_DIR:-$src_dir}
ductile_lib=${DUCTILE_LIB:-}
rounds=10
top=1G
reps=1
png=
keep=
many_threads="1 2 8"
many_rounds=5
many_reps=1
settle=yes


parse_options --rounds=rounds --top=top --reps=reps --png=png --no-png:png=none \
  --docs:png="$src_dir/docs/vector-doubling.png" \
  --build-dir=build_dir --ductile=ductile_lib --keep=keep --many-threads=many_threads \
  --many-rounds=many_rounds --many-reps=many_reps --no-many:many_threads= --no-settle:settle=no -- "$@"

case $png in
  '') png=$build_dir/vector-doubling.png ;;
  none) png= ;;
esac
case $rounds$reps$many_rounds$many_reps in *[!0-9]*|'') echo "compare-vector.sh: --rounds, --reps, --many-rounds and --many-reps take numbers" >&2; exit 2 ;; esac
ductile_lib=${ductile_lib:-$build_dir/.libs/libductile.so}
prog=$build_dir/bench/vector_doubling
if [ ! -x "$prog" ]; then
  echo "compare-vector.sh: $prog is missing (run 'make bench/vector_doubling')" >&2
  exit 1
fi

if [ -n "$keep" ]; then
  out=$keep
  mkdir -p "$out" || exit 1
else
  out=$(mktemp -d "${TMPDIR:-/tmp}/compare-vector.XXXXXX") || exit 1
  trap 'rm -rf "$out"' EXIT
fi

# --- what runs ----------------------------------------------------------------
names=(glibc jemalloc mimalloc tcmalloc ductile "bare mmap+THP" "bare faulted")
libs=("" "$jemalloc_lib" "$mimalloc_lib" "$tcmalloc_lib" "$ductile_lib" "" "")
args=("" "" "" "" "" "--bare-thp" "--bare-faulted")
n=${#names[@]}
ductile=4

avail=()
why=()
for ((i = 0; i < n; i++)); do
  avail[i]=yes
  why[i]=
  lib=${libs[i]}
  if [ -n "$lib" ] && [ ! -r "$lib" ]; then
    avail[i]=no
    why[i]="$lib not found"
  fi
done
if [ "${avail[ductile]}" = yes ] && ! nm -D --defined-only "$ductile_lib" 2>/dev/null | grep -qw malloc; then
  avail[ductile]=no
  why[ductile]="$ductile_lib does not export malloc yet"
fi

# Before each timed run, 2 GiB are mapped with huge-page advice, written and
# unmapped, untimed: every run starts with the same free memory, in whole
# huge pages that the (virtual) machine has already backed, more than any
# run here uses. Without it a run's huge-page faults cost what the run
# before left behind: after tcmalloc's many-blocks run (memory freed in
# 4 KiB pieces, every huge-page fault compacting) the kept limit took 2.5 s
# and ductile 2.7-3.3 s, after this step 0.32-0.33 s and 0.34 s. (With
# 1 GiB, ductile's many-blocks run, 1.1 GiB, took its last 75 MiB from
# memory the machine had not backed: 0.58 s.)
settle() {
  [ "$settle" = yes ] && env -u LD_PRELOAD "$prog" --bare-faulted --blocks 128 1 32M >/dev/null 2>&1
  return 0
}

run_one() {  # index rep -> writes $out/<index>.<rep>
  local i=$1 r=$2 line
  settle
  local -a cmd=("$prog")
  [ -n "${args[i]}" ] && cmd+=("${args[i]}")
  cmd+=("$rounds" "$top")
  line=$(preloaded "${libs[i]}" "$out/$i.stderr" "${cmd[@]}")
  local rc=$?
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    echo "compare-vector.sh: ${names[i]} failed (exit $rc); see $out/$i.stderr" >&2
    return 1
  fi
  echo "$line" >"$out/$i.$r"
}

echo "vector doubling: $rounds rounds to $top (exclusive), $reps run(s) each; $(uname -r), THP $(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
for ((r = 0; r < reps; r++)); do
  # Interleave the allocators and rotate who starts, so drift hits all alike.
  for ((k = 0; k < n; k++)); do
    i=$(((k + r) % n))
    [ "${avail[i]}" = yes ] || continue
    printf '  run %d/%d: %-14s' $((r + 1)) "$reps" "${names[i]}" >&2
    if run_one "$i" "$r"; then
      sed -n 's/.*seconds=\([^ ]*\).*/ \1 s/p' "$out/$i.$r" >&2
    else
      avail[i]=no
      why[i]="failed"
    fi
  done
done

# --- medians ----------------------------------------------------------------------
field() {  # key file -> value
  sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2"
}
median_of() {  # key prefix -> median over the files $out/<prefix>.<rep>
  local key=$1 prefix=$2 f
  for f in "$out/$prefix".[0-9]*; do field "$key" "$f"; done |
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

secs=()
rss=()
moves=()
copies=()
final=
for ((i = 0; i < n; i++)); do
  secs[i]=
  rss[i]=
  moves[i]=-
  copies[i]=-
  [ "${avail[i]}" = yes ] || continue
  secs[i]=$(median_of seconds "$i")
  rss[i]=$(median_of peak_rss_mib "$i")
  last=$(ls "$out/$i".[0-9]* | tail -n 1)
  m=$(field moves "$last")
  c=$(field copy "$last")
  [ -n "$m" ] && moves[i]=$m
  [ -n "$c" ] && copies[i]=$c
  [ -z "$final" ] && final=$(field final "$last")
done

human() {  # bytes -> "512 MiB"
  awk -v b="${1:-0}" 'BEGIN { split("B KiB MiB GiB TiB", u); i = 1; while (b >= 1024 && i < 5) { b /= 1024; i++ } printf "%g %s\n", b, u[i] }'
}

ratio() {  # a b -> a/b
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f\n", a / b }'
}

echo
printf '%-15s %9s %11s %14s %7s %7s\n' allocator seconds "x ductile" "peak RSS MiB" moves copies
printf '%-15s %9s %11s %14s %7s %7s\n' --------------- --------- ----------- -------------- ------- -------
for ((i = 0; i < n; i++)); do
  if [ "${avail[i]}" != yes ]; then
    printf '%-15s %9s   (%s)\n' "${names[i]}" unavailable "${why[i]}"
    continue
  fi
  x=$(ratio "${secs[i]}" "${secs[ductile]}")
  [ "$x" != n/a ] && x=${x}x
  printf '%-15s %9.3f %11s %14.1f %7s %7s\n' "${names[i]}" "${secs[i]}" "$x" "${rss[i]}" "${moves[i]}" "${copies[i]}"
done
echo "moves: reallocs of a block of 2 MiB or more that returned a new address; copies: ductile's own count (copy growth path)"

if [ "${avail[ductile]}" = yes ]; then
  fin_mib=$(awk -v f="$final" 'BEGIN { printf "%.1f", f / 1048576 }')
  echo
  echo "the vector-doubling goals, measured in this run:"
  echo "  glibc / ductile            $(ratio "${secs[0]}" "${secs[ductile]}")   (goal >= 3)"
  echo "  jemalloc / ductile         $(ratio "${secs[1]}" "${secs[ductile]}")   (goal >= 3)"
  echo "  ductile / bare mmap+THP    $(ratio "${secs[ductile]}" "${secs[5]}")   (goal <= 1.2)"
  echo "  ductile / bare faulted     $(ratio "${secs[ductile]}" "${secs[6]}")   (target beyond: <= 2)"
  echo "  copies once huge           ${copies[ductile]}      (goal 0)"
  echo "  peak RSS / final block     $(ratio "${rss[ductile]}" "$fin_mib")   (goal <= 1.1; final block $fin_mib MiB)"
fi

# --- many blocks growing together -------------------------------------------------------
# Each allocator and the two limits per thread count, after the loop above
# (never two benchmarks at once), --many-reps times interleaved; the table
# shows medians. Goals: time <= 1.3 x the limit, <= 5 % of the huge growth
# steps moving, peak RSS <= 1.1 x the live bytes. Two limits: the writes
# alone (faulted before the clock) and memory that stays faulted (the first
# round's faults paid, as every allocator pays them).
many_table() {  # threads
  local t=$1 i r f lim= kept=
  local -a mnames=("${names[@]:0:5}" "limit (faulted)" "limit (kept)")
  local -a mlibs=("${libs[@]:0:5}" "" "")
  local -a order=(5 6 0 1 2 3 4)
  for ((r = 0; r < many_reps; r++)); do
    for i in "${order[@]}"; do
      [ $i -lt 5 ] && [ "${avail[i]}" != yes ] && continue
      local -a cmd=("$prog" --blocks 64 --threads "$t")
      [ $i -eq 5 ] && cmd+=(--bare-faulted)
      [ $i -eq 6 ] && cmd+=(--bare-kept)
      cmd+=("$many_rounds" 32M)
      printf '  many blocks, %d thread(s), run %d/%d: %-14s\n' "$t" $((r + 1)) "$many_reps" "${mnames[i]}" >&2
      f=$out/many.$t.$i.$r
      settle
      if [ -n "${mlibs[i]}" ]; then
        env LD_PRELOAD="${mlibs[i]}" "${cmd[@]}" >"$f" 2>>"$out/many.stderr"
      else
        env -u LD_PRELOAD "${cmd[@]}" >"$f" 2>>"$out/many.stderr"
      fi
      [ -s "$f" ] || rm -f "$f"
    done
  done
  echo
  echo "many blocks: 64 buffers doubling round-robin from 4 KiB to 16 MiB, $many_rounds rounds, $t thread(s), medians of $many_reps"
  printf '%-15s %9s %9s %9s %12s %12s\n' allocator seconds "x faulted" "x kept" "moves/steps" "RSS / live"
  printf '%-15s %9s %9s %9s %12s %12s\n' --------------- --------- --------- --------- ------------ ------------
  for i in "${order[@]}"; do
    if [ $i -lt 5 ] && [ "${avail[i]}" != yes ]; then
      printf '%-15s %9s\n' "${mnames[i]}" unavailable
      continue
    fi
    if ! ls "$out/many.$t.$i".[0-9]* >/dev/null 2>&1; then
      printf '%-15s %9s\n' "${mnames[i]}" failed
      continue
    fi
    local secs steps moves peak live
    secs=$(median_of seconds "many.$t.$i")
    peak=$(median_of peak_rss_mib "many.$t.$i")
    live=$(median_of live_mib "many.$t.$i")
    steps=$(median_of huge_steps "many.$t.$i")
    moves=$(median_of moves "many.$t.$i")
    [ $i -eq 5 ] && lim=$secs
    [ $i -eq 6 ] && kept=$secs
    local x xk mv
    x=$(ratio "$secs" "$lim")
    xk=-
    [ $i -ne 5 ] && xk=$(ratio "$secs" "$kept")
    mv=-
    [ -n "$steps" ] && mv="$moves/$steps"
    printf '%-15s %9.3f %9s %9s %12s %12s\n' "${mnames[i]}" "$secs" "$x" "$xk" "$mv" "$(ratio "$peak" "$live")"
  done
}
for t in $many_threads; do many_table "$t"; done
[ -n "$many_threads" ] && echo "the many-blocks goals: ductile <= 1.3 x the limit of memory that stays faulted (x kept), moves <= 5 % of the huge growth steps, RSS / live <= 1.1"

# --- chart --------------------------------------------------------------------------
if [ -n "$png" ]; then
  if ! command -v gnuplot >/dev/null 2>&1; then
    echo "compare-vector.sh: gnuplot not found, no chart" >&2
    exit 0
  fi
  dat=${png%.png}.dat
  mkdir -p "$(dirname "$png")"
  subtitle="$rounds rounds, 4 B to $(human "$final") by doubling, $(uname -r), THP $(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
  {
    echo "# The vector-doubling chart's figures: bench/compare-vector.sh wrote them,"
    echo "# bench/vector.gp draws them (make vector-chart, for docs/vector-doubling.dat)."
    echo "# subtitle: $subtitle"
    echo "# allocator, seconds (median of $reps), peak RSS (MiB), bar colour"
  } >"$dat"
  for ((i = 0; i < n; i++)); do
    [ "${avail[i]}" = yes ] || continue
    colour=0x4477aa
    [ $i -eq $ductile ] && colour=0xcc3311
    [ $i -ge 5 ] && colour=0x999999
    printf '"%s" %s %s %d\n' "${names[i]}" "${secs[i]}" "${rss[i]}" "$colour" >>"$dat"
  done
  if gnuplot -e "datafile='$dat'; outfile='$png'" "$script_dir/vector.gp"; then
    echo
    echo "chart: $png (figures: $dat)"
  else
    echo "compare-vector.sh: gnuplot failed" >&2
  fi
fi
