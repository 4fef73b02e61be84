#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Small-object comparison: glibc, jemalloc, mimalloc, tcmalloc and ductile,
# measured in one go and printed as ratios (see docs/measurements/small-objects.md).
#
#   bench/compare-small.sh [--quick] [--reps N] [--min-time S]
#                          [--pair-reps N] [--pair-min-time S]
#                          [--build-dir DIR] [--ductile LIB] [--out DIR]
#                          [--no-syscalls]
#
# Runs bench/malloc_bench (Google Benchmark; plain malloc/free) and
# bench/rss_per_block (sizes 8, 24, 72, 200) under each allocator with
# LD_PRELOAD, interleaving the allocators within every repetition (the
# starting allocator rotates): --reps repetitions of the batch and
# producer/consumer benchmarks and of rss_per_block, each benchmark for
# --min-time seconds, then --pair-reps shorter ones (--pair-min-time each)
# of the malloc+free pairs, whose time moves with the machine's state from
# one second to the next. Then it counts memory syscalls per malloc+free
# pair in steady state with perf (syscall tracepoints) or, failing that,
# strace -f -c. bench/ratios.py prints the median tables.
#
# Environment: DUCTILE_LIB (the library to preload as ductile; default
# BUILD_DIR/.libs/libductile.so), BUILD_DIR (where bench/malloc_bench and
# bench/rss_per_block are; default the directory above this script),
# JEMALLOC_LIB, MIMALLOC_LIB, TCMALLOC_LIB (peer libraries).
set -u

script_dir=$(cd "$(dirname "$0")" && pwd)
. "$script_dir/allocators.sh"
build_dir=${BUILD_DIR:-$(dirname "$script_dir")}
ductile_lib=${DUCTILE_LIB:-}
reps=9
min_time=0.2
pair_reps=
pair_min_time=0.05
quick=no
out=
syscalls=yes


parse_options --quick:quick=yes --reps=reps --min-time=min_time --pair-reps=pair_reps \
  --pair-min-time=pair_min_time --build-dir=build_dir --ductile=ductile_lib --out=out \
  --no-syscalls:syscalls=no -- "$@"

if [ "$quick" = yes ]; then
  reps=1
  min_time=0.05
  pair_reps=${pair_reps:-2}
  sys_iters="2000 22000"
else
  pair_reps=${pair_reps:-25}
  sys_iters="10000 210000"
fi
ductile_lib=${ductile_lib:-$build_dir/.libs/libductile.so}

mb=$build_dir/bench/malloc_bench
rpb=$build_dir/bench/rss_per_block
for p in "$mb" "$rpb"; do
  if [ ! -x "$p" ]; then
    echo "compare-small.sh: $p is missing (run 'make bench/malloc_bench bench/rss_per_block')" >&2
    exit 1
  fi
done

