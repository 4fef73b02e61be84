#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Under vm.overcommit_memory=2 freed and purged memory gives its commit
# charge back: Committed_AS (/proc/meminfo) drops by what was freed once it
# is trimmed (commit_prog.c). Only where the machine is in strict mode: the
# mode is the system's (root sets it), so elsewhere this test is skipped and
# the unit tests check the same mechanism on the fake kernel's strict mode.
# Ends with "N passed, N failed"; exit 77 (skipped) outside strict mode.
set -u
. "$(dirname "$0")/report.sh"
need_built commit_prog

mode=$(cat /proc/sys/vm/overcommit_memory 2>/dev/null || echo '?')
if [ "$mode" != 2 ]; then
  echo "SKIP: vm.overcommit_memory is $mode, not 2 (strict): the commit charge is not tracked here"
  exit 77
fi

mib=512
# Small (64 B), medium (64 KiB) and huge (1 GiB at once) blocks.
for size in 64 65536 $((mib << 20)); do
  read -r _ charged _ after < <(LD_PRELOAD=$lib "$prog" "$size" "$mib")
  # Other processes move Committed_AS too: ask for most of it back.
  [ -n "${after:-}" ] && [ $((charged - after)) -gt $((mib * 1024 * 3 / 4)) ]
  report "$mib MiB of $size B blocks freed and trimmed give the charge back" $? \
    "Committed_AS ${charged:-?} KiB, then ${after:-?} KiB"
done

finish
