#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The scale cases (bench/scale.c) under glibc, jemalloc, mimalloc, tcmalloc and
# ductile in one run, printed as one Markdown table per case: time, peak
# RSS, mappings (lines of /proc/self/maps at the end), metadata (where the
# allocator answers mallctl("stats.metadata"): ductile and jemalloc; "-"
# elsewhere) and each case's own figures. See bench/scale.c for the cases.
#
#   bench/compare-scale.sh [--quick] [--cases "1 2 2f 4 5 6 7"] [--rounds N]
#                          [--blocks N] [--medium N] [--fill N] [--gib X] [--small-gib X]
#                          [--write BYTES] [--idle-mib N] [--decay-ms N]
#                          [--heap-mib N] [--calloc-mib N] [--timeout S]
#                          [--build-dir DIR] [--ductile LIB] [--out DIR]
#
# Defaults are the cases' full sizes: 1 000 000 rounds (case 1), 100 000 huge
# plus 100 000 medium blocks (case 2), 16 GiB of 16 KiB and of 64 KiB blocks
# and 2 GiB of 256 B objects (case 4), 512 MiB idle (case 5), a 1 GiB heap
# (case 6), 1 GiB (case 7). Case 2f is case 2 near vm.max_map_count: the
# program first holds mappings of its own up to --fill (default 2 000) below
# the limit, and every other block is freed and allocated again. --quick: 20 000 rounds, 10 000 blocks, 1 GiB,
# 256 MiB. Cases 5 and 6 run with a decay time of --decay-ms (default 1000)
# for the allocators that have one: DUCTILE_CONF=decay_ms:N,
# MALLOC_CONF=dirty_decay_ms:N (jemalloc); the others keep their own policy.
# Each run is limited to --timeout seconds (default 600); raw lines go to
# --out (default a temporary directory).
#
# Environment: DUCTILE_LIB, BUILD_DIR (where bench/scale is), JEMALLOC_LIB,
# MIMALLOC_LIB, TCMALLOC_LIB.
set -u

script_dir=$(cd "$(dirname "$0")" && pwd)
. "$script_dir/allocators.sh"
build_dir=${BUILD_DIR:-$(dirname "$script_dir")}
ductile_lib=${DUCTILE_LIB:-}
quick=no
cases="1 2 2f 4 5 6 7"
fill=2000
rounds= blocks= medium= gib= small_gib= write=0 idle_mib= decay_ms=1000 heap_mib= calloc_mib=
timeout_s=600
out=

parse_options --quick:quick=yes --cases=cases --rounds=rounds --blocks=blocks --medium=medium --fill=fill --gib=gib \
  --small-gib=small_gib --write=write --idle-mib=idle_mib --decay-ms=decay_ms --heap-mib=heap_mib \
  --calloc-mib=calloc_mib --timeout=timeout_s --build-dir=build_dir --ductile=ductile_lib --out=out -- "$@"

if [ "$quick" = yes ]; then
  : "${rounds:=20000}" "${blocks:=10000}" "${medium:=10000}" "${gib:=1}" "${small_gib:=0.25}"
  : "${idle_mib:=256}" "${heap_mib:=256}" "${calloc_mib:=1024}"
else
  : "${rounds:=1000000}" "${blocks:=100000}" "${medium:=100000}" "${gib:=16}" "${small_gib:=2}"
  : "${idle_mib:=512}" "${heap_mib:=1024}" "${calloc_mib:=1024}"
fi
ductile_lib=${ductile_lib:-$build_dir/.libs/libductile.so}
prog=$build_dir/bench/scale
[ -x "$prog" ] || { echo "compare-scale.sh: $prog is missing (run 'make bench/scale')" >&2; exit 1; }
out=${out:-$(mktemp -d)}
mkdir -p "$out"

names=(glibc jemalloc mimalloc tcmalloc ductile)
libs=("" "$jemalloc_lib" "$mimalloc_lib" "$tcmalloc_lib" "$ductile_lib")
usable=()
for i in "${!names[@]}"; do
  check_allocator "${names[$i]}" "${libs[$i]}" "$out"
  if [ "$status" = ok ]; then usable+=("$i"); else echo "# ${names[$i]}: $detail (skipped)"; fi
done

args_for() {
  case $1 in
    1) echo "--rounds $rounds" ;;
    2) echo "--blocks $blocks --medium $medium" ;;
    2f) echo "--blocks $blocks --medium $medium --fill $fill" ;;
    4) echo "--gib $gib --small-gib $small_gib --write $write" ;;
    5) echo "--idle-mib $idle_mib --decay-ms $decay_ms" ;;
    6) echo "--heap-mib $heap_mib --decay-ms $decay_ms" ;;
    7) echo "--calloc-mib $calloc_mib" ;;
  esac
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs; raw lines in $out"
for c in $cases; do
  args=$(args_for "$c")
  [ -n "$args" ] || { echo "compare-scale.sh: no case $c" >&2; exit 2; }
  : > "$out/case$c.txt"
  for i in "${usable[@]}"; do
    name=${names[$i]}
    env=(LD_PRELOAD="${libs[$i]}")
    if [ "$c" = 5 ] || [ "$c" = 6 ]; then
      env+=(DUCTILE_CONF="decay_ms:$decay_ms" MALLOC_CONF="dirty_decay_ms:$decay_ms")
    fi
    # shellcheck disable=SC2086
    line=$(env "${env[@]}" timeout "$timeout_s" "$prog" --case "${c%f}" $args 2>"$out/case$c.$name.err")
    rc=$?
    [ $rc -eq 0 ] || line="case=$c status=failed(rc=$rc,$(head -c 80 "$out/case$c.$name.err" | tr '\n= ' '   '))"
    echo "allocator=$name $line" >> "$out/case$c.txt"
  done
  echo
  echo "## Case $c ($args)"
  awk '
    { for (i = 1; i <= NF; i++) { split($i, kv, "="); k = kv[1]; if (k == "case") continue;
        if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
        val[NR, k] = substr($i, length(k) + 2) } }
    END {
      line = "|"; sep = "|"
      for (j = 1; j <= nk; j++) { line = line " " keys[j] " |"; sep = sep "---|" }
      print line; print sep
      for (r = 1; r <= NR; r++) {
        line = "|"
        for (j = 1; j <= nk; j++) line = line " " ((r, keys[j]) in val ? val[r, keys[j]] : "") " |"
        print line
      }
    }' "$out/case$c.txt"
done
