#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Heap profiles that google-pprof reads: prof_prog.c allocates at known
# sites (64 MiB in 4 KiB blocks, 16 MiB in 1 KiB blocks, 32 MiB in 4 MiB
# blocks, one block grown to 8 MiB by realloc, and 128 MiB allocated and
# freed at once), and the real google-pprof (Debian's google-perftools)
# must list each site with its size within sampling error, from the final
# dump (prof_final) and from mallctl("prof.dump"); the dumps of
# lg_prof_interval, prof_gdump and prof_signal come when due and read the
# same way; bin/ductile --profile writes one and says how to read it (with
# the executable the process ran, and what to try when nothing was live at
# exit). Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
need_built prof_prog
need_config DUCTILE_PROF --disable-prof
need_pprof

dir=$(mktemp -d "${TMPDIR:-/tmp}/ductile-prof.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# mib TEXT FUNCTION: the MiB that google-pprof's --text output TEXT gives
# FUNCTION (its own bytes, "flat"), or nothing when it lists no such function.
mib() {
  awk -v fn="$2" '$6 == fn { sum += $1; seen = 1 } END { if (seen) print sum }' <<<"$1"
}
pprof() { google-pprof --text "$@" 2>/dev/null; }
# within VALUE EXPECTED PERCENT
within() {
  awk -v v="${1:-x}" -v e="$2" -v p="$3" 'BEGIN { exit !(v ~ /^[0-9.]+$/ && v >= e * (1 - p / 100) && v <= e * (1 + p / 100)) }'
}

# One sample per 32 KiB on average: about 1 900 samples of hold_pages, 500
# of hold_small (sampling error 2.3 % and 4.5 %: the bounds are 6 of them),
# every 4 MiB block and the grown block.
conf=prof:true,lg_prof_sample:15,prof_final:true,prof_leak:true,prof_prefix:$dir/p
LD_PRELOAD=$lib DUCTILE_CONF=$conf "$prog" "$dir/m.heap" 2>"$dir/stderr"
report "the program runs profiled" $? "$(head -c 300 "$dir/stderr")"
final=$(ls "$dir"/p.*.0.f.heap 2>/dev/null | head -1)
[ -n "$final" ] && [ -s "$final" ]
report "prof_final writes <prefix>.<pid>.0.f.heap" $? "${final:-none}"
head -1 "${final:-/dev/null}" | grep -qE '^heap profile: +[0-9]+: +[0-9]+ \[ *[0-9]+: +[0-9]+\] @ heap_v2/32768$'
report "the legacy header, with the sampling rate" $? "$(head -1 "${final:-/dev/null}")"
grep -q '^MAPPED_LIBRARIES:$' "${final:-/dev/null}"
report "the mappings follow" $?

for dump in "$final" "$dir/m.heap"; do
  name=$(basename "${dump:-none}")
  text=$(pprof "$prog" "$dump")
  v=$(mib "$text" hold_pages); within "$v" 64 15
  report "$name: hold_pages holds 64 MiB" $? "google-pprof: ${v:-nothing}"
  v=$(mib "$text" hold_small); within "$v" 16 27
  report "$name: hold_small holds 16 MiB" $? "google-pprof: ${v:-nothing}"
  v=$(mib "$text" hold_huge); within "$v" 32 1
  report "$name: hold_huge holds 32 MiB" $? "google-pprof: ${v:-nothing}"
  v=$(mib "$text" grow_vector); within "$v" 8 1
  report "$name: grow_vector holds 8 MiB (grown in place)" $? "google-pprof: ${v:-nothing}"
  v=$(mib "$text" churn)
  [ -z "$v" ] || within "$v" 0 0
  report "$name: churn holds nothing" $? "google-pprof: ${v:-nothing}"
done
v=$(mib "$(pprof --alloc_space "$prog" "$final")" churn); within "$v" 128 15
report "--alloc_space: churn allocated 128 MiB" $? "google-pprof: ${v:-nothing}"

# The leak summary estimates what was live at exit: the 120 MiB above.
leak=$(sed -n 's/^<ductile>: Leak approximation summary: ~\([0-9]*\) bytes.*/\1/p' "$dir/stderr")
within "$(( ${leak:-0} / 1048576 ))" 120 12
report "prof_leak prints a summary" $? "$(head -2 "$dir/stderr" | tr '\n' ' ')"

# prof_active:false: profiling ready, but nothing sampled.
LD_PRELOAD=$lib DUCTILE_CONF=$conf,prof_active:false "$prog" "$dir/inactive.heap"
head -1 "$dir/inactive.heap" | grep -qE '^heap profile: +0: +0 \[ *0: +0\]'
report "prof_active:false samples nothing" $? "$(head -1 "$dir/inactive.heap")"

# Without prof:true there is no profile to dump, and none at exit.
rm -f "$dir"/p.*
LD_PRELOAD=$lib DUCTILE_CONF=prof_final:true,prof_prefix:$dir/p "$prog" "$dir/off.heap" 2>/dev/null
[ $? -eq 2 ] && [ ! -e "$dir/off.heap" ] && ! ls "$dir"/p.* >/dev/null 2>&1
report "profiling is off by default" $?

# lg_prof_interval:25: a dump per 32 MiB allocated, numbered i0, i1, ...
# in turn (the program allocates about 250 MiB: some 7 of them).
rm -f "$dir"/p.*
LD_PRELOAD=$lib DUCTILE_CONF=prof:true,lg_prof_sample:15,lg_prof_interval:25,prof_prefix:$dir/p "$prog"
n=$(ls "$dir"/p.*.i*.heap 2>/dev/null | wc -l)
[ "$n" -ge 4 ] && [ "$n" -le 9 ] && [ -s "$(ls "$dir"/p.*.i$((n - 1)).heap)" ]
report "lg_prof_interval:25 writes a dump per 32 MiB allocated" $? "$n dumps: $(ls "$dir" | tr '\n' ' ' | head -c 300)"
last=$(ls "$dir"/p.*.i$((n - 1)).heap 2>/dev/null)
v=$(mib "$(pprof "$prog" "$last")" hold_pages); within "$v" 64 15
report "an interval dump reads in google-pprof: hold_pages holds 64 MiB" $? "google-pprof: ${v:-nothing}"

# prof_gdump: a dump at each new high of the (sampled) live bytes, so each
# one's header counts more live bytes than the one before.
rm -f "$dir"/p.*
LD_PRELOAD=$lib DUCTILE_CONF=prof:true,prof_gdump:true,prof_prefix:$dir/p "$prog"
n=$(ls "$dir"/p.*.u*.heap 2>/dev/null | wc -l)
rising=yes
prev=-1
for ((i = 0; i < n; i++)); do
  live=$(head -1 "$dir"/p.*.u$i.heap | awk '{ print $4 }')
  [ "${live:-0}" -gt "$prev" ] || rising=no
  prev=${live:-0}
done
[ "$n" -ge 2 ] && [ "$rising" = yes ]
report "prof_gdump writes a dump at each new high of the live bytes" $? "$n dumps, rising: $rising"

# prof_signal: the program sends itself SIGUSR2 once hold_pages has its 64
# MiB; the handler writes the dump (s0), outside the allocator.
rm -f "$dir"/p.*
PROF_PROG_RAISE=$(kill -l USR2) LD_PRELOAD=$lib DUCTILE_CONF=prof:true,lg_prof_sample:15,prof_signal:SIGUSR2,prof_prefix:$dir/p "$prog"
report "prof_signal:SIGUSR2: the program runs on after the signal" $?
sdump=$(ls "$dir"/p.*.0.s0.heap 2>/dev/null)
v=$(mib "$(pprof "$prog" "$sdump")" hold_pages); within "$v" 64 15
report "prof_signal:SIGUSR2 writes <prefix>.<pid>.<seq>.s0.heap: hold_pages holds 64 MiB" $? "${sdump:-no dump}; google-pprof: ${v:-nothing}"
v=$(mib "$(pprof "$prog" "$sdump")" hold_small)
[ -z "$v" ]
report "the signal's dump is what was live then (no hold_small yet)" $? "google-pprof: ${v:-nothing}"

# prof_signal:SIGTERM, which stops a program that has no handler for it:
# the program stops still, killed by it, after the dump (a server stopped so
# leaves its profile).
rm -f "$dir"/p.*
PROF_PROG_RAISE=$(kill -l TERM) LD_PRELOAD=$lib DUCTILE_CONF=prof:true,lg_prof_sample:15,prof_signal:SIGTERM,prof_prefix:$dir/p "$prog"
st=$?
[ "$st" -eq $((128 + $(kill -l TERM))) ]
report "prof_signal:SIGTERM: the program stops, killed by SIGTERM" $? "exit status $st"
sdump=$(ls "$dir"/p.*.0.s0.heap 2>/dev/null)
v=$(mib "$(pprof "$prog" "$sdump")" hold_pages); within "$v" 64 15
report "prof_signal:SIGTERM writes its dump first: hold_pages holds 64 MiB" $? "${sdump:-no dump}; google-pprof: ${v:-nothing}"

# bin/ductile --profile, at the default rate (2^19: about 130 samples of
# hold_pages, an error of 9 %).
wrapper=$builddir/bin/ductile
(cd "$dir" && DUCTILE_LIB=$lib "$wrapper" --profile "$prog") 2>"$dir/wrapper.err"
report "ductile --profile runs the command" $? "$(head -c 300 "$dir/wrapper.err")"
heap=$(ls "$dir"/ductile-heap.*.0.f.heap 2>/dev/null | head -1)
[ -n "$heap" ] && grep -q "google-pprof --text $prog $(basename "$heap")" "$dir/wrapper.err"
report "ductile --profile says where the dump is and how to read it" $? "$(head -2 "$dir/wrapper.err" | tr '\n' ' ')"
v=$(mib "$(pprof "$prog" "$heap")" hold_pages); within "$v" 64 45
report "ductile --profile: hold_pages holds 64 MiB" $? "google-pprof: ${v:-nothing}"

# A command that execs the program: the wrapper names the executable the
# process ran (from the dump's mappings), not the shell it started.
rm -f "$dir"/ductile-heap.*
(cd "$dir" && DUCTILE_LIB=$lib "$wrapper" --profile sh -c "exec '$prog'") 2>"$dir/wrapper.err"
heap=$(ls "$dir"/ductile-heap.*.0.f.heap 2>/dev/null | head -1)
[ -n "$heap" ] && grep -q "google-pprof --text $prog $(basename "$heap")" "$dir/wrapper.err"
report "ductile --profile sh -c 'exec prog' names prog" $? "$(head -2 "$dir/wrapper.err" | tr '\n' ' ')"

# Nothing live at exit: the wrapper says so and what to try instead.
rm -f "$dir"/ductile-heap.*
(cd "$dir" && DUCTILE_LIB=$lib "$wrapper" --profile --conf prof_active:false "$prog" --free-all) 2>"$dir/wrapper.err"
grep -q "0 bytes live at exit — try --alloc_space" "$dir/wrapper.err"
report "ductile --profile: an empty profile suggests --alloc_space" $? "$(head -4 "$dir/wrapper.err" | tr '\n' ' ')"

finish
