#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The workload suite: bench/workloads/* and bench/vector_doubling
# under glibc, jemalloc, mimalloc, tcmalloc and ductile in one go,
# interleaved (for each repetition, for each workload, each allocator in
# turn, the first allocator rotating); prints, per workload, the median time
# and peak RSS with ratios to ductile, then the geometric means and the
# suite's goals (bench/workloads.py), and draws a PNG chart with gnuplot.
#
#   bench/compare-workloads.sh [--quick] [--reps N] [--only W1,W2,...]
#                              [--png PATH | --no-png] [--md PATH]
#                              [--build-dir DIR] [--ductile LIB] [--before LIB]
#                              [--out DIR] [--timeout S]
#
#   --quick        smaller workloads, 3 repetitions: a few minutes
#   --reps N       repetitions (default 7; quick 3); the tables show medians
#   --only LIST    only these workloads (comma-separated names, see below)
#   --png PATH     the chart (default docs/workloads.png in the source tree)
#   --md PATH      also write the tables as Markdown to PATH
#   --build-dir    where bench/workloads/* and .libs/libductile.so are
#                  (default $BUILD_DIR, else the directory above this script)
#   --ductile LIB  the library preloaded as ductile
#   --before LIB   also another ductile build (say, the last release's),
#                  shown as "before", in the same interleaved run
#   --out DIR      keep the raw results (results.tsv, logs) in DIR
#   --timeout S    a run longer than S seconds counts as hung (default 300)
#
# Workloads: larson xmalloc cache-scratch medium-cycle large-cycle churn
# tree vecstr thread-churn short-threads batch prodcons pair-churn
# small-program startup vector-doubling. Time is what each program
# prints (its own clock around the work); peak RSS is measured outside it
# with /usr/bin/time -f %M (the maximum resident set of the process).
#
# The workloads that fault in hundreds of MiB (large-cycle, vector-doubling)
# run once unmeasured right before each measured run, under the same
# allocator. On a virtual machine whose host takes back the guest's free
# memory, the first fault of a page the host took back costs the host's
# fault as well; which allocator ran just before decided how much of the
# memory a program faults in was still backed (vector-doubling under two
# identical ductile builds: 0.09 s right after a build that used huge pages,
# 0.7 s after an allocator that did not). The warm-up leaves every allocator
# the same: the memory it just used.
#
# Environment: BUILD_DIR, DUCTILE_LIB, JEMALLOC_LIB, MIMALLOC_LIB,
# TCMALLOC_LIB. A peer whose library is missing shows as unavailable. The
# runs are sequential: never run two benchmarks at once on this machine.
set -u

script_dir=$(cd "$(dirname "$0")" && pwd)
. "$script_dir/allocators.sh"
src_dir=$(dirname "$script_dir")
build_dir=${BUILD_DIR:-$src_dir}
ductile_lib=${DUCTILE_LIB:-}
before_lib=
quick=no
reps=
only=
png=$src_dir/docs/workloads.png
md=
out=
tmo=300


parse_options --quick:quick=yes --reps=reps --only=only --png=png --no-png:png= --md=md \
  --build-dir=build_dir --ductile=ductile_lib --before=before_lib --out=out --timeout=tmo -- "$@"

[ -n "$reps" ] || { [ "$quick" = yes ] && reps=3 || reps=7; }
case $reps$tmo in *[!0-9]*|'') echo "compare-workloads.sh: --reps and --timeout take numbers" >&2; exit 2 ;; esac
ductile_lib=${ductile_lib:-$build_dir/.libs/libductile.so}
timebin=/usr/bin/time
if [ ! -x "$timebin" ]; then
  echo "compare-workloads.sh: $timebin is missing (apt-get install -y time)" >&2
  exit 1
fi

# --- workloads: name, program, full arguments, quick arguments ---------------
wl=$build_dir/bench/workloads
w_names=(larson xmalloc cache-scratch medium-cycle large-cycle churn tree vecstr thread-churn short-threads
         batch prodcons pair-churn small-program startup vector-doubling)
w_progs=("$wl/larson" "$wl/xmalloc" "$wl/cache_scratch" "$wl/medium_cycle" "$wl/medium_cycle"
         "$wl/churn" "$wl/tree" "$wl/vecstr" "$wl/thread_churn" "$wl/short_threads"
         "$wl/batch" "$wl/prodcons" "$wl/pair_churn" "$wl/small_program" "$wl/startup" "$build_dir/bench/vector_doubling")
