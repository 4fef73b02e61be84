#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Growth profiles that google-pprof reads, and the totals at exit:
# growth_prog.c grows blocks at two known sites (one copies 16 bytes 100
# times, one grows a huge block in place 10 times), sampled at every event
# (lg_growth_sample:0), so that every figure is exact. The real
# google-pprof (Debian's google-perftools) must list the copying site with
# its bytes copied and not the other; its growth events by way; the dump of
# mallctl("prof.growth.dump") reads the same; without growth_prof nothing
# is written; bin/ductile --growth prints the call sites. Ends with
# "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
need_built growth_prog
need_config DUCTILE_STATS --disable-stats
need_config DUCTILE_PROF --disable-prof
need_pprof

dir=$(mktemp -d "${TMPDIR:-/tmp}/ductile-growth.XXXXXX")
trap 'rm -rf "$dir"' EXIT

pprof() { google-pprof --text "$@" 2>/dev/null; }
# flat TEXT FUNCTION: the function's own count in google-pprof's --text
# output TEXT, or nothing when it lists no such function; cum: its
# cumulative count.
flat() { awk -v fn="$2" '$6 == fn { print $1 }' <<<"$1"; }
cum() { awk -v fn="$2" '$6 == fn { print $4 }' <<<"$1"; }

conf=growth_prof:true,lg_growth_sample:0,prof_prefix:$dir/g
LD_PRELOAD=$lib DUCTILE_CONF=$conf "$prog" "$dir/m.growth" >"$dir/stdout" 2>"$dir/stderr"
report "the program runs with growth_prof" $? "$(head -c 300 "$dir/stderr")"
grep -qx "dump: 0" "$dir/stdout"
report "mallctl(\"prof.growth.dump\") writes a named dump" $? "$(cat "$dir/stdout")"
final=$(ls "$dir"/g.*.f.growth 2>/dev/null | head -1)
[ -n "$final" ] && [ -s "$final" ]
report "at exit: <prefix>.<pid>.<seq>.f.growth" $? "${final:-none}"
grep -qE '^<ductile>: growth: 110 reallocs grew blocks: in_place 0, headroom [0-9]+, neighbour [0-9]+, fixed_map [0-9]+, mremap 0, copy 100 \(1600 bytes copied\)$' "$dir/stderr"
report "at exit: the totals by way, 100 copies of 16 bytes" $? "$(head -2 "$dir/stderr" | tr '\n' ' ')"
# Bytes grown: (3 000 - 16) x 100 + 2 MiB x 10.
head -1 "${final:-/dev/null}" | grep -qE '^heap profile: +100: +1600 \[ *110: +21269920\] @ heapprofile$'
report "the header: copies and bytes copied, events and bytes grown, unscaled" $? "$(head -1 "${final:-/dev/null}")"

for dump in "$final" "$dir/m.growth"; do
  name=$(basename "${dump:-none}")
  text=$(pprof --show_bytes "$prog" "$dump")
  v=$(flat "$text" copy_site); [ "${v:-x}" = 1600 ]
  report "$name: copy_site copied 1 600 bytes" $? "google-pprof: ${v:-nothing}"
  v=$(flat "$text" in_place_site); [ -z "$v" ] || [ "$v" = 0 ]
  report "$name: in_place_site copied nothing" $? "google-pprof: ${v:-nothing}"
  text=$(pprof --alloc_objects "$prog" "$dump")
  v=$(flat "$text" copy_site); [ "${v:-x}" = 100 ]
  report "$name: --alloc_objects: copy_site grew 100 blocks" $? "google-pprof: ${v:-nothing}"
  v=$(flat "$text" in_place_site); [ "${v:-x}" = 10 ]
  report "$name: --alloc_objects: in_place_site grew 10 blocks" $? "google-pprof: ${v:-nothing}"
  v=$(cum "$text" ductile_grew_by_copy); [ "${v:-x}" = 100 ]
  report "$name: the way's marker counts the copies" $? "google-pprof: ${v:-nothing}"
  h=$(cum "$text" ductile_grew_by_headroom) n=$(cum "$text" ductile_grew_by_neighbour)
  [ $(( ${h:-0} + ${n:-0} )) -eq 10 ]
  report "$name: the markers of the ways in place count the rest" $? "headroom ${h:-0}, neighbour ${n:-0}"
done

# The statistics print the same totals.
DUCTILE_STATS=1 LD_PRELOAD=$lib "$prog" 2>"$dir/stats"
grep -qE '^Growth by way: in_place 0 headroom [0-9]+ neighbour [0-9]+ fixed_map [0-9]+ mremap 0 copy 100; ' "$dir/stats"
report "the statistics: growth by way, without growth_prof" $? "$(grep '^Growth' "$dir/stats")"

# Without growth_prof: no profile to dump, none at exit, no summary.
rm -f "$dir"/g.* "$dir"/m.growth
LD_PRELOAD=$lib DUCTILE_CONF=prof_prefix:$dir/g "$prog" "$dir/m.growth" >"$dir/stdout" 2>"$dir/stderr"
grep -qx "dump: 2" "$dir/stdout" && [ ! -e "$dir/m.growth" ] && ! ls "$dir"/g.* >/dev/null 2>&1 &&
  ! grep -q "growth:" "$dir/stderr"
report "without growth_prof: ENOENT, no file, no summary" $? "$(cat "$dir/stdout")"

# bin/ductile --growth: the call sites that copied most and moved most.
wrapper=$builddir/bin/ductile
(cd "$dir" && DUCTILE_LIB=$lib "$wrapper" --growth --conf lg_growth_sample:0 "$prog") 2>"$dir/wrapper.err"
report "ductile --growth runs the command" $? "$(head -c 300 "$dir/wrapper.err")"
awk '/call sites by bytes copied:/ { on = 1; next } /call sites by moves/ { on = 0 } on && $NF == "copy_site" && $2 == 1600 { found = 1 } END { exit !found }' "$dir/wrapper.err"
report "ductile --growth: copy_site first by bytes copied" $? "$(tr '\n' '|' <"$dir/wrapper.err" | head -c 600)"
awk '/call sites by moves/ { on = 1; next } /read it with/ { on = 0 } on && $NF == "copy_site" && $2 == 100 { found = 1 } on && $NF == "in_place_site" { found = 0; exit } END { exit !found }' "$dir/wrapper.err"
report "ductile --growth: copy_site by moves, in_place_site not" $? "$(tr '\n' '|' <"$dir/wrapper.err" | head -c 600)"
grep -q "google-pprof --text $prog ductile-growth\.[0-9]*\.[0-9]*\.f\.growth" "$dir/wrapper.err"
report "ductile --growth says how to read the profile" $? "$(grep 'read it' "$dir/wrapper.err")"

finish
