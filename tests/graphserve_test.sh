#!/usr/bin/env bash
# graphserve_test.sh - tools/graphserve end to end on the host backend: command-line
# mistakes (exit 2 in the flag's terms, -h), the functional cases of
# tests/graphserve_test.py (results checked by NumPy, every refusal, the in-flight limit,
# mutated bodies, /metrics through prometheus_client's parser, SIGTERM with work in flight,
# pipelines of other element types from tests/graphs: uint8 in and float32 out, float16, ...),
# then a short wrk load test (tools/graphserve_load: many connections, every response
# verified, zero failures, /metrics cross-checked, clean exit on SIGTERM).
set -u
cd "${TEST_SRCDIR}/graphrun" || exit 1
bin=tools/graphserve/graphserve
rc=0
# Command-line mistakes: exit 2 in the flag's terms, before anything starts.
cmdline() {
  local e
  e=$("$bin" --budget 1 2>&1); [[ $? == 2 && $e == *'invalid value "1" for --budget (sizes: 512'* &&
    $e != *budget_bytes* ]] || { echo "    --budget 1: $e"; return 1; }
  e=$("$bin" --port 1 --port 2 2>&1); [[ $? == 2 && $e == *"--port given twice"* ]] ||
    { echo "    --port twice: $e"; return 1; }
  e=$("$bin" --no-such-flag 2>&1); [[ $? == 2 && $(wc -l <<<"$e") -le 2 &&
    $e == *"see 'graphserve --help'"* ]] || { echo "    unknown flag: $e"; return 1; }
  e=$("$bin" -h 2>&1); [[ $? == 0 && $e == "usage: graphserve"* ]] ||
    { echo "    -h: $e"; return 1; }
}
if cmdline; then echo "PASS command_line_mistakes"; else echo "FAIL command_line_mistakes"; rc=1; fi
/usr/bin/python3 tests/graphserve_test.py --binary "$bin" --graphs graph/examples \
  --typed-graphs tests/graphs || rc=1
tools/graphserve_load --binary "$bin" --duration 3 --requests 4000 --connections 16 \
  --threads 2 --elems 256 || rc=1
exit $rc