w_full=("1" "1" "1" "1" "0.4 12 5120 25600" "1" "1" "1" "1" "1" "1" "1" "1" "1" "1" "3 512M")
# Workloads run once unmeasured before each measured run (see above).
w_warm=(no no no no yes no no no no no no no no no no yes)
w_quick=("0.25" "0.25" "0.25" "0.25" "0.1 12 5120 25600" "0.25" "0.25" "0.25" "0.25" "0.25"
         "0.25" "0.25" "0.1" "0.25" "0.25" "1 256M")

sel=()
for ((w = 0; w < ${#w_names[@]}; w++)); do
  if [ -n "$only" ] && [[ ",$only," != *",${w_names[w]},"* ]]; then continue; fi
  if [ ! -x "${w_progs[w]}" ]; then
    echo "compare-workloads.sh: ${w_progs[w]} is missing (run 'make workloads')" >&2
    exit 1
  fi
  sel+=("$w")
done
if [ ${#sel[@]} -eq 0 ]; then
  echo "compare-workloads.sh: no workload selected" >&2
  exit 2
fi

# --- allocators ---------------------------------------------------------------
a_names=(glibc jemalloc mimalloc tcmalloc ductile)
a_libs=("" "$jemalloc_lib" "$mimalloc_lib" "$tcmalloc_lib" "$ductile_lib")
if [ -n "$before_lib" ]; then
  a_names=(glibc jemalloc mimalloc tcmalloc before ductile)
  a_libs=("" "$jemalloc_lib" "$mimalloc_lib" "$tcmalloc_lib" "$before_lib" "$ductile_lib")
fi

if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/compare-workloads.XXXXXX") || exit 1
fi
mkdir -p "$out/log" || exit 1
rm -f "$out"/log/* "$out/results.tsv" "$out/allocs.tsv"

avail=()
for ((a = 0; a < ${#a_names[@]}; a++)); do
  check_allocator "${a_names[a]}" "${a_libs[a]}" "$out/log"
  printf '%s\t%s\t%s\n' "${a_names[a]}" "$status" "$detail" >>"$out/allocs.tsv"
  printf '%-9s %s  %s\n' "${a_names[a]}" "$status" "$detail" >&2
  [ "$status" = ok ] && avail+=("$a")
done

busy=$(pgrep -fa 'vector_doubling|compare-small|compare-vector|malloc_bench|rss_per_block|huge_bench|chunk_bench' | grep -v "^$$ " || true)
[ -n "$busy" ] && printf 'compare-workloads.sh: WARNING: another benchmark is running:\n%s\n' "$busy" >&2

{
  printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
  printf 'machine\t%s, %s CPUs\n' "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" "$(nproc)"
  printf 'kernel\t%s\n' "$(uname -r)"
  printf 'thp\t%s\n' "$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
  printf 'mode\t%s\n' "$([ "$quick" = yes ] && echo quick || echo full)"
  printf 'reps\t%s\n' "$reps"
  for w in "${sel[@]}"; do
    if [ "$quick" = yes ]; then args=${w_quick[w]}; else args=${w_full[w]}; fi
    printf 'args\t%s\t%s %s\n' "${w_names[w]}" "$(basename "${w_progs[w]}")" "$args"
  done
} >"$out/meta.tsv"

echo "results in $out; $reps repetition(s), $([ "$quick" = yes ] && echo quick || echo full) mode; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# --- one run --------------------------------------------------------------------
# /usr/bin/time measures the peak RSS; `env` sets LD_PRELOAD for the program
# only, so neither time nor timeout runs under the allocator measured.
run_one() {  # workload allocator rep
  local w=$1 a=$2 r=$3 args tag rc secs kib
  if [ "$quick" = yes ]; then args=${w_quick[w]}; else args=${w_full[w]}; fi
  tag=${w_names[w]}.${a_names[a]}.$r
  if [ "${w_warm[w]}" = yes ]; then
    # shellcheck disable=SC2086
    timeout -k 5 "$tmo" env LD_PRELOAD="${a_libs[a]}" "${w_progs[w]}" $args >/dev/null 2>&1
  fi
  # shellcheck disable=SC2086
  "$timebin" -f %M -o "$out/log/$tag.rss" \
    timeout -k 5 "$tmo" env LD_PRELOAD="${a_libs[a]}" "${w_progs[w]}" $args \
    >"$out/log/$tag.out" 2>"$out/log/$tag.err"
  rc=$?
  secs=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' "$out/log/$tag.out" | head -n 1)
  kib=$(grep -E '^[0-9]+$' "$out/log/$tag.rss" 2>/dev/null | tail -n 1)
  if [ $rc -ne 0 ] || [ -z "$secs" ] || [ -z "$kib" ]; then
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && rc="timeout($tmo s)"
    printf '%s\t%s\t%s\t\t\t%s\n' "${w_names[w]}" "${a_names[a]}" "$r" "$rc" >>"$out/results.tsv"
    printf ' FAILED (%s; see %s)\n' "$rc" "$out/log/$tag.err" >&2
    return 1
  fi
  printf '%s\t%s\t%s\t%s\t%s\tok\n' "${w_names[w]}" "${a_names[a]}" "$r" "$secs" "$kib" >>"$out/results.tsv"
  printf ' %8.3f s %8.1f MiB\n' "$secs" "$(awk -v k="$kib" 'BEGIN { print k / 1024 }')" >&2
}

# CPU time the rest of the machine used during the timed runs: all busy time
# from /proc/stat minus our own children's (bash's `times`, which must run in
# this shell). On 2 cores anything above a few per cent makes the figures noise.
busy_s() {
  awk -v hz="$(getconf CLK_TCK)" '/^cpu /{printf "%.2f\n", ($2+$3+$4+$7+$8)/hz; exit}' /proc/stat
}
children_s() {
  times >"$out/log/times"
  awk 'NR==2{t=0; for(i=1;i<=NF;i++){split($i,a,/[ms]/); t+=a[1]*60+a[2]}; printf "%.2f\n", t}' "$out/log/times"
}
busy0=$(busy_s)
children_s >"$out/log/kids0"; kids0=$(cat "$out/log/kids0")

na=${#avail[@]}
t0=$(date +%s)
for ((r = 1; r <= reps; r++)); do
  for w in "${sel[@]}"; do
    for ((k = 0; k < na; k++)); do
      a=${avail[$(((k + r - 1) % na))]}
      printf 'rep %d/%d  %-16s %-9s' "$r" "$reps" "${w_names[w]}" "${a_names[a]}" >&2
      run_one "$w" "$a" "$r"
    done
  done
done
t1=$(date +%s)
busy1=$(busy_s)
children_s >"$out/log/kids1"; kids1=$(cat "$out/log/kids1")
other=$(awk -v b0="$busy0" -v b1="$busy1" -v k0="$kids0" -v k1="$kids1" -v w="$((t1 - t0))" \
  -v n="$(nproc)" 'BEGIN { o = (b1 - b0) - (k1 - k0); if (o < 0) o = 0; if (w < 1) w = 1;
    printf "%.1f CPU-s of %d s x %d CPUs (%.1f %%)", o, w, n, 100 * o / (w * n) }')
printf 'elapsed\t%s s\n' "$((t1 - t0))" >>"$out/meta.tsv"
printf 'other_load\t%s\n' "$other" >>"$out/meta.tsv"
echo "other processes during the timed runs: $other" >&2

# --- tables and chart -------------------------------------------------------------
py_args=("$out")
[ -n "$md" ] && py_args+=(--md "$md")
if [ -n "$png" ]; then
  if command -v gnuplot >/dev/null 2>&1; then
    py_args+=(--chart-data "$out/chart")
  else
    echo "compare-workloads.sh: gnuplot not found, no chart" >&2
    png=
  fi
fi
python3 "$script_dir/workloads.py" "${py_args[@]}" || exit 1

if [ -n "$png" ]; then
  mkdir -p "$(dirname "$png")"
  subtitle="$(sed -n 's/^mode\t//p' "$out/meta.tsv") mode, medians of $reps, $(uname -r), THP $(sed -n 's/^thp\t//p' "$out/meta.tsv"), $(nproc) CPUs"
  if gnuplot -e "datadir='$out/chart'; outfile='$png'; subtitle='$subtitle'" "$script_dir/workloads.gp"; then
    echo
    echo "chart: $png"
  else
    echo "compare-workloads.sh: gnuplot failed" >&2
  fi
fi
