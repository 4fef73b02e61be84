#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The source tree's layout rules (docs/ARCHITECTURE.md, "Layers" and
# "Files"): no include runs back up the layers (base -> os -> chunk ->
# {small, huge} -> core -> api); within core a file includes only the core
# headers before its own in the order below; only os/kernel_linux.cc calls
# the kernel's memory functions; every source file is at most 500 lines and
# opens, after its licence line, with a comment on what it owns.
# Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
src=${srcdir:-.}/src
[ -d "$src/core" ] || { echo "not found: $src" >&2; exit 1; }

# The layers, bottom up; small and huge share a rank and ignore each other;
# the public header (ductile/ductile.h) is below them all.
rank() {
  case $1 in
    base) echo 0 ;; os) echo 1 ;; chunk) echo 2 ;; small|huge) echo 3 ;;
    core) echo 4 ;; api) echo 5 ;; ductile) echo -1 ;; *) echo 9 ;;
  esac
}
# The core's files, bottom up: a file includes only core headers before it,
# and a header comes before the source that defines what it declares.
core_order="options.h options.cc background.h background.cc state.h state.cc
  prof.h prof_table.h prof.cc prof_dump.cc growth.h growth.cc stats.h stats_format.h stats.cc stats_format.cc
  stdio_fork.h fallback_heap.h fallback_heap.cc place.h place.cc depot.h cache.h cache.cc depot.cc
  collect.h collect.cc fork.h fork.cc startup.h startup.cc alloc.h alloc.cc
  free.h free.cc fast_path.h realloc.h realloc.cc control.h control.cc runtime.h"
core_index() {
  local i=0 s
  for s in $core_order; do
    [ "$s" = "$1" ] && { echo $i; return; }
    i=$((i + 1))
  done
  echo -1
}

files=$(cd "$src" && ls */*.h */*.cc | sort)

bad=""
for f in $files; do
  layer=${f%%/*}
  for inc in $(sed -n 's/^#include "\([a-z_]*\)\/[a-z_]*\.h".*/\1/p' "$src/$f"); do
    r=$(rank "$layer") ir=$(rank "$inc")
    if [ "$ir" -gt "$r" ] || { [ "$ir" -eq "$r" ] && [ "$inc" != "$layer" ]; }; then
      bad="$bad $f->$inc"
    fi
  done
done
[ -z "$bad" ]
report "no include runs back up the layers" $? "$bad"

bad=""
for f in $(printf '%s\n' $files | grep '^core/'); do
  me=$(core_index "${f#core/}")
  if [ "$me" -lt 0 ]; then
    bad="$bad $f(not in the order)"
    continue
  fi
  for h in $(sed -n 's/^#include "core\/\([a-z_]*\.h\)".*/\1/p' "$src/$f"); do
    [ "$(core_index "$h")" -lt "$me" ] || bad="$bad $f->$h"
  done
done
[ -z "$bad" ]
report "core files include only the core headers below them" $? "$bad"

bad=""
for f in $files; do
  [ "$f" = os/kernel_linux.cc ] || [ "$f" = os/kernel.h ] && continue
  sed 's://.*$::' "$src/$f" |
    grep -qE '(^|[^.>_a-zA-Z:])(::)?(mmap|munmap|madvise|mremap|mprotect|process_madvise)[[:space:]]*\(' &&
    bad="$bad $f"
done
[ -z "$bad" ]
report "only os/kernel_linux.cc calls the kernel's memory functions" $? "$bad"

bad=""
for f in $files; do
  n=$(wc -l <"$src/$f")
  [ "$n" -le 500 ] || bad="$bad $f($n)"
done
[ -z "$bad" ]
report "no source file is over 500 lines" $? "$bad"

bad=""
for f in $files; do
  sed -n 1p "$src/$f" | grep -q 'SPDX-License-Identifier: BSD-2-Clause' &&
    sed -n 2p "$src/$f" | grep -qE '^(//|/\*| \*)' || bad="$bad $f"
done
[ -z "$bad" ]
report "every source file opens with its licence and what it owns" $? "$bad"

finish
