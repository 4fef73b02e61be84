#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# make install: ldconfig runs after the library is installed into the
# system (DESTDIR empty), not when DESTDIR is set (packaging), nor when
# there is no ldconfig; ductile(1), the wrapper's manual page, is installed
# next to ductile(3). ldconfig is a stub here that records its calls.
# Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
top=$(cd "${builddir:-.}" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/ductile-install.XXXXXX")
trap 'rm -rf "$dir"' EXIT
stub=$dir/ldconfig
printf '#!/bin/sh\necho "ldconfig $*" >>"%s/calls"\n' "$dir" >"$stub"
chmod +x "$stub"
calls() { [ -f "$dir/calls" ] && wc -l <"$dir/calls" || echo 0; }
inst() { ${MAKE:-make} -s -C "$top" install "$@" >"$dir/log" 2>&1; }

inst prefix="$dir/sys" LDCONFIG="$stub"
st=$?
[ "$st" -eq 0 ] && [ "$(calls)" -eq 1 ] && [ -e "$dir/sys/lib/libductile.so.0" ]
report "make install (DESTDIR empty) runs ldconfig once" $? "exit $st, $(calls) calls; $(tail -3 "$dir/log")"

inst prefix=/usr/local DESTDIR="$dir/stage" LDCONFIG="$stub"
st=$?
[ "$st" -eq 0 ] && [ "$(calls)" -eq 1 ] && [ -e "$dir/stage/usr/local/lib/libductile.so.0" ]
report "make install DESTDIR=... does not run ldconfig" $? "exit $st, $(calls) calls; $(tail -3 "$dir/log")"

inst prefix="$dir/none" LDCONFIG=
st=$?
[ "$st" -eq 0 ] && [ -e "$dir/none/lib/libductile.so.0" ]
report "make install without ldconfig installs all the same" $? "exit $st; $(tail -3 "$dir/log")"

printf '#!/bin/sh\nexit 1\n' >"$dir/failing"
chmod +x "$dir/failing"
inst prefix="$dir/fail" LDCONFIG="$dir/failing"
st=$?
[ "$st" -eq 0 ] && grep -q "warning: .*failed; run it as root" "$dir/log"
report "a failing ldconfig is a warning" $? "exit $st; $(tail -3 "$dir/log")"

man1=$dir/sys/share/man/man1/ductile.1
[ -f "$man1" ] && [ -f "$dir/sys/share/man/man3/ductile.3" ] && grep -q -- '\\-\\-profile' "$man1" &&
  grep -q '^ductile \\- run a command' "$man1"
report "ductile(1) is installed with ductile(3) and names --profile" $? "$(ls "$dir/sys/share/man/"* 2>&1 | tr '\n' ' ')"

finish
