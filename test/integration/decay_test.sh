#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Freed memory goes back to the kernel while the program is quiet: with
# decay_ms:0 at once, on the free; otherwise within a few decay times by the
# background thread, with no further allocator call (quiet_prog.c). Without
# the thread the same run keeps it all: what returns it is the thread.
# Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
need_built quiet_prog

mib=256
# quiet CONF SIZE WAIT_MS: prints "freed KIB after KIB"
quiet() { LD_PRELOAD=$lib DUCTILE_CONF=$1 "$prog" "$2" "$mib" "$3"; }
# Small (64 B, slabs), medium (64 KiB, 1 MiB) and huge (256 MiB) blocks.
for size in 64 65536 1048576 268435456; do
  read -r _ freed _ after < <(quiet decay_ms:0 "$size" 0)
  [ "${freed:-999999}" -lt 16384 ]
  report "decay_ms:0 purges on free, $size B blocks" $? "resident after the frees: ${freed:-?} KiB"

  read -r _ freed _ after < <(quiet decay_ms:300 "$size" 2000)
  [ "${freed:-0}" -gt 200000 ] && [ "${after:-999999}" -lt 16384 ]
  report "decay_ms:300, quiet 2 s, $size B blocks" $? "resident ${freed:-?} KiB, then ${after:-?} KiB"

  read -r _ freed _ after < <(quiet decay_ms:300,background_thread:false "$size" 1000)
  [ "${after:-0}" -gt 200000 ]
  report "decay_ms:300 without the thread keeps them, $size B blocks" $? "${after:-?} KiB after 1 s"
done

finish
