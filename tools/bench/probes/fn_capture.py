#!/usr/bin/env python3
"""fn_capture.py - would capturing a PyTorch function into a CUDA graph win for small tensors?

rt.map calls fn once a tensor, eagerly: fn's kernels are launched from Python each time
(the seed written in PyTorch is thirty). Capturing fn into a CUDA graph and replaying it
would launch them as one. This probe measures that choice alone, outside graphrun, on one
stream: N pinned tensors of E float32, each copied in, put through fn, copied out, three ways:

  copies    the copies alone (the floor: what the link allows)
  eager     fn called on the device tensor each time (what rt.map does)
  captured  fn captured once (torch.cuda.CUDAGraph) over a static device buffer; a tensor is
            copied into that buffer, the graph replayed, the buffer copied out

and prints each way's microseconds a tensor and the eager and captured ways' ratio to the
floor. Every output of both ways with fn is checked bit for bit against NumPy's seed
(float32). Exit 0 when all are right, 1 otherwise, 77 without PyTorch and CUDA.

    python tools/bench/probes/fn_capture.py [N] [E]     # default 12800 16384 (64 KiB)
"""
import importlib.machinery
import importlib.util
import os
import sys
import time

import numpy as np


def load_map_bench():
    """tools/bench/map_bench as a module: its seed_fn (the function its rt.map rows run) and
    its NumPy reference, one copy of each."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "map_bench")
    loader = importlib.machinery.SourceFileLoader("graphrun_map_bench", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


MAP_BENCH = load_map_bench()
seed_fn, seed_ref = MAP_BENCH.seed_fn, MAP_BENCH.seed_ref


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 12800
    e = int(sys.argv[2]) if len(sys.argv) > 2 else 16384
    try:
        import torch
    except ImportError:
        print("SKIP: no PyTorch")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    rng = np.random.default_rng(1)
    src = [torch.from_numpy(rng.random(e, dtype=np.float32)).pin_memory() for _ in range(n)]
    dst = [torch.empty(e, dtype=torch.float32).pin_memory() for _ in range(n)]
    s = torch.cuda.Stream()
    dev = torch.empty(e, dtype=torch.float32, device="cuda")

    def copies():
        for x, y in zip(src, dst):
            dev.copy_(x, non_blocking=True)
            y.copy_(dev, non_blocking=True)

    def eager():
        for x, y in zip(src, dst):
            dev.copy_(x, non_blocking=True)
            seed_fn(dev)
            y.copy_(dev, non_blocking=True)

    with torch.cuda.stream(s):  # warm the kernels before capture and timing
        seed_fn(dev.fill_(0.5))
    s.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        seed_fn(dev)

    def captured():
        for x, y in zip(src, dst):
            dev.copy_(x, non_blocking=True)
            g.replay()
            y.copy_(dev, non_blocking=True)

    def timed(way):
        with torch.cuda.stream(s):
            way()  # warm
            s.synchronize()
            t0 = time.perf_counter()
            way()
            s.synchronize()
        return time.perf_counter() - t0

    ref = [seed_ref(x.numpy()).view(np.uint32) for x in src]
    floor = timed(copies)
    print(f"{n} tensors of {e * 4 // 1024} KiB, one stream; the seed in PyTorch (30 kernels)")
    print(f"  copies    {floor / n * 1e6:8.1f} us a tensor")
    wrong = 0
    for name, way in (("eager", eager), ("captured", captured)):
        for y in dst:
            y.fill_(0)
        t = timed(way)
        bad = sum(not np.array_equal(y.numpy().view(np.uint32), r) for y, r in zip(dst, ref))
        wrong += bad
        print(f"  {name:9s} {t / n * 1e6:8.1f} us a tensor, {floor / t:.3f} of the copies' "
              f"time, {n - bad} of {n} right")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
