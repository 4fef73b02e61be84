#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# How long the statistics take to read (bench/stats_latency.c) under glibc,
# jemalloc, mimalloc, tcmalloc and ductile, printed as one Markdown table:
# the median (and fastest) microseconds of a read of the bytes allocated
# (mallctl's epoch then stats.allocated, or tcmalloc's numeric property), of
# mallinfo2, and of malloc_stats (or the allocator's own printer), with
# --live small blocks live. "-" where the allocator has no such read of its
# own. --before LIB adds a column for another ductile build (an older one,
# say). --evict-mib N writes N MiB (more than the last-level cache) before
# each read, untimed, so that reads start with cold caches.
#
#   bench/stats-latency.sh [--live N] [--reps N] [--evict-mib N] [--before LIB]
#                          [--build-dir DIR] [--ductile LIB]
#
# Environment: DUCTILE_LIB, BUILD_DIR (where bench/stats_latency is),
# JEMALLOC_LIB, MIMALLOC_LIB, TCMALLOC_LIB.
set -u

script_dir=$(cd "$(dirname "$0")" && pwd)
. "$script_dir/allocators.sh"
build_dir=${BUILD_DIR:-$(dirname "$script_dir")}
ductile_lib=${DUCTILE_LIB:-}
before_lib=
live=100000
reps=2000
evict_mib=0

parse_options --live=live --reps=reps --evict-mib=evict_mib --before=before_lib --build-dir=build_dir --ductile=ductile_lib -- "$@"

ductile_lib=${ductile_lib:-$build_dir/.libs/libductile.so}
prog=$build_dir/bench/stats_latency
[ -x "$prog" ] || { echo "stats-latency.sh: $prog is missing (run 'make bench/stats_latency')" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

names=(glibc jemalloc mimalloc tcmalloc)
libs=("" "$jemalloc_lib" "$mimalloc_lib" "$tcmalloc_lib")
if [ -n "$before_lib" ]; then
  names+=("ductile-before")
  libs+=("$before_lib")
fi
names+=(ductile)
libs+=("$ductile_lib")

cols=()
for i in "${!names[@]}"; do
  check_allocator "${names[$i]}" "${libs[$i]}" "$out"
  if [ "$status" != ok ]; then
    echo "# ${names[$i]}: $detail (skipped)"
    continue
  fi
  # Background threads and prefault helpers stay as each allocator has them.
  LD_PRELOAD=${libs[$i]} "$prog" "$live" "$reps" "$evict_mib" >"$out/${names[$i]}" 2>"$out/${names[$i]}.err" ||
    { echo "# ${names[$i]}: failed: $(head -c 200 "$out/${names[$i]}.err")"; continue; }
  cols+=("${names[$i]}")
done

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs; $live small blocks live;"
echo "# microseconds per read: median (fastest) of $reps reads, malloc_stats $((reps / 10));"
echo "# $evict_mib MiB written before each read"
header="| read |" rule="|---|"
for c in "${cols[@]}"; do header+=" $c |"; rule+="---:|"; done
echo "$header"
echo "$rule"
for what in allocated mallinfo2 malloc_stats; do
  row="| $what |"
  for c in "${cols[@]}"; do
    cell=$(awk -v w="$what" '$1 == w { printf "%s (%s)", $(NF - 1), $NF }' "$out/$c")
    row+=" ${cell:--} |"
  done
  echo "$row"
done
