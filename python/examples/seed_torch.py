#!/usr/bin/env python3
"""seed_torch.py - the seed question's loop with graphrun, beside the PyTorch pipeline it
replaces.

The question: ten CPU tensors of 100,000,000 float32 (torch.rand), each processed a hundred
times on the GPU by ten rounds of x = sqrt(x * 1.01 + 1.01), streamed through the device
with hand-written CUDA streams, which ran out of device memory. Here the same loop twice,
from the same inputs:

  graphrun  each pass is one call, rt.run(graphrun.seed(), tensors, inplace=True): the
            tensors are read and written in place (as the question's loop does), with
            copies and kernels of different tensors overlapped, under a device-memory
            budget (--budget);
  PyTorch   a correct version of the question's pipeline: copies in on one stream, the
            kernels on another, copies out on a third, two device buffers in turn, events
            between them (what the question's code tried to do).

Every operation is rounded to float32 on both sides (PyTorch's eager mul_, add_ and sqrt_
are separate kernels, so nothing is fused into an FMA), so the outputs must agree bit for
bit; they are also checked against NumPy on the first million elements of tensor 0. Prints
both times and the device memory each held. Exit status 0 only when everything agrees.

    python/examples/seed_torch.py                         # the question's sizes (8 GB of RAM)
    python/examples/seed_torch.py --elems 1000000 --iterations 3     # small
"""
import argparse
import sys
import time

import numpy as np

import graphrun


def seed_numpy(x, passes):
    x = np.array(x, dtype=np.float32)
    for _ in range(passes):
        for _ in range(10):
            x = np.sqrt(x * np.float32(1.01) + np.float32(1.01))
    return x


def torch_pipeline(torch, tensors, iterations, device):
    """The question's loop in PyTorch, done right: H2D, compute and D2H on three streams,
    two device buffers in turn, ordered by events; in place in the host tensors."""
    n = tensors[0].numel()
    h2d, comp, d2h = (torch.cuda.Stream(device) for _ in range(3))
    bufs = [torch.empty(n, device=device) for _ in range(2)]
    loaded = [torch.cuda.Event() for _ in range(2)]
    computed = [torch.cuda.Event() for _ in range(2)]
    stored = [None, None]
    step = 0
    for _ in range(iterations):
        for t in tensors:
            s = step % 2
            step += 1
            if stored[s] is not None:
                h2d.wait_event(stored[s])  # the buffer's last tensor is out
            with torch.cuda.stream(h2d):
                bufs[s].copy_(t, non_blocking=True)
                loaded[s].record(h2d)
            comp.wait_event(loaded[s])
            with torch.cuda.stream(comp):
                for _ in range(10):
                    bufs[s].mul_(1.01).add_(1.01).sqrt_()
                computed[s].record(comp)
            d2h.wait_event(computed[s])
            with torch.cuda.stream(d2h):
                t.copy_(bufs[s], non_blocking=True)
                stored[s] = torch.cuda.Event()
                stored[s].record(d2h)
        # The next pass reads what this one wrote: its copies out must be done.
        torch.cuda.synchronize(device)


def torch_cpu(torch, tensors, iterations):
    for _ in range(iterations):
        for t in tensors:
            for _ in range(10):
                t.mul_(1.01).add_(1.01).sqrt_()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=10, help="tensors (10)")
    ap.add_argument("--elems", type=int, default=100_000_000, help="float32 per tensor")
    ap.add_argument("--iterations", type=int, default=100, help="passes over the tensors")
    ap.add_argument("--budget", default="2GiB", help="graphrun's device memory (2GiB)")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--backend", default="auto", help="graphrun's backend: auto, cuda, host")
    ap.add_argument("--torch-device", default="cuda",
                    help="where PyTorch computes: cuda (the pipeline) or cpu")
    ap.add_argument("--pinned", action="store_true",
                    help="both sides' tensors in pinned memory (the question's are not)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    import torch
    if a.torch_device == "cuda" and not torch.cuda.is_available():
        sys.exit("seed_torch.py: PyTorch sees no GPU; --torch-device cpu runs its side on "
                 "the CPU")
    gen = torch.Generator().manual_seed(a.seed)
    ours = [torch.rand(a.elems, generator=gen) for _ in range(a.count)]
    if a.pinned:
        ours = [graphrun.pinned(t) for t in ours]
    pin = a.pinned and a.torch_device == "cuda"  # pinning needs a GPU in PyTorch
    theirs = [t.pin_memory() if pin else t.clone() for t in ours]
    check_n = min(a.elems, 1_000_000)
    want0 = seed_numpy(ours[0][:check_n].numpy(), a.iterations)
    gb = a.count * a.elems * 4 / 1e9

    with graphrun.Runtime(budget=a.budget, workers=a.workers, backend=a.backend) as rt:
        info = rt.info()
        g = graphrun.seed()
        t0 = time.perf_counter()
        for _ in range(a.iterations):
            rt.run(g, ours, inplace=True)
        t_gr = time.perf_counter() - t0
        peak = max(d["budget_peak"] for d in rt.stats()["devices"])
    print(f"graphrun ({info.backend}, budget {info.budget_bytes / 2**20:.0f} MiB, "
          f"{a.workers} workers): {t_gr:.3f} s for {a.iterations} passes over {a.count} "
          f"tensors of {a.elems} float32 ({gb:.2f} GB a pass), "
          f"{t_gr / (a.iterations * a.count) * 1e3:.2f} ms a tensor; device memory held at "
          f"most {peak / 2**20:.0f} MiB")

    if a.torch_device == "cuda":
        dev = torch.device("cuda")
        torch.cuda.reset_peak_memory_stats(dev)
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        torch_pipeline(torch, theirs, a.iterations, dev)
        t_pt = time.perf_counter() - t0
        held = torch.cuda.max_memory_allocated(dev)
        where = "CUDA, 3 streams + events"
    else:
        t0 = time.perf_counter()
        torch_cpu(torch, theirs, a.iterations)
        t_pt = time.perf_counter() - t0
        held = 0
        where = "CPU"
    print(f"PyTorch ({where}): {t_pt:.3f} s, "
          f"{t_pt / (a.iterations * a.count) * 1e3:.2f} ms a tensor; device memory held at "
          f"most {held / 2**20:.0f} MiB")
    print(f"graphrun / PyTorch time: {t_gr / t_pt:.3f}")

    wrong = 0
    for i, (x, y) in enumerate(zip(ours, theirs)):
        if not torch.equal(x.view(torch.int32), y.view(torch.int32)):
            bad = (x.view(torch.int32) != y.view(torch.int32)).nonzero()
            j = int(bad[0])
            print(f"tensor {i}: {bad.numel()} elements differ, the first at {j}: graphrun "
                  f"{x[j].item()!r}, PyTorch {y[j].item()!r}")
            wrong += 1
    ref_ok = np.array_equal(ours[0][:check_n].numpy().view(np.uint32), want0.view(np.uint32))
    print(f"outputs: {a.count - wrong} of {a.count} tensors bit for bit equal between "
          f"graphrun and PyTorch; tensor 0's first {check_n} elements "
          f"{'equal' if ref_ok else 'DIFFER from'} NumPy's float32 reference")
    return 0 if wrong == 0 and ref_ok else 1


if __name__ == "__main__":
    sys.exit(main())
