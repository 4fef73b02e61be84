#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# What idle threads keep resident (bench/idle_threads): 64 threads allocate,
# write and free two blocks of every size from 16 KiB to 2 MiB, then sleep;
# the resident-set growth in MiB right after the frees and WAIT seconds
# later, under glibc, jemalloc (defaults, and with its background thread
# and dirty_decay_ms:1000), mimalloc, tcmalloc and ductile (decay_ms:1000),
# each REPS times, interleaved.
#
#   bench/compare-idle.sh [--build-dir DIR] [--ductile LIB] [--before LIB]
#                         [--threads N] [--wait S] [--reps N]
#
# Environment: BUILD_DIR, DUCTILE_LIB, JEMALLOC_LIB, MIMALLOC_LIB,
# TCMALLOC_LIB. RSS does not depend on the load of the machine.
set -u

script_dir=$(cd "$(dirname "$0")" && pwd)
. "$script_dir/allocators.sh"

build_dir=${BUILD_DIR:-$(dirname "$script_dir")}
ductile_lib=${DUCTILE_LIB:-}
before_lib=
threads=64
wait_s=2
reps=3
parse_options --build-dir=build_dir --ductile=ductile_lib --before=before_lib --threads=threads \
  --wait=wait_s --reps=reps -- "$@"
ductile_lib=${ductile_lib:-$build_dir/.libs/libductile.so}
prog=$build_dir/bench/idle_threads
[ -x "$prog" ] || { echo "$(basename "$0"): $prog not built (make bench/idle_threads)" >&2; exit 1; }
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

jemalloc_bg=background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0
names=(glibc jemalloc jemalloc-bg mimalloc tcmalloc)
libs=("" "$jemalloc_lib" "$jemalloc_lib" "$mimalloc_lib" "$tcmalloc_lib")
envs=("" "" "MALLOC_CONF=$jemalloc_bg" "" "")
if [ -n "$before_lib" ]; then
  names+=(ductile-before)
  libs+=("$before_lib")
  envs+=("DUCTILE_CONF=decay_ms:1000")
fi
names+=(ductile)
libs+=("$ductile_lib")
envs+=("DUCTILE_CONF=decay_ms:1000")

declare -A after later
for ((r = 0; r < reps; r++)); do
  for i in "${!names[@]}"; do
    check_allocator "${names[$i]}" "${libs[$i]}" "$logdir"
    [ "$status" = ok ] || continue
    read -r a l < <(env ${libs[$i]:+LD_PRELOAD=${libs[$i]}} ${envs[$i]} "$prog" "$threads" "$wait_s")
    after[$i]+="${a:-?} "
    later[$i]+="${l:-?} "
  done
done
printf '%-16s %-28s %-28s\n' allocator "MiB after the frees" "MiB ${wait_s} s later"
for i in "${!names[@]}"; do
  printf '%-16s %-28s %-28s\n' "${names[$i]}" "${after[$i]:--}" "${later[$i]:--}"
done
echo "($threads threads; jemalloc-bg: MALLOC_CONF=$jemalloc_bg; ductile: DUCTILE_CONF=decay_ms:1000)"