if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/compare-small.XXXXXX") || exit 1
fi
mkdir -p "$out/mb" "$out/pair" "$out/rss" "$out/sys" "$out/log" || exit 1
rm -f "$out"/mb/* "$out"/pair/* "$out"/rss/* "$out"/sys/* "$out"/log/* "$out"/lib/*

# --- allocators -------------------------------------------------------------
names=(glibc jemalloc mimalloc tcmalloc ductile)
declare -A lib
lib[glibc]=
lib[jemalloc]=$jemalloc_lib
lib[mimalloc]=$mimalloc_lib
lib[tcmalloc]=$tcmalloc_lib
lib[ductile]=$ductile_lib
# Preload a private copy of the build's library, so that a rebuild during the
# run (libtool relinks it in place) cannot swap or remove it under us.
if [ -f "$ductile_lib" ]; then
  mkdir -p "$out/lib" && cp -L "$ductile_lib" "$out/lib/libductile.so" &&
    lib[ductile]=$out/lib/libductile.so
fi

: >"$out/allocs.tsv"
avail=()
for n in "${names[@]}"; do
  l=${lib[$n]}
  check_allocator "$n" "$l" "$out/log"
  [ "$n" = ductile ] && [ "$l" != "$ductile_lib" ] && detail="$detail (copy of $ductile_lib)"
  printf '%s\t%s\t%s\n' "$n" "$status" "$detail" >>"$out/allocs.tsv"
  [ "$status" = ok ] && avail+=("$n")
  printf '%-9s %s  %s\n' "$n" "$status" "$detail" >&2
done

# Preload runs the program only: `env` sets LD_PRELOAD for its child, so a
# wrapper (perf, strace) is not itself run under the allocator.
# A library that cannot be loaded (e.g. relinked mid-run) makes ld.so warn
# and run the program under glibc: count that as a failure, not as a result.
run_under() {
  local n=$1 log=$2; shift 2
  env LD_PRELOAD="${lib[$n]}" "$@" 2>>"$log" || return
  ! grep -q 'cannot be preloaded' "$log"
}

{
  printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
  printf 'machine\t%s, %s CPUs\n' \
    "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" "$(nproc)"
  printf 'kernel\t%s\n' "$(uname -r)"
  printf 'thp\t%s\n' "$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
  printf 'reps\t%s\n' "$reps"
  printf 'min_time\t%s s\n' "$min_time"
  printf 'pair_reps\t%s\n' "$pair_reps"
  printf 'pair_min_time\t%s s\n' "$pair_min_time"
  printf 'mode\t%s\n' "$([ "$quick" = yes ] && echo quick || echo full)"
} >"$out/meta.tsv"

echo "results in $out (load average: $(cut -d' ' -f1-3 /proc/loadavg))" >&2

# CPU time that the rest of the machine used while the timed runs ran: all
# busy time from /proc/stat minus our own children's (bash's `times`). On a
# 2-core machine anything above a few per cent makes the figures noise.
busy_s() {
  awk -v hz="$(getconf CLK_TCK)" '/^cpu /{printf "%.2f %.2f\n", ($2+$3+$4+$7+$8)/hz, $9/hz; exit}' /proc/stat
}
# `times` must run in this shell (a $(...) subshell has no children yet).
children_s() {
  times >"$out/log/times"
  awk 'NR==2{t=0; for(i=1;i<=NF;i++){split($i,a,/[ms]/); t+=a[1]*60+a[2]}; printf "%.2f\n", t}' "$out/log/times"
}
read -r busy0 steal0 <<<"$(busy_s)"
children_s >"$out/log/kids0"; kids0=$(cat "$out/log/kids0")
wall0=$(date +%s.%N)

# --- timed runs, interleaved ------------------------------------------------
# bench_under NAME KIND REP MIN_TIME FILTER: malloc_bench's benchmarks that
# match FILTER under allocator NAME, into KIND/NAME.REP.json (KIND: mb or
# pair); a failed run leaves no JSON, and its log's tail on stderr.
bench_under() {
  local n=$1 kind=$2 r=$3 log=$out/log/$2.$1.$3
  : >"$log"
  if ! run_under "$n" "$log" "$mb" --benchmark_min_time="$4" --benchmark_filter="$5" \
      --benchmark_out="$out/$kind/$n.$r.json" --benchmark_out_format=json >>"$log"; then
    echo "  malloc_bench ($kind) under $n failed; see $log" >&2
    tail -n 5 "$log" | sed 's/^/  | /' >&2
    rm -f "$out/$kind/$n.$r.json"
  fi
}

rss_sizes="8 24 72 200"
na=${#avail[@]}
for ((r = 1; r <= reps; r++)); do
  for ((k = 0; k < na; k++)); do
    n=${avail[$(((k + r - 1) % na))]}
    printf 'rep %d/%d: %s\n' "$r" "$reps" "$n" >&2
    bench_under "$n" mb "$r" "$min_time" '^BM_(Batch|Producer)'
    for s in $rss_sizes; do
      : >"$out/log/rss.$n.$s.$r"
      if ! run_under "$n" "$out/log/rss.$n.$s.$r" "$rpb" "$s" \
          >"$out/rss/$n.$s.$r.txt"; then
        echo "  rss_per_block $s under $n failed; see $out/log/rss.$n.$s.$r" >&2
        rm -f "$out/rss/$n.$s.$r.txt"
      fi
    done
  done
done

# The pairs: many short runs, every allocator in turn, so that each one's
# runs are spread alike over the machine's slower and faster spells.
for ((r = 1; r <= pair_reps; r++)); do
  for ((k = 0; k < na; k++)); do
    n=${avail[$(((k + r - 1) % na))]}
    printf 'pairs %d/%d: %s\n' "$r" "$pair_reps" "$n" >&2
    bench_under "$n" pair "$r" "$pair_min_time" '^BM_Pair/'
  done
done

read -r busy1 steal1 <<<"$(busy_s)"
children_s >"$out/log/kids1"; kids1=$(cat "$out/log/kids1")
wall1=$(date +%s.%N)
other=$(awk -v b0="$busy0" -v b1="$busy1" -v k0="$kids0" -v k1="$kids1" \
  -v w0="$wall0" -v w1="$wall1" -v s0="$steal0" -v s1="$steal1" -v n="$(nproc)" 'BEGIN{
    o=(b1-b0)-(k1-k0); if (o<0) o=0; w=w1-w0;
    printf "%.1f CPU-s of %.0f s x %d CPUs (%.1f %%); steal %.1f CPU-s\n", o, w, n, 100*o/(w*n), s1-s0 }')
printf 'other_load\t%s\n' "$other" >>"$out/meta.tsv"
echo "other processes during the timed runs: $other" >&2

# --- syscalls per pair --------------------------------------------------------
mem_syscalls="mmap munmap mremap mprotect madvise process_madvise brk"
method=none
if [ "$syscalls" = yes ]; then
  events=raw_syscalls:sys_enter
  for s in $mem_syscalls; do events="$events,syscalls:sys_enter_$s"; done
  if command -v perf >/dev/null 2>&1 &&
      perf stat -x, -e "$events" -o "$out/log/perf-probe" /bin/true >/dev/null 2>&1 &&
      ! grep -q '<not' "$out/log/perf-probe"; then
    method=perf
  elif command -v strace >/dev/null 2>&1 && strace -f -c -o /dev/null /bin/true 2>/dev/null; then
    method=strace
  else
    echo "neither perf syscall tracepoints nor strace work here: no syscall counts" \
         "(apt-get install -y strace)" >&2
  fi
fi
printf 'syscall_method\t%s\n' "$method" >>"$out/meta.tsv"
printf 'sys_iters\t%s\n' "$(echo "$sys_iters" | sed 's/ / and /') iterations" >>"$out/meta.tsv"

if [ "$method" != none ]; then
  for n in "${avail[@]}"; do
    printf 'syscalls: %s\n' "$n" >&2
    for s in 16 64 4096 65536 1048576; do
      for it in $sys_iters; do
        f=$out/sys/$n.$s.$it
        args=("$mb" "--benchmark_filter=^BM_Pair/$s/" "--pair_iterations=$it"
              "--benchmark_out=$f.json" --benchmark_out_format=json)
        if [ "$method" = perf ]; then
          perf stat -x, -e "$events" -o "$f.txt" \
            env LD_PRELOAD="${lib[$n]}" "${args[@]}" >"$out/log/sys.$n.$s.$it" 2>&1
        else
          strace -f -c -o "$f.txt" \
            env LD_PRELOAD="${lib[$n]}" "${args[@]}" >"$out/log/sys.$n.$s.$it" 2>&1
        fi
        if [ $? -ne 0 ] || grep -q 'cannot be preloaded' "$out/log/sys.$n.$s.$it"; then
          echo "  BM_Pair/$s under $n failed; see $out/log/sys.$n.$s.$it" >&2
          rm -f "$f.json"
        fi
      done
    done
  done
fi

python3 "$script_dir/ratios.py" "$out"
