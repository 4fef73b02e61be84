#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Statistics and options from the environment, as a program run under the
# built library sees them: DUCTILE_STATS takes the usual true/false words
# and warns about others; stats_print_opts:J prints the exit summary as
# JSON, whose options are numbers, booleans and strings by their kind; a
# bad option value's warning names the values allowed, and a value cut
# short ends in an ellipsis; bin/ductile --help prints its usage on stdout.
# Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/report.sh"
need_built quiet_prog
# A program that allocates (the summary is printed at exit once ductile
# has started); sort reads its input whole.
run() { printf 'b\na\n' | LD_PRELOAD="$lib" sort >/dev/null; }

for word in 1 true yes on; do
  err=$(DUCTILE_STATS=$word run 2>&1)
  grep -q '^___ End ductile statistics ___$' <<<"$err" && ! grep -q warning <<<"$err"
  report "DUCTILE_STATS=$word prints the summary" $? "$(head -c 200 <<<"$err")"
done
for word in 0 false no off; do
  err=$(DUCTILE_STATS=$word run 2>&1)
  [ -z "$err" ]
  report "DUCTILE_STATS=$word prints nothing" $? "$(head -c 200 <<<"$err")"
done
err=$(DUCTILE_STATS=maybe run 2>&1)
grep -q '^ductile: warning: DUCTILE_STATS: expected 1/0, true/false, yes/no or on/off; ignored$' <<<"$err" &&
  ! grep -q 'statistics' <<<"$err"
report "DUCTILE_STATS=maybe warns and prints nothing" $? "$(head -c 200 <<<"$err")"

json=$(DUCTILE_CONF=stats_print:true,stats_print_opts:J,decay_ms:2500 run 2>&1)
grep -q '"decay_ms":2500,' <<<"$json" && grep -q '"tcache":true' <<<"$json" &&
  grep -q '"lg_prof_interval":-1' <<<"$json" && grep -q '"thp":"auto"' <<<"$json" &&
  ! grep -q 'warning' <<<"$json"
report "stats_print_opts:J prints JSON at exit, options typed" $? "$(head -c 300 <<<"$json")"
if command -v python3 >/dev/null 2>&1; then
  python3 -c 'import json, sys; json.loads(sys.stdin.read())' <<<"$json"
  report "the summary at exit is valid JSON" $?
fi

err=$(DUCTILE_CONF=lg_prof_sample:99 run 2>&1)
grep -qF 'ductile: warning: DUCTILE_CONF: bad value for "lg_prof_sample:99" ignored (allowed: 0 to 63)' <<<"$err"
report "a bad value's warning names the values allowed" $? "$err"
long=$(printf 'x%.0s' $(seq 300))
err=$(DUCTILE_CONF=prof_prefix:$long run 2>&1)
grep -qF "\"prof_prefix:$(head -c 52 <<<"$long")…\" ignored (allowed: up to 255 bytes)" <<<"$err"
report "a value cut short ends in an ellipsis" $? "$err"
err=$(DUCTILE_CONF=bin_sets:9 run 2>&1)
grep -qF '(allowed: 0 (one per CPU) to 8)' <<<"$err"
report "bin_sets:9 names its range" $? "$err"

wrapper=$builddir/bin/ductile
out=$("$wrapper" --help 2>"${TMPDIR:-/tmp}/ductile-env-test.$$")
st=$?
err=$(cat "${TMPDIR:-/tmp}/ductile-env-test.$$"); rm -f "${TMPDIR:-/tmp}/ductile-env-test.$$"
[ "$st" -eq 0 ] && [ -z "$err" ] && grep -q '^usage: ductile ' <<<"$out" && grep -q -- '--profile' <<<"$out" &&
  grep -q -- '--stats' <<<"$out" && grep -q -- '--conf STRING' <<<"$out" && [ "$(wc -l <<<"$out")" -gt 10 ]
report "ductile --help prints the usage on stdout and exits 0" $? "exit $st; stdout: $(head -c 100 <<<"$out"); stderr: $err"
"$wrapper" --no-such-option >/dev/null 2>&1
[ $? -eq 2 ]
report "ductile with an unknown option exits 2" $?

finish
