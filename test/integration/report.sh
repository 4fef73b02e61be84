# SPDX-License-Identifier: BSD-2-Clause
# Sourced by the integration test scripts: finds what they run, counts
# checks and prints the closing line.
#   need_built NAME     sets lib (the built libductile.so) and prog
#                       (test/integration/NAME); exits if either is missing
#   need_pprof          skips the test (exit 77) without google-pprof
#   has_config MACRO    whether the build's config.h defines MACRO
#                       (DUCTILE_STATS, DUCTILE_PROF: what configure left in)
#   need_config MACRO OPTION
#                       skips the test (exit 77) where it does not: the build
#                       was configured with OPTION
#   report NAME STATUS [DETAIL]
#   finish              the closing line; non-zero status on a failure
need_built() {
  local builddir=${builddir:-.}
  lib=$(cd "$builddir" && pwd)/.libs/libductile.so
  prog=$builddir/test/integration/$1
  local f
  for f in "$lib" "$prog"; do
    [ -e "$f" ] || { echo "not found: $f" >&2; exit 1; }
  done
}
need_pprof() {
  if ! command -v google-pprof >/dev/null 2>&1; then
    echo "SKIP: google-pprof not found (Debian package google-perftools)"
    exit 77
  fi
}
has_config() {
  grep -q "^#define $1 1" "${builddir:-.}/config.h"
}
need_config() {
  if ! has_config "$1"; then
    echo "SKIP: built with $2"
    exit 77
  fi
}
passed=0
failed=0
report() {
  if [ "$2" -eq 0 ]; then
    echo "PASS: $1${3:+ ($3)}"
    passed=$((passed + 1))
  else
    echo "FAIL: $1${3:+ ($3)}"
    failed=$((failed + 1))
  fi
}
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
