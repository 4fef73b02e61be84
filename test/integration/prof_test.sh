#!/usr/bin/env bash
# Heap profiles that google-pprof reads: prof_prog.c allocates at known
# sites (64 MiB in 4 KiB blocks, 16 MiB in 1 KiB blocks, 32 MiB in 4 MiB
# blocks, one block grown to 8 MiB by realloc, and 128 MiB allocated and
# freed at once), and the real google-pprof (Debian's google-perftools)
# must list each site with its size within sampling error, from the final
# dump (prof_final) and from mallctl("prof.dump"); bin/ductile --profile
# writes one and says how to read it. Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
need_built prof_prog
if ! command -v google-pprof >/dev/null 2>&1; then
  echo "SKIP: google-pprof not found (Debian package google-perftools)"
  exit 77
fi

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

finish
