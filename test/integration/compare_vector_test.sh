#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# bench/compare-vector.sh (`make compare-vector`) at a tiny size: it runs,
# keeps its chart and figures in the build directory, and leaves the
# source tree's chart, docs/vector-doubling.png, alone; bench/vector.gp
# draws that chart's kept figures, docs/vector-doubling.dat, on a log
# time axis. Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
need_built quiet_prog
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
top=$(cd "${builddir:-.}" && pwd)
[ -x "$top/bench/vector_doubling" ] || { echo "not found: $top/bench/vector_doubling" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/ductile-vector.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# A build directory of links, so the default chart lands here and not in
# the real build directory (where a real run's chart may be).
mkdir -p "$dir/build/bench" "$dir/build/.libs"
ln -s "$top/bench/vector_doubling" "$dir/build/bench/vector_doubling"
ln -s "$lib" "$dir/build/.libs/libductile.so"

sum() { cksum <"$1" 2>/dev/null; }
before=$(sum "$srcdir/docs/vector-doubling.png")
BUILD_DIR=$dir/build bash "$srcdir/bench/compare-vector.sh" --rounds 1 --top 64K --no-many --no-settle \
  >"$dir/out" 2>"$dir/err"
st=$?
[ "$st" -eq 0 ] && grep -q '^ductile ' "$dir/out" && ! grep -q 'gnuplot failed' "$dir/err"
report "compare-vector.sh runs (1 round, to 64K)" $? "exit $st; $(tail -3 "$dir/err")"
[ "$(sum "$srcdir/docs/vector-doubling.png")" = "$before" ]
report "the source tree's docs/vector-doubling.png is left alone" $?
if command -v gnuplot >/dev/null 2>&1; then
  [ -s "$dir/build/vector-doubling.png" ] && [ -s "$dir/build/vector-doubling.dat" ]
  report "the chart and its figures go to the build directory" $? "$(ls "$dir/build")"
  grep -q '^# subtitle: 1 rounds, 4 B to 32 KiB by doubling' "$dir/build/vector-doubling.dat" &&
    grep -q '^"ductile" ' "$dir/build/vector-doubling.dat"
  report "the figures say what ran (4 B to 32 KiB: 64K is exclusive)" $? "$(head -4 "$dir/build/vector-doubling.dat" | tr '\n' ' ')"
  gnuplot -e "datafile='$srcdir/docs/vector-doubling.dat'; outfile='$dir/docs.png'" "$srcdir/bench/vector.gp" &&
    [ -s "$dir/docs.png" ]
  report "bench/vector.gp draws the kept figures of docs/vector-doubling.png" $?
else
  echo "(gnuplot not found: the chart checks are skipped)"
fi
grep -q '^set logscale y' "$srcdir/bench/vector.gp"
report "the time axis is a log scale" $?

finish
