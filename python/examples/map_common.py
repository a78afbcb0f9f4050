"""map_common.py - what the rt.map examples (map_matmul.py, map_fft.py, map_model.py) share:
the command line, the careful PyTorch pipeline each is compared with, the run of both
sides, and the check of their outputs.

The PyTorch pipeline is the one seed_torch.py compares graphrun with, for any function:
copies in on one stream, the function on a second, copies out on a third, two device
buffers in turn, ordered by events, so that tensor i + 1's copy in overlaps tensor i's
function and tensor i - 1's copy out. The function is the very one graphrun runs
(rt.map), so both sides run the same kernels on the same shapes; where the device's
libraries give the same bits for the same call (cuBLAS and cuFFT without split
reductions, PyTorch on the CPU), the outputs agree bit for bit, and they must agree
within the example's tolerance in any case. A NumPy float64 reference checks the first
rows of the first tensor of both.
"""
import argparse
import sys
import time

import numpy as np

import graphrun


def parser(doc, count, shape):
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--count", type=int, default=count, help=f"tensors ({count})")
    ap.add_argument("--rows", type=int, default=shape[0], help=f"rows a tensor ({shape[0]})")
    ap.add_argument("--budget", default="4GiB", help="graphrun's device memory (4GiB)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backend", default="auto", help="graphrun's backend: auto, cuda, host")
    ap.add_argument("--torch-device", default="cuda",
                    help="where PyTorch computes: cuda (the pipeline) or cpu")
    ap.add_argument("--pinned", action="store_true",
                    help="both sides' tensors in pinned memory")
    ap.add_argument("--seed", type=int, default=0)
    return ap


def inputs(torch, a, shape):
    """(graphrun's inputs, PyTorch's copies of them), from one generator."""
    gen = torch.Generator().manual_seed(a.seed)
    ours = [torch.randn(shape, generator=gen) for _ in range(a.count)]
    if a.pinned:
        ours = [graphrun.pinned(t) for t in ours]
    pin = a.pinned and a.torch_device == "cuda"  # pinning needs a GPU in PyTorch
    theirs = [t.pin_memory() if pin else t.clone() for t in ours]
    return ours, theirs


def empty_like(torch, xs, shape, pinned):
    if pinned:
        return [graphrun.pinned_empty(shape, torch.float32) for _ in xs]
    return [torch.empty(shape) for _ in xs]


def torch_pipeline(torch, fn, xs, outs, consts, device):
    """The careful PyTorch pipeline (the module's doc): fn(x, **consts) for every x, its
    result copied into outs."""
    h2d, comp, d2h = (torch.cuda.Stream(device) for _ in range(3))
    bufs = [torch.empty(xs[0].shape, device=device) for _ in range(2)]
    loaded = [torch.cuda.Event() for _ in range(2)]
    computed = [torch.cuda.Event() for _ in range(2)]
    stored = [None, None]
    results = [None, None]
    for i, (x, out) in enumerate(zip(xs, outs)):
        s = i % 2
        if stored[s] is not None:
            h2d.wait_event(stored[s])  # the buffer's last result is out
        with torch.cuda.stream(h2d):
            bufs[s].copy_(x, non_blocking=True)
            loaded[s].record(h2d)
        comp.wait_event(loaded[s])
        with torch.cuda.stream(comp), torch.no_grad():
            r = fn(bufs[s], **consts)
            computed[s].record(comp)
        d2h.wait_event(computed[s])
        with torch.cuda.stream(d2h):
            if r.data_ptr() != bufs[s].data_ptr():
                r.record_stream(d2h)  # made on comp, read here: not reused before
            out.copy_(r, non_blocking=True)
            stored[s] = torch.cuda.Event()
            stored[s].record(d2h)
        results[s] = r
    torch.cuda.synchronize(device)


def torch_cpu(torch, fn, xs, outs, consts):
    with torch.no_grad():
        for x, out in zip(xs, outs):
            out.copy_(fn(x.clone(), **consts))  # fn may work in place: x stays as it was


