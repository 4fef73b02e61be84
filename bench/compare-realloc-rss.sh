#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Resident memory after medium blocks grow into the huge range: 500 blocks of
# 1 MiB from malloc, grown by realloc to 2 MiB, untouched and fully written
# first (bench/realloc_rss), under glibc, jemalloc, mimalloc, tcmalloc and
# ductile (also with DUCTILE_CONF=thp:never), in one run; prints the
# resident-set growth in MiB of each.
#
#   bench/compare-realloc-rss.sh [--build-dir DIR] [--ductile LIB]
#                                [--before LIB] [--count N]
#
#   --build-dir  where bench/realloc_rss and .libs/libductile.so are
#                (default $BUILD_DIR, else the directory above this script)
#   --ductile LIB  the library preloaded as ductile
#   --before LIB   another build of ductile to show beside it ("before")
#   --count N      blocks (default 500)
#
# Environment: BUILD_DIR, DUCTILE_LIB, JEMALLOC_LIB, MIMALLOC_LIB,
# TCMALLOC_LIB. The runs are sequential. RSS does not depend on the load
# of the machine.
set -u

script_dir=$(cd "$(dirname "$0")" && pwd)
. "$script_dir/allocators.sh"

build_dir=${BUILD_DIR:-$(dirname "$script_dir")}
ductile_lib=${DUCTILE_LIB:-}
before_lib=
count=500
parse_options --build-dir=build_dir --ductile=ductile_lib --before=before_lib --count=count -- "$@"
ductile_lib=${ductile_lib:-$build_dir/.libs/libductile.so}
prog=$build_dir/bench/realloc_rss
[ -x "$prog" ] || { echo "$(basename "$0"): $prog not built (make bench/realloc_rss)" >&2; exit 1; }
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

names=(glibc jemalloc mimalloc tcmalloc)
libs=("" "$jemalloc_lib" "$mimalloc_lib" "$tcmalloc_lib")
confs=("" "" "" "")
if [ -n "$before_lib" ]; then
  names+=(ductile-before ductile-before:thp:never)
  libs+=("$before_lib" "$before_lib")
  confs+=("" "thp:never")
fi
names+=(ductile ductile:thp:never)
libs+=("$ductile_lib" "$ductile_lib")
confs+=("" "thp:never")

# grown LIB CONF [--written]: the run's resident-set growth in MiB.
grown() {
  local l=$1 conf=$2
  shift 2
  local line
  line=$(env ${l:+LD_PRELOAD=$l} ${conf:+DUCTILE_CONF=$conf} "$prog" "$@" "$count" 2>&1) || { echo "failed"; return; }
  echo "$line" | sed -n 's/.*grown_mib=\([0-9.-]*\).*/\1/p'
}

printf '%-26s %12s %12s\n' allocator untouched written
for i in "${!names[@]}"; do
  check_allocator "${names[$i]%%:*}" "${libs[$i]}" "$logdir"
  if [ "$status" != ok ]; then
    printf '%-26s %12s %12s   (%s)\n' "${names[$i]}" - - "$detail"
    continue
  fi
  printf '%-26s %12s %12s\n' "${names[$i]}" "$(grown "${libs[$i]}" "${confs[$i]}")" \
    "$(grown "${libs[$i]}" "${confs[$i]}" --written)"
done
echo "(MiB: resident-set growth over $count x (malloc 1 MiB, realloc 2 MiB))"
