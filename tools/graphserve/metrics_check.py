#!/usr/bin/env python3
"""metrics_check.py - parse graphserve's /metrics with the Prometheus client library's own
text parser (prometheus_client.parser.text_string_to_metric_families, Debian's
python3-prometheus-client) and check what the text says.

  metrics_check.py [--min-done N] [--exact-done N] [--no-errors] < metrics.txt

Always checked: the text parses; the families graphrun and graphserve promise are there
with their types; every histogram's buckets are cumulative, end in +Inf, and the +Inf
bucket equals _count; counters are non-negative. --exact-done / --min-done: tensors done
over all devices; --no-errors: no failed or canceled tensor, no failed job, and no HTTP
answer other than 200. Prints one JSON line of figures; exits 1 with the reason on stderr.
"""
import json
import sys
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families

FAMILIES = {
    "graphrun_info": "gauge",
    "graphrun_devices": "gauge",
    "graphrun_jobs_submitted": "counter",
    "graphrun_jobs_completed": "counter",
    "graphrun_jobs_failed": "counter",
    "graphrun_tensors": "counter",
    "graphrun_iterations": "counter",
    "graphrun_transfer_bytes": "counter",
    "graphrun_budget_bytes": "gauge",
    "graphrun_budget_in_use_bytes": "gauge",
    "graphrun_budget_peak_bytes": "gauge",
    "graphrun_device_lost": "gauge",
    "graphrun_budget_wait_seconds": "histogram",
    "graphrun_iteration_seconds": "histogram",
    "graphserve_requests": "counter",
    "graphserve_requests_in_flight": "gauge",
}


def fail(msg):
    sys.stderr.write("metrics_check: " + msg + "\n")
    sys.exit(1)


def main(argv):
    text = sys.stdin.read()
    try:
        families = {f.name: f for f in text_string_to_metric_families(text)}
    except Exception as e:  # the parser's own error: the text is not Prometheus text
        fail(f"does not parse as Prometheus text: {e!r}")
    for name, typ in FAMILIES.items():
        # The parser names a counter family without its _total suffix.
        f = families.get(name)
        if f is None:
            fail(f"no family {name} (found: {sorted(families)})")
        if f.type != typ:
            fail(f"{name} is a {f.type}, expected a {typ}")
    for f in families.values():
        if f.type == "counter":
            for s in f.samples:
                if s.value < 0:
                    fail(f"negative counter {s.name}{s.labels} = {s.value}")
        if f.type != "histogram":
            continue
        series = defaultdict(list)
        counts = {}
        for s in f.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            if s.name.endswith("_bucket"):
                series[key].append((float(s.labels["le"]), s.value))
            elif s.name.endswith("_count"):
                counts[key] = s.value
        if not series:
            fail(f"histogram {f.name} has no buckets")
        for key, buckets in series.items():
            values = [v for _, v in buckets]
            if values != sorted(values):
                fail(f"{f.name}{dict(key)}: buckets not cumulative: {values}")
            if buckets[-1][0] != float("inf"):
                fail(f"{f.name}{dict(key)}: last bucket is not +Inf")
            if counts.get(key) != buckets[-1][1]:
                fail(f"{f.name}{dict(key)}: +Inf bucket {buckets[-1][1]} != _count "
                     f"{counts.get(key)}")

    tensors = defaultdict(float)
    for s in families["graphrun_tensors"].samples:
        tensors[s.labels["outcome"]] += s.value
    answers = {s.labels["code"]: s.value for s in families["graphserve_requests"].samples}
    jobs_failed = families["graphrun_jobs_failed"].samples[0].value
    figures = {
        "tensors_done": int(tensors["done"]),
        "tensors_failed": int(tensors["failed"]),
        "tensors_canceled": int(tensors["canceled"]),
        "jobs_failed": int(jobs_failed),
        "answers": {k: int(v) for k, v in answers.items() if v},
        "families": len(families),
    }
    if "--exact-done" in argv:
        want = int(argv[argv.index("--exact-done") + 1])
        if tensors["done"] != want:
            fail(f"tensors done {tensors['done']:.0f}, expected {want}")
    if "--min-done" in argv:
        want = int(argv[argv.index("--min-done") + 1])
        if tensors["done"] < want:
            fail(f"tensors done {tensors['done']:.0f}, expected at least {want}")
    if "--no-errors" in argv:
        if tensors["failed"] or tensors["canceled"] or jobs_failed:
            fail(f"failures in the runtime: {figures}")
        others = {k: v for k, v in answers.items() if k != "200" and v}
        if others:
            fail(f"answers other than 200: {others}")
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv)
