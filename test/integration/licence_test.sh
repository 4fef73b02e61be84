#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Every source file git tracks carries the licence's SPDX line,
# "SPDX-License-Identifier: BSD-2-Clause", as a comment in its own syntax,
# on its first line (its second after a "#!" line). Fails with the names of
# the files that lack it. Source files: C and C++ (.c .cc .h), the linker
# map, shell, Python and gnuplot scripts, automake and autoconf input
# (.am .mk .ac .m4 .in), the manual pages, and every other file that starts
# with "#!"; not the documentation, data, images or Debian's control files.
#
#   licence_test.sh          check (make check runs it)
#   licence_test.sh --fix    add the line to the files that lack it
#
# Outside a git checkout (a release tarball) there is no list of tracked
# files: skipped. Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
fix=no
[ "${1:-}" = --fix ] && fix=yes
id='SPDX-License-Identifier: BSD-2-Clause'

if ! command -v git >/dev/null 2>&1 ||
   [ "$(git -C "$srcdir" rev-parse --show-toplevel 2>/dev/null)" != "$srcdir" ]; then
  echo "SKIP: $srcdir is not a git checkout (no list of tracked files)"
  exit 77
fi

# comment FILE: the SPDX line as FILE's syntax writes a comment; nothing
# for a file that is not a source file.
comment() {
  case $1 in
    *.c | *.h | *.map) echo "/* $id */" ;;
    *.cc) echo "// $id" ;;
    *.1 | *.3) echo ".\\\" $id" ;;
    *.sh | *.py | *.gp | *.am | *.mk | *.ac | *.m4 | *.in) echo "# $id" ;;
    *.md | *.png | *.dat | *.install | *.symbols | *.lintian-overrides | .gitignore | */.gitignore) ;;
    *) if [ "$(head -c 2 "$srcdir/$1")" = '#!' ]; then echo "# $id"; fi ;;
  esac
}

# has FILE LINE: LINE is FILE's first line, or its second after "#!".
has() {
  local first second
  first=$(sed -n 1p "$srcdir/$1")
  second=$(sed -n 2p "$srcdir/$1")
  [ "$first" = "$2" ] || { [ "${first#\#!}" != "$first" ] && [ "$second" = "$2" ]; }
}

# add FILE LINE: puts LINE first, or second after a "#!" line.
add() {
  local f=$srcdir/$1 tmp
  tmp=$(mktemp "$f.XXXXXX") || return 1
  if [ "$(head -c 2 "$f")" = '#!' ]; then
    { sed -n 1p "$f"; printf '%s\n' "$2"; sed -n '2,$p' "$f"; } >"$tmp"
  else
    { printf '%s\n' "$2"; cat "$f"; } >"$tmp"
  fi
  chmod --reference="$f" "$tmp" && mv "$tmp" "$f"
}

missing=()
checked=0
while IFS= read -r -d '' f; do
  [ -f "$srcdir/$f" ] || continue  # listed but deleted in the work tree
  line=$(comment "$f")
  [ -n "$line" ] || continue
  checked=$((checked + 1))
  has "$f" "$line" && continue
  if [ "$fix" = yes ]; then
    add "$f" "$line" && echo "added: $f"
  else
    missing+=("$f")
  fi
done < <(git -C "$srcdir" ls-files -z)

[ "$checked" -gt 100 ]
report "the tracked source files are found" $? "$checked files"
[ ${#missing[@]} -eq 0 ]
report "every tracked source file has the SPDX line ($id)" $? \
  "${#missing[@]} without it: ${missing[*]:-}"
[ -f "$srcdir/COPYING" ] && grep -q '^Copyright (c) 2026 The ductile authors$' "$srcdir/COPYING" &&
  grep -q 'Redistributions in binary form must reproduce' "$srcdir/COPYING"
report "COPYING holds the BSD 2-Clause licence" $?
if [ -f "$srcdir/debian/copyright" ]; then
  grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/$' "$srcdir/debian/copyright" &&
    grep -q '^License: BSD-2-Clause$' "$srcdir/debian/copyright" &&
    ! grep -q 'unlicensed' "$srcdir/debian/copyright"
  report "debian/copyright is DEP-5, BSD-2-Clause" $?
fi
grep -q 'BSD-2-Clause' "$srcdir/ductile.pc.in" && grep -q 'BSD 2-Clause' "$srcdir/README.md" &&
  grep -q 'BSD 2-Clause' "$srcdir/man/ductile.3" && grep -q 'BSD 2-Clause' "$srcdir/man/ductile.1"
report "the README, ductile.pc and the manual pages name the licence" $?

finish
