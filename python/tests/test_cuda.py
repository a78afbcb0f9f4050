"""What only the CUDA backend can show: CUDA failures and a lost device as exceptions, and
pinned memory that really is pinned. Each skips without a usable GPU."""
import json
import os
import subprocess
import sys

import pytest

import graphrun
from graphrun import _pinned
from helpers import rand, same_bits, seed_ref, torch


def test_cuda_failure_is_cuda_error(cuda):
    rt = graphrun.Runtime(budget="64MiB", backend="cuda", workers=1, batch_below=0,
                          fault_plan="graph_launch:1")
    try:
        xs = [rand(10_000, seed=i) for i in range(3)]
        x0 = [x.copy() for x in xs]
        job = rt.submit(graphrun.seed(), xs, inplace=True)  # the failed index: untouched
        assert job.wait(60)
        e = job.error()
        assert isinstance(e, graphrun.CudaError) and e.status == graphrun.Status.CUDA, e
        assert "cudaGraphLaunch" in e.message, e
        states = [job.status(i) for i in range(3)]
        assert states.count(("failed", graphrun.Status.CUDA)) == 1, states
        for i, (state, _) in enumerate(states):  # the failed one untouched, the rest right
            want = x0[i] if state == "failed" else seed_ref(x0[i])
            assert state in ("failed", "done") and same_bits(xs[i], want), (i, state)
        assert states[e.index][0] == "failed"
    finally:
        rt.close()


_LOST = r'''
import json, os, sys, tempfile
import numpy as np
import graphrun
d = tempfile.mkdtemp()
with open(os.path.join(d, "fault.cu"), "w") as f:
    f.write('#include "graphrun_kernel.h"\n'
            '// graphrun: kernel py_fault elementwise\n'
            'extern "C" __global__ void py_fault(gr_kernel_args a)\n'
            '{ *(volatile float *)8 = 1.0f; }\n')
with open(os.path.join(d, "fault.graph"), "w") as f:
    f.write('cuda "fault.cu"\nbuffer x\nh2d l: in0 -> x\nkernel k: py_fault(x) -> x\n'
            'd2h s: x -> out0\nl -> k -> s\n')
try:
    g = graphrun.Graph.load(os.path.join(d, "fault.graph"))
except graphrun.Unavailable as e:
    print(json.dumps({"skip": e.message})); sys.exit(0)
rt = graphrun.Runtime(budget="64MiB", backend="cuda")
x = np.ones(1000, np.float32)
job = rt.submit(g, [x], inplace=True)
job.wait(120)
e = job.error()
try:
    rt.run(graphrun.seed(), [np.ones(10, np.float32)])
    after = "ok"
except graphrun.Error as e2:
    after = type(e2).__name__
print(json.dumps({"error": type(e).__name__, "status": e.status.name, "index": e.index,
                  "lost": rt.stats()["devices_lost"], "after": after,
                  "untouched": bool((x == 1).all())}))
rt.close()
'''


def test_lost_device_is_device_lost(cuda):
    # A sticky CUDA error ruins the process's context: in a process of its own.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", _LOST], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    if "skip" in got:
        pytest.skip(f"NVRTC is not usable here: {got['skip']}")
    assert got == {"error": "DeviceLost", "status": "DEVICE_LOST", "index": 0, "lost": 1,
                   "after": "DeviceLost", "untouched": True}, got


def test_pinned_memory_through_the_gpu(cuda):
    xs = [graphrun.pinned(rand(1_000_000, seed=i)) for i in range(8)]
    want = [seed_ref(x) for x in xs]
    with graphrun.Runtime(budget="16MiB", backend="cuda") as rt:
        ys = rt.run(graphrun.seed(), xs)  # larger than the budget together: streamed
        s = rt.stats()
    assert all(same_bits(y, w) for y, w in zip(ys, want))
    assert all(_pinned.is_pinned(y) for y in ys), "pinned in, pinned out"
    assert s["devices"][0]["budget_peak"] <= 16 << 20
    assert s["staging_pageable"] == 0


def test_every_device(cuda):
    n = graphrun.probe("cuda").devices
    xs = [rand(100_000, seed=i) for i in range(4 * n)]
    want = [seed_ref(x) for x in xs]
    with graphrun.Runtime(budget="64MiB", backend="cuda", devices=list(range(n))) as rt:
        assert rt.info().devices == tuple(range(n))
        ys = rt.run(graphrun.seed(), xs)
    assert all(same_bits(y, w) for y, w in zip(ys, want))


@pytest.mark.parametrize("nbytes,count", [(16 << 10, 4000), (64 << 10, 8000), (1 << 20, 2000),
                                          (16 << 20, 64)])
def test_torch_pin_memory_tensors(cuda, nbytes, count):
    # What a PyTorch user brings first: pin_memory() tensors, each from PyTorch's caching
    # host allocator, often back to back in separate cudaHostAlloc blocks, which the driver
    # refuses to copy as one range. Checked against NumPy, never against graphrun.
    if torch is None or not torch.cuda.is_available():
        pytest.skip("PyTorch with CUDA is not installed")
    xs = [torch.from_numpy(rand(nbytes // 4, seed=i)).pin_memory() for i in range(count)]
    want = [seed_ref(x.numpy()) for x in xs]
    views = [x.numpy() for x in xs[: count // 2]] + xs[count // 2:]  # NumPy arrays over them
    with graphrun.Runtime(budget="256MiB", backend="cuda") as rt:
        ys = rt.run(graphrun.seed(), views)  # new outputs: pinned, as the inputs are
        pinned_out = [_pinned.is_pinned(y) for y in ys]
        rt.run(graphrun.seed(), views, inplace=True)
        s = rt.stats()
    assert all(same_bits(y, w) for y, w in zip(ys, want))
    assert all(pinned_out), f"{pinned_out.count(False)} outputs not pinned"
    wrong = [i for i, (x, w) in enumerate(zip(xs, want)) if not same_bits(x.numpy(), w)]
    assert wrong == [], f"{len(wrong)} tensors wrong, first {wrong[:5]}"
    assert s["devices"][0]["copies_refused"] == 0
