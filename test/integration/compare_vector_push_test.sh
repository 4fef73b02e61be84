#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# bench/compare-vector-push.sh (`make compare-vector-push`) at a tiny size
# (8 MiB pushed, one run each, no settling): it runs, prints a line for
# std::vector under ductile and for ductile::vector, and ductile::vector's
# growth moved and copied nothing once huge. bench/vector_push refuses
# --ductile-vector without ductile. Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
top=$(cd "${builddir:-.}" && pwd)
lib=$top/.libs/libductile.so
prog=$top/bench/vector_push
for f in "$lib" "$prog"; do
  [ -e "$f" ] || { echo "not found: $f" >&2; exit 1; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/ductile-vector-push.XXXXXX")
trap 'rm -rf "$dir"' EXIT

BUILD_DIR=$top DUCTILE_LIB=$lib bash "$srcdir/bench/compare-vector-push.sh" --size 8M --reps 1 --no-settle \
  --keep "$dir/raw" >"$dir/out" 2>"$dir/err"
st=$?
[ "$st" -eq 0 ] && grep -q '^std::vector, ductile ' "$dir/out" && grep -q '^ductile::vector ' "$dir/out"
report "compare-vector-push.sh runs (8 MiB, 1 run each)" $? "exit $st; $(tail -3 "$dir/err" | tr '\n' ' ')"

line=$(grep '^ductile::vector ' "$dir/out")
# The columns: seconds, x ductile, peak RSS, x final, moves/steps, copies.
set -- $line
[ "${3:-}" = 1.00x ] && [ "${6:-}" = 0/2 ] && [ "${7:-}" = 0 ]
report "ductile::vector grows 2 to 8 MiB in place: no move, no copy" $? "$line"

raw=$(cat "$dir/raw/5.0" 2>/dev/null)
case $raw in *"mode=ductile::vector bytes=8388608 final=8388608 "*copy=0*) true ;; *) false ;; esac
report "the raw line says what ran" $? "$raw"

env -u LD_PRELOAD "$prog" --ductile-vector 1M >"$dir/alone.out" 2>"$dir/alone.err"
st=$?
[ "$st" -eq 2 ] && grep -q 'needs ductile' "$dir/alone.err"
report "--ductile-vector without ductile is refused" $? "exit $st; $(cat "$dir/alone.err")"

finish
