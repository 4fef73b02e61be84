#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# make install: ldconfig runs after the library is installed into the
# system (DESTDIR empty), not when DESTDIR is set (packaging), nor when
# there is no ldconfig; ductile(1), the wrapper's manual page, is installed
# next to ductile(3); a C++ program that includes <ductile/vector.h> builds
# against the installed tree with pkg-config's flags, and runs; the
# installed wrapper's --growth names a program's copying call site, whose
# copies the installed library counts. ldconfig is a stub here that records
# its calls. Ends with "N passed, N failed".
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

# ductile::vector from the installed tree alone: its header, pkg-config's
# flags (the prefix moved to where it was installed), the installed library.
cat >"$dir/vector.cc" <<'CXX'
#include <cstdint>
#include <cstdio>
#include <string>

#include <ductile/vector.h>

int main() {
  ductile::vector<uint64_t> v;
  for (uint64_t i = 0; i < (uint64_t{8} << 20); i++) v.push_back(i);  // 64 MiB
  for (uint64_t i = 0; i < v.size(); i += 999)
    if (v[i] != i) return 1;
  ductile::vector<std::string> s = {"a", "b"};
  s.insert(s.begin() + 1, 3, std::string(50, 'x'));
  uint64_t copies = 1;
  size_t len = sizeof copies;
  if (mallctl("ductile.huge.growth.copy", &copies, &len, nullptr, 0) != 0) return 1;
  std::printf("ok: %zu elements, %zu strings, %llu huge blocks copied\n", v.size(), s.size(),
              static_cast<unsigned long long>(copies));
  return s.size() == 5 && copies == 0 ? 0 : 1;
}
CXX
pc() { PKG_CONFIG_PATH=$dir/sys/lib/pkgconfig pkg-config --define-variable=prefix="$dir/sys" "$@" ductile; }
flags=$(pc --cflags --libs)
[ -f "$dir/sys/include/ductile/vector.h" ] && case $flags in *"-I$dir/sys/include"*) true ;; *) false ;; esac
report "<ductile/vector.h> is installed beside ductile.h, where pkg-config points" $? "$flags"
ok=0
for std in c++17 c++20; do
  # shellcheck disable=SC2086
  ${CXX:-c++} -std=$std -Wall -Wextra -Werror -pedantic -o "$dir/vector-$std" "$dir/vector.cc" $flags \
    >"$dir/cxx.log" 2>&1 &&
    LD_LIBRARY_PATH=$dir/sys/lib "$dir/vector-$std" >"$dir/vector.out" 2>&1 &&
    grep -q '^ok: 8388608 elements, 5 strings, 0 huge blocks copied$' "$dir/vector.out" || ok=1
  [ $ok -eq 0 ] || break
done
report "a C++17 and a C++20 program with ductile::vector build with pkg-config's flags and run" $ok \
  "$std: $(head -c 600 "$dir/cxx.log") $(cat "$dir/vector.out" 2>/dev/null)"

# The growth profile from the installed tree: a C program built with
# pkg-config's flags reads the growth counters, and the installed wrapper's
# --growth lists its copying call site.
cat >"$dir/grow.c" <<'C'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ductile/ductile.h>

__attribute__((noinline)) static void copy_site(void) {
  for (int i = 0; i < 100; i++) {
    char *p = malloc(16);
    memset(p, 1, 16);
    char *q = realloc(p, 3000);
    if (q == NULL || q[15] != 1) exit(1);
    free(q);
  }
}

int main(void) {
  copy_site();
  uint64_t copies = 0, bytes = 0;
  size_t len = sizeof copies;
  if (mallctl("ductile.growth.copy", &copies, &len, NULL, 0) != 0) return 1;
  if (mallctl("ductile.growth.copied_bytes", &bytes, &len, NULL, 0) != 0) return 1;
  printf("copies %llu, %llu bytes\n", (unsigned long long)copies, (unsigned long long)bytes);
  return 0;
}
C
# Without the counters (--disable-stats) or the profile (--disable-prof)
# there is nothing to read.
if ! has_config DUCTILE_STATS || ! has_config DUCTILE_PROF; then
  echo "SKIP: the growth counters and profile (built with --disable-stats or --disable-prof)"
else
  # shellcheck disable=SC2086
  ${CC:-cc} -O2 -o "$dir/grow" "$dir/grow.c" $(pc --cflags --libs) >"$dir/cc.log" 2>&1 &&
    LD_LIBRARY_PATH=$dir/sys/lib "$dir/grow" >"$dir/grow.out" 2>&1 && grep -qx 'copies 100, 1600 bytes' "$dir/grow.out"
  report "a C program built with pkg-config's flags reads the growth counters" $? \
    "$(head -c 300 "$dir/cc.log") $(cat "$dir/grow.out" 2>/dev/null)"
  if command -v google-pprof >/dev/null 2>&1; then
    (cd "$dir" && LD_LIBRARY_PATH=$dir/sys/lib DUCTILE_LIB=$dir/sys/lib/libductile.so.0 \
      "$dir/sys/bin/ductile" --growth --conf lg_growth_sample:0 ./grow) >/dev/null 2>"$dir/growth.err"
    awk '/call sites by bytes copied:/ { on = 1; next } on && $NF == "copy_site" && $2 == 1600 { found = 1 } END { exit !found }' \
      "$dir/growth.err"
    report "the installed ductile --growth names the call site that copied" $? "$(tr '\n' '|' <"$dir/growth.err" | head -c 600)"
  fi
fi

man1=$dir/sys/share/man/man1/ductile.1
[ -f "$man1" ] && [ -f "$dir/sys/share/man/man3/ductile.3" ] && grep -q -- '\\-\\-profile' "$man1" &&
  grep -q '^ductile \\- run a command' "$man1"
report "ductile(1) is installed with ductile(3) and names --profile" $? "$(ls "$dir/sys/share/man/"* 2>&1 | tr '\n' ' ')"

finish
