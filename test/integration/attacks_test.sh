#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The attack table's cases (test/attacks/attacks) under the built library
# with DUCTILE_CONF=hardened:true: the ones hardened mode stops today must
# still stop where they do -- at the faulting call, or at the next operation
# on the block -- with the same line. The lists below are what the library
# does today, for a default build and for an --enable-hardened build. The
# cases it does not stop yet are listed as
# known gaps: they run, but their outcome fails nothing. Fixing one means
# moving it from the gaps to the expectations; a case in neither list fails
# the test, so that a new case is classified. The whole table, with the
# peers: `make attack-table` (docs/measurements/attacks.md).
# Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
builddir=$(cd "${builddir:-.}" && pwd)
lib=$builddir/.libs/libductile.so
prog=$builddir/test/attacks/attacks
for f in "$lib" "$prog"; do
  [ -e "$f" ] || { echo "not found: $f" >&2; exit 1; }
done

double='free(): double free detected'
invalid='free(): invalid pointer'
changed='double free or write after free detected'
wrong_size='free_sized(): wrong size for block'
wrong_align='free_sized(): wrong alignment for block'
freed_realloc='realloc(): block freed already'
overflow='free(): buffer overflow detected'

# expect CASE WHERE [LINE [CONF]]: WHERE is at-once (stopped at the faulting
# call or write, SIGABRT and "ductile: LINE 0x..."), next-op (the same, at a
# later operation on the block) or guard-page (SIGSEGV at the write, no
# line). CONF: more of DUCTILE_CONF, after hardened:true.
expected=()
expect() { expected+=("$1|$2|${3:-}|${4:-}"); }

# Both builds.
for c in free-stack free-global free-interior-small free-interior-medium free-interior-huge free-misaligned; do
  expect "$c" at-once "$invalid"
done
expect double-free-medium at-once "$double"
expect double-free-huge at-once "$double"
# Double frees of small blocks, at the second free: the slab's bitmap
# (hardened:true), or the freed mark that free checks (--enable-hardened),
# also where a mark read after the first free is written back.
for c in double-free-small double-free-small-reuse double-free-small-between double-free-lone-small \
  double-free-16 forged-mark forged-mark-between; do
  expect "$c" at-once "$double"
done
expect realloc-freed-small at-once "$freed_realloc"
expect realloc-freed-medium at-once "$freed_realloc"
expect free-sized-wrong at-once "$wrong_size"
expect sdallocx-wrong-size at-once "$wrong_size"
expect sdallocx-wrong-align at-once "$wrong_align"
expect overflow-1-huge guard-page
# A write past a small or medium block's request breaks its seal, found at
# its free.
for c in overflow-1-small overflow-16-small overflow-block-small overflow-1-medium overflow-4k-medium; do
  expect "$c" at-once "$overflow"
done
# A write over a freed small block's first word (its freed mark), found when
# the block is handed out.
expect uaf-first-word next-op "$changed"
gaps=

if grep -q '^#define DUCTILE_HARDENED 1' "$builddir/config.h" 2>/dev/null; then
  build=--enable-hardened
  # A medium block's mark too (it stays in a cache), and a write after free
  # past the first word of a block whose free filled it: every one with
  # freed_fill:1 (by default a sample, one free in 64).
  expect uaf-first-word-medium next-op "$changed"
  expect uaf-offset-24 next-op "$changed" freed_fill:1
  # Known gaps of an --enable-hardened build:
  #   underflow-small        the free neighbour it ran into is handed out
  #                          by the thread cache's inline path, which does
  #                          not check its seal word (hardened.md)
  gaps="underflow-small"
else
  build=default
  # hardened:true alone fills every freed small block, and keeps a freed
  # medium block (up to 256 KiB) marked in its class's depot.
  expect uaf-offset-24 next-op "$changed"
  expect uaf-first-word-medium next-op "$changed"
  # Known gaps of a default build's hardened:true:
  #   underflow-small        the block is its slab's first (the neighbour a
  #                          thread cache would hold is not there): faults
  #                          at the write where unmapped memory is before it
  gaps="underflow-small"
fi

all=$("$prog" --list | cut -f1)
[ "$(wc -w <<<"$all")" -ge 22 ]
report "attacks --list names the cases" $? "$(wc -w <<<"$all") cases"

# Every case is expected or a gap, and every name in the lists is a case.
declare -A listed=()
for e in "${expected[@]}"; do listed[${e%%|*}]=expected; done
bad=
for c in $gaps; do
  [ "${listed[$c]:-}" = expected ] && bad="$bad $c(both)"
  listed[$c]=gap
done
for c in $all; do [ -n "${listed[$c]:-}" ] || bad="$bad $c"; done
for c in "${!listed[@]}"; do grep -qx -- "$c" <<<"$all" || bad="$bad $c(no such case)"; done
[ -z "$bad" ]
report "every case is expected or a known gap ($build build)" $? "unlisted:$bad"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for e in "${expected[@]}"; do
  IFS='|' read -r c where line conf <<<"$e"
  rc=$( {
    ulimit -c 0
    LD_PRELOAD=$lib DUCTILE_CONF=hardened:true${conf:+,$conf} timeout -k 1 20 "$prog" "$c" >"$tmp/out" 2>"$tmp/err" </dev/null
    echo $?
  } 2>/dev/null)
  last=$(sed -n 's/^step //p' "$tmp/out" | tail -1)
  err=$(cat "$tmp/err")
  case $where in
    at-once)
      [ "$rc" -eq 134 ] && { [ "$last" = attack ] || [ "$last" = write ]; } &&
        grep -qxE "ductile: $(sed 's/[][().*^$]/\\&/g' <<<"$line") 0x[0-9a-f]+" <<<"$err" ;;
    next-op)
      [ "$rc" -eq 134 ] && [ "$last" = next ] &&
        grep -qxE "ductile: $(sed 's/[][().*^$]/\\&/g' <<<"$line") 0x[0-9a-f]+" <<<"$err" ;;
    guard-page)
      [ "$rc" -eq 139 ] && [ "$last" = write ] && [ -z "$err" ] ;;
    *) false ;;
  esac
  report "$c${conf:+ ($conf)}: stopped $where${line:+ with \"$line\"}" $? "status $rc, last step ${last:-none}, stderr: $(head -c 200 <<<"$err")"
done

finish