def run(torch, a, what, fn, ours, theirs, out_shape, consts, map_kw, reference, check_rows,
        tol):
    """Both sides, their times and device memory printed, their outputs compared with each
    other and their first `check_rows` rows of tensor 0 with `reference` (NumPy float64).
    Returns the exit status: 0 only when everything agrees within `tol` (the largest
    difference relative to the largest magnitude of the reference)."""
    if a.torch_device == "cuda" and not torch.cuda.is_available():
        sys.exit(f"{what}: PyTorch sees no GPU; --torch-device cpu runs its side on the CPU")
    want0 = reference(ours[0][:check_rows].double().numpy(),
                      {k: v.double().numpy() for k, v in consts.items()})
    ys = empty_like(torch, ours, out_shape, a.pinned)
    with graphrun.Runtime(budget=a.budget, workers=a.workers, backend=a.backend) as rt:
        info = rt.info()
        before = rt.stats()["devices"]
        t0 = time.perf_counter()
        job = rt.submit_map(fn, ours, constants=consts, out=ys, **map_kw)
        job.result()
        t_gr = time.perf_counter() - t0
        after = rt.stats()["devices"]
        peak = max(d["budget_peak"] for d in after)
        copied = sum(d["constants_copied"] for d in after) - \
            sum(d["constants_copied"] for d in before)
        fn_mem = max(job.fn_memory.values()) if job.fn_memory else None
    gb = sum(x.numel() * 4 for x in ours) / 1e9
    print(f"graphrun ({info.backend}, budget {info.budget_bytes / 2**20:.0f} MiB, "
          f"{a.workers} workers): {t_gr:.3f} s for {a.count} tensors ({gb:.2f} GB in), "
          f"{t_gr / a.count * 1e3:.2f} ms a tensor; budget held at most "
          f"{peak / 2**20:.0f} MiB" + (f", fn's own (PyTorch) at most {fn_mem / 2**20:.0f} "
                                       "MiB" if fn_mem is not None else "")
          + (f"; constants copied in {copied} time(s)" if consts else ""))

    zs = empty_like(torch, theirs, out_shape, a.pinned and a.torch_device == "cuda")
    if a.torch_device == "cuda":
        dev = torch.device("cuda")
        dconsts = {k: v.to(dev) for k, v in consts.items()}
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
        t0 = time.perf_counter()
        torch_pipeline(torch, fn, theirs, zs, dconsts, dev)
        t_pt = time.perf_counter() - t0
        held = torch.cuda.max_memory_allocated(dev) - base
        where = "CUDA, 3 streams + events"
    else:
        t0 = time.perf_counter()
        torch_cpu(torch, fn, theirs, zs, consts)
        t_pt = time.perf_counter() - t0
        held = 0
        where = "CPU"
    print(f"PyTorch ({where}): {t_pt:.3f} s, {t_pt / a.count * 1e3:.2f} ms a tensor; "
          f"device memory held at most {held / 2**20:.0f} MiB (the weights aside)")
    print(f"graphrun / PyTorch time: {t_gr / t_pt:.3f}")

    equal = within = 0
    worst = 0.0
    for i, (y, z) in enumerate(zip(ys, zs)):
        yn, zn = y.numpy(), z.numpy()
        if np.array_equal(yn.view(np.uint32), zn.view(np.uint32)):
            equal += 1
        scale = max(float(np.abs(zn).max()), 1e-30)
        rel = float(np.abs(yn.astype(np.float64) - zn).max()) / scale
        worst = max(worst, rel)
        if rel <= tol:
            within += 1
        else:
            print(f"tensor {i}: graphrun and PyTorch differ by {rel:.3g} of its largest "
                  f"magnitude (tolerance {tol:g})")
    scale = max(float(np.abs(want0).max()), 1e-30)
    ref = [float(np.abs(o[0][:check_rows].numpy() - want0).max()) / scale for o in (ys, zs)]
    ref_ok = max(ref) <= tol
    print(f"outputs: {within} of {a.count} tensors within {tol:g} between graphrun and "
          f"PyTorch ({equal} bit for bit, worst {worst:.3g}); tensor 0's first "
          f"{check_rows} rows {'within' if ref_ok else 'NOT within'} {tol:g} of NumPy's "
          f"float64 reference (graphrun {ref[0]:.3g}, PyTorch {ref[1]:.3g})")
    return 0 if within == a.count and ref_ok else 1
