#!/usr/bin/env python3
"""map_model.py - a small torch.nn model applied to every tensor of a stream with rt.map,
beside the careful PyTorch pipeline doing the same.

The model is an MLP of width 1,024 (Linear 1024 -> 4096, GELU, Linear 4096 -> 1024: 32 MiB
of float32 weights); every x is a (rows, 1024) float32 tensor (102,400 rows: 400 MB) and
its output the model's output, the same type and size, so graphrun's output buffer is
x's own and the function writes over it a block of rows at a time. Each sample (row) goes
through the model alone, so the job says rows=True: graphrun may give fn any run of whole
rows and cuts each tensor into chunks whose copies overlap the model (--whole: one call per
tensor).

The function closes over the module. What that means: the weights are PyTorch's memory,
placed by the program (model.to(device)) on each device the runtime uses, before the job,
and outside graphrun's budget, as is what the model allocates while it runs (a block's
hidden activations: job.fn_memory, printed). With several GPUs the function picks the
copy on its tensor's device (the views are on the worker's device). To have the weights
counted in the budget and copied in with the job instead, pass them as constants and
call torch.func.functional_call(model, constants, x).

    python/examples/map_model.py                                    # 16 x 400 MB, on a GPU
    python/examples/map_model.py --count 4 --rows 4096              # small
    python/examples/map_model.py --backend host --torch-device cpu --count 3 --rows 64 \
        --width 32

Prints both sides' times and device memory, and checks their outputs against each other
and against NumPy (float64) on the first rows; exit status 0 only when all agree.
"""
import copy
import sys

import numpy as np

import graphrun
import map_common


def model_fn(models, row_block):
    """The model over x, written over x a block of rows at a time: fn holds one block's
    activations, not a whole tensor's."""
    def fn(x):
        model = models[x.device]
        rows = x.shape[0]
        for i in range(0, rows, row_block):
            x[i:i + row_block] = model(x[i:i + row_block])
        return x
    return fn


def reference(model):
    w1, b1 = (p.detach().double().cpu().numpy() for p in (model[0].weight, model[0].bias))
    w2, b2 = (p.detach().double().cpu().numpy() for p in (model[2].weight, model[2].bias))

    def ref(x, c):
        import math
        h = x @ w1.T + b1
        h = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))  # GELU, exact
        return h @ w2.T + b2
    return ref


def main():
    ap = map_common.parser(__doc__, 16, (102400,))
    ap.add_argument("--width", type=int, default=1024, help="the model's width (1024)")
    ap.add_argument("--row-block", type=int, default=8192,
                    help="rows through the model at once inside fn")
    ap.add_argument("--whole", action="store_true",
                    help="give fn whole tensors (rows=False), not runs of rows")
    a = ap.parse_args()
    import torch
    torch.manual_seed(a.seed + 1)
    model = torch.nn.Sequential(torch.nn.Linear(a.width, 4 * a.width), torch.nn.GELU(),
                                torch.nn.Linear(4 * a.width, a.width)).eval()
    # One copy of the weights on each device fn may run on (the runtime's), and one where
    # the PyTorch pipeline runs.
    if graphrun.probe(a.backend).backend == "cuda":
        with graphrun.Runtime(budget="64MiB", backend="cuda") as rt:
            devices = [torch.device("cuda", d) for d in rt.info().devices]
    else:
        devices = [torch.device("cpu")]
    if a.torch_device == "cuda":
        devices.append(torch.device("cuda", torch.cuda.current_device()))
    else:
        devices.append(torch.device("cpu"))
    models = {d: copy.deepcopy(model).to(d) for d in set(devices)}
    fn = model_fn(models, a.row_block)
    ours, theirs = map_common.inputs(torch, a, (a.rows, a.width))
    return map_common.run(torch, a, "map_model.py", fn, ours, theirs, (a.rows, a.width),
                          {}, {"rows": not a.whole}, reference(model), min(a.rows, 64),
                          1e-4)


if __name__ == "__main__":
    sys.exit(main())
