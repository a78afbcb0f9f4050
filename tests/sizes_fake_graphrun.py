"""sizes_fake_graphrun.py - a stand-in for `graphrun bench --json` where there is no GPU, for
tests/sizes_test.sh: it prints one object with the fields tools/bench/sizes_bench reads, with
plausible figures (a link of 100 GB/s both ways, a per-tensor cost), and does no work.

    python3 sizes_fake_graphrun.py bench --count N --elems N --budget B --memory M
                                   --layout L [--workers N] [--passes N] [--host-cache S]
                                   --json

Also tests/targets_test.sh's, for tools/bench/targets_bench.

SIZES_FAKE_WRONG=ELEMS: the run of that many elements reports 3 wrong tensors.
SIZES_FAKE_FAIL=ELEMS: that run exits with status 3 and prints nothing.
"""
import argparse
import json
import os
import sys

ap = argparse.ArgumentParser()
ap.add_argument("cmd", choices=["bench"])
ap.add_argument("--count", type=int, required=True)
ap.add_argument("--elems", type=int, required=True)
ap.add_argument("--budget", required=True)
ap.add_argument("--memory", default="pinned")
ap.add_argument("--layout", default="separate")
ap.add_argument("--workers", type=int, default=3)
ap.add_argument("--passes", type=int, default=1)
ap.add_argument("--host-cache", default="0")
ap.add_argument("--json", action="store_true")
a = ap.parse_args()
if not a.json:
    sys.exit("sizes_fake_graphrun: expected --json")
if os.environ.get("SIZES_FAKE_FAIL") == str(a.elems):
    print("graphrun bench: cannot run: CUDA error (fake)", file=sys.stderr)
    sys.exit(3)

size = a.elems * 4
total = size * a.count
copy = min(size, 400_000_000)
if copy < 64 << 20 and total >= 64 << 20:
    copy = 64 << 20
bidir = 96.0 + (copy % 7) * 0.5  # a reading that differs a little from run to run
each_way = {"pinned": 45e9, "pageable": 9e9}.get(a.memory, 45e9)
per_tensor = {"contiguous": 0.6e-6, "separate": 3.3e-6}[a.layout]
seconds = max(total / each_way, a.count * per_tensor) + 20e-6
floor_ms = 2 * size / (bidir * 1e9) * 1e3
ms = seconds * 1e3 / a.count
wrong = 3 if os.environ.get("SIZES_FAKE_WRONG") == str(a.elems) else 0
for k in range(a.passes):  # one object per pass, as graphrun bench --passes prints
    print(json.dumps({"pass": k + 1, "passes": a.passes,
    "device": "Fake GPU", "sm_count": 132, "count": a.count, "elems": a.elems,
    "bytes_per_tensor": size, "memory": a.memory, "layout": a.layout, "workers": a.workers,
    "host_pool": os.environ.get("GR_HOST_POOL") != "0",
    "contexts": "primary",
    "ceilings": {"copy_bytes": copy, "h2d_gbs": 55.0, "d2h_gbs": 55.0, "bidir_gbs": bidir},
    "devices": [0], "iterations_per_device": [a.count],
    "device_memory_above_baseline_per_device": [min(total, 1 << 30)],
    "seconds": seconds, "ms_per_tensor": ms, "tensors_per_s": a.count / seconds,
    "floor_ms": floor_ms, "ratio": floor_ms / ms,
    "device_memory": {"baseline": 1 << 29, "peak": (1 << 29) + min(total, 1 << 30),
                      "above_baseline": min(total, 1 << 30), "budget": 1 << 30,
                      "total": 150 << 30},
    "runtime_host_memory": 1 << 20, "start_ms": 300.0, "graph_instantiations": 3,
    "graph_updates": a.count, "iterations": a.count, "done": a.count, "failed": 0,
    "canceled": 0, "status": "ok", "verified": True, "wrong_tensors": wrong}))
sys.exit(1 if wrong else 0)
