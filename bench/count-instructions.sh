#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Instructions per step of bench/free_path (a 16-byte malloc+free pair and
# one step of a 1000-block churn of 16-128 bytes) under callgrind, for each
# library given (preloaded; "glibc" for the C library's own malloc). The
# count is free of timing noise: it compares builds of the fast paths
# exactly (docs/measurements/hardened.md, "Cost").
#
#   bench/count-instructions.sh [--steps N] [--build-dir DIR] LIB...
#
# Each library runs twice, with 0 and N steps (default 100000); the
# difference divided by N is printed, so the program's and the allocator's
# start-up cancel out. The figure includes free_path's own loop (about 65
# instructions per step: the random numbers, the loop, the PLT calls);
# `glibc` shows it against the C library.
set -u

script_dir=$(cd "$(dirname "$0")" && pwd)
. "$script_dir/allocators.sh"
build_dir=${BUILD_DIR:-$(dirname "$script_dir")}
steps=100000
libs=()
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --steps=*) steps=${1#*=}; shift ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --build-dir=*) build_dir=${1#*=}; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "count-instructions.sh: unknown option $1" >&2; usage 2 >&2 ;;
    *) libs+=("$1"); shift ;;
  esac
done
[ ${#libs[@]} -gt 0 ] || libs=("$build_dir/.libs/libductile.so")
case $steps in *[!0-9]*|''|0) echo "count-instructions.sh: --steps takes a positive number" >&2; exit 2 ;; esac
prog=$build_dir/bench/free_path
if [ ! -x "$prog" ]; then
  echo "count-instructions.sh: $prog is missing (run 'make bench/free_path')" >&2
  exit 1
fi
command -v valgrind >/dev/null || { echo "count-instructions.sh: valgrind is missing" >&2; exit 1; }

# collected LIB STEPS: the instructions callgrind counted for one run.
collected() {
  local pre=
  [ "$1" = glibc ] || pre=$1
  LD_PRELOAD=$pre valgrind --tool=callgrind --callgrind-out-file=/dev/null "$prog" "$2" 2>&1 |
    sed -n 's/^==[0-9]*== Collected : *//p'
}

for lib in "${libs[@]}"; do
  if [ "$lib" != glibc ] && [ ! -f "$lib" ]; then
    echo "count-instructions.sh: $lib not found" >&2
    exit 1
  fi
  base=$(collected "$lib" 0)
  run=$(collected "$lib" "$steps")
  if [ -z "$base" ] || [ -z "$run" ]; then
    echo "count-instructions.sh: callgrind gave no count for $lib" >&2
    exit 1
  fi
  awk -v a="$base" -v b="$run" -v n="$steps" -v l="$lib" \
    'BEGIN { printf "%8.1f instructions per step  %s\n", (b - a) / n, l }'
done
