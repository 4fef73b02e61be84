#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The README's quick start: exactly two commands (the first installs what
# the build needs, builds and runs the comparison; the second, which
# .ci/run runs, is the test suite), and the first one's installation works
# as root on a machine without sudo and through sudo for a user: it is run
# here up to the build, with stub apt-get and sudo that record their calls.
# Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/ductile-readme.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# The first ```sh block after "## Quick start".
awk '/^## Quick start/ { q = 1 } q && /^```sh$/ { b = 1; next } b && /^```$/ { exit } b' \
  "$srcdir/README.md" >"$dir/block"
[ "$(wc -l <"$dir/block")" -eq 2 ]
report "the quick start is two commands" $? "$(cat "$dir/block")"
first=$(sed -n 1p "$dir/block")
second=$(sed -n 2p "$dir/block")
[ "$second" = "make -j2 check" ] && grep -qF 'make -j2 check' "$srcdir/.ci/run"
report "the second runs the test suite, as .ci/run does" $? "$second"
case $first in
  *'./autogen.sh && ./configure && make -j2 && make compare-vector') true ;;
  *) false ;;
esac
report "the first builds and runs the comparison" $? "$first"

# The installation part, up to the build, with stubs on a PATH that has
# nothing else (the shell's builtins run the rest).
install_part=${first%% && ./autogen.sh*}
mkdir -p "$dir/root" "$dir/user"
printf '#!/bin/sh\necho "apt-get $*" >>"%s/calls"\n' "$dir" >"$dir/root/apt-get"
cp "$dir/root/apt-get" "$dir/user/apt-get"
printf '#!/bin/sh\necho "sudo $1" >>"%s/calls"\nexec "$@"\n' "$dir" >"$dir/user/sudo"
chmod +x "$dir/root/apt-get" "$dir/user/apt-get" "$dir/user/sudo"
/bin/bash -c "PATH='$dir/root'; $install_part" 2>"$dir/err"
st=$?
[ "$st" -eq 0 ] && [ "$(grep -c '^apt-get' "$dir/calls")" -eq 2 ] && ! grep -q '^sudo' "$dir/calls"
report "as root without sudo: apt-get runs" $? "exit $st; $(cat "$dir/err" "$dir/calls" 2>/dev/null | head -3)"
rm -f "$dir/calls"
/bin/bash -c "PATH='$dir/user'; $install_part" 2>"$dir/err"
st=$?
[ "$st" -eq 0 ] && [ "$(grep -c '^sudo apt-get' "$dir/calls")" -eq 2 ] && [ "$(grep -c '^apt-get' "$dir/calls")" -eq 2 ]
report "as a user with sudo: apt-get runs through sudo" $? "exit $st; $(cat "$dir/err" "$dir/calls" 2>/dev/null | head -5)"

finish
