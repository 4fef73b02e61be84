#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Every place that states ductile's version agrees with configure.ac's
# AC_INIT (PACKAGE_VERSION in config.h): the wrapper's --version, the shared
# library's statistics summary, ductile.pc, the manual pages, NEWS and, in a
# checkout that has it, debian/changelog.  Ends with "N passed, N failed".
set -u
builddir=${builddir:-.}
srcdir=${srcdir:-.}
passed=0
failed=0

check() {  # check WHAT EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then
    echo "PASS: $1 ($3)"
    passed=$((passed + 1))
  else
    echo "FAIL: $1: '$3', expected '$2'"
    failed=$((failed + 1))
  fi
}

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$builddir/config.h")
if [ -z "$version" ]; then
  echo "no PACKAGE_VERSION in $builddir/config.h" >&2
  exit 1
fi
echo "configure.ac's version: $version"

check "bin/ductile --version" "ductile $version" "$("$builddir/bin/ductile" --version 2>&1)"

# The statistics summary of the shared library itself (the unit tests link
# the objects): its first lines are the banner and "Version: X".
summary=$(DUCTILE_LIB="$builddir/.libs/libductile.so" DUCTILE_STATS=1 \
  "$builddir/bin/ductile" ls / 2>&1 >/dev/null)
check "libductile.so's statistics summary" "Version: $version" \
  "$(grep -m1 '^Version: ' <<<"$summary")"

check "ductile.pc" "Version: $version" "$(grep '^Version: ' "$builddir/ductile.pc")"

# .TH NAME SECTION DATE "ductile X" ... (after the comments that may open the page)
th_version() { sed -n 's/^\.TH [^"]*"[^"]*" "\([^"]*\)".*/\1/p' "$1" | head -1; }
check "man/ductile.3" "ductile $version" "$(th_version "$srcdir/man/ductile.3")"
check "man/ductile.1" "ductile $version" "$(th_version "$srcdir/man/ductile.1")"

check "NEWS's first entry" "ductile $version" "$(head -1 "$srcdir/NEWS" | cut -d' ' -f1-2)"

# debian/ is in the git repository, not in release tarballs.
if [ -f "$srcdir/debian/changelog" ]; then
  deb=$(sed -n '1s/^ductile (\([^)]*\)).*/\1/p' "$srcdir/debian/changelog")
  deb=${deb#*:}
  check "debian/changelog (upstream part of $deb)" "$version" "${deb%-*}"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
