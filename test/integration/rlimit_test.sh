#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# ductile under an address-space limit (ulimit -v, RLIMIT_AS): reservations
# are sized from the limit, so real programs run under 64 MiB as they do
# without ductile, and running out is NULL with ENOMEM, never a crash, with
# work resuming after frees (rlimit_prog.c). Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
need_built rlimit_prog

# Real programs under 64 MiB: the same output with and without ductile
# (before, ductile's first 1 GiB reservation failed and `ls` printed
# "memory exhausted").
under_limit() {  # KIB CMD... : runs CMD with RLIMIT_AS set to KIB
  local kib=$1
  shift
  (ulimit -v "$kib" && exec "$@")
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for cmd in "ls -l /usr/bin" "python3 -c print(sum(range(10**6)))" "sort -r /etc/services"; do
  # shellcheck disable=SC2086
  under_limit 65536 $cmd >"$work/plain" 2>&1
  rc_plain=$?
  # shellcheck disable=SC2086
  LD_PRELOAD=$lib DUCTILE_STATS=1 under_limit 65536 $cmd >"$work/ductile" 2>"$work/err"
  rc=$?
  # The statistics at exit prove that ductile served the run.
  [ "$rc" -eq "$rc_plain" ] && cmp -s "$work/plain" "$work/ductile" && grep -q '^Chunk layer:' "$work/err"
  report "${cmd%% *} under a 64 MiB limit" $? "exit $rc_plain vs $rc"
done

# A realloc-growth loop to the limit, twice; threads allocating until refused.
for spec in "524288 grow" "524288 threads" "204800 threads"; do
  set -- $spec
  out=$(under_limit "$1" "$prog" "$2" 2>&1)
  report "rlimit_prog $2 under $(($1 / 1024)) MiB" $? "$out"
done

# Every range filled until refused: NULL/ENOMEM, std::bad_alloc, the blocks
# intact, and the same requests served again after frees.
need_built rlimit_oom
out=$(under_limit 524288 "$prog" 2>&1)
report "rlimit_oom under 512 MiB" $? "$out"

finish
