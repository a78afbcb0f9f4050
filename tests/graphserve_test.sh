#!/usr/bin/env bash
# graphserve_test.sh - tools/graphserve end to end on the host backend: the functional cases
# of tests/graphserve_test.py (results checked by NumPy, every refusal, the in-flight limit,
# mutated bodies, /metrics through prometheus_client's parser, SIGTERM with work in flight,
# pipelines of other element types from tests/graphs: uint8 in and float32 out, float16, ...),
# then a short wrk load test (tools/graphserve_load: many connections, every response
# verified, zero failures, /metrics cross-checked, clean exit on SIGTERM).
set -u
cd "${TEST_SRCDIR}/graphrun" || exit 1
bin=tools/graphserve/graphserve
rc=0
/usr/bin/python3 tests/graphserve_test.py --binary "$bin" --graphs graph/examples \
  --typed-graphs tests/graphs || rc=1
tools/graphserve_load --binary "$bin" --duration 3 --requests 4000 --connections 16 \
  --threads 2 --elems 256 || rc=1
exit $rc
