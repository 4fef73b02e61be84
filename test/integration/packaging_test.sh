#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The Debian packaging (debian/, in the git repository, not in release
# tarballs): the packages that run google-pprof's dumps suggest
# google-perftools, and debian/build-packages builds and checks the source
# package as well as the binary ones. Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)
if [ ! -f "$top/debian/control" ]; then
  echo "SKIP: no debian/ (a release tarball)"
  exit 77
fi

# suggests PACKAGE: the Suggests field of PACKAGE's stanza.
suggests() {
  awk -v p="$1" '/^Package: / { in_p = ($2 == p) } in_p && /^Suggests:/ { sub(/^Suggests: */, ""); print }' \
    "$top/debian/control"
}
for p in libductile-dev ductile; do
  grep -qw google-perftools <<<"$(suggests "$p")"
  report "$p suggests google-perftools" $? "Suggests: $(suggests "$p")"
done

bp=$top/debian/build-packages
grep -q 'dpkg-buildpackage -us -uc -S' "$bp" && grep -q 'lintian --fail-on error "$dsc"' "$bp"
report "build-packages builds the source package unsigned and runs lintian on its .dsc" $?

finish
