#!/usr/bin/env python3
"""map_matmul.py - y = x @ W for a stream of tensors with rt.map, W a constant, beside the
careful PyTorch pipeline doing the same.

Every x is a (rows, dim) float32 tensor (25,600 x 4,096: 400 MB) and W a (dim, dim)
weight (64 MiB). graphrun runs the function below on its workers, x a view of graphrun's
device buffer for whole rows of a tensor, W a view of the job's constant: copied
to each device once per job and counted in the budget once (the statistics' constants
copied, printed), however many tensors cross. Each row of y needs only its own row of x,
so the job says rows=True: graphrun may give fn any run of whole rows, and cuts each tensor
into chunks whose copies overlap the multiplication (--whole: one call per tensor). The
function multiplies in blocks of rows, in place: x is also the output buffer (same type and
size), so its own memory (PyTorch's, outside graphrun's budget) is one block's product, and
nothing is copied after it.

    python/examples/map_matmul.py                                  # 16 x 400 MB, on a GPU
    python/examples/map_matmul.py --count 4 --rows 2048 --dim 512  # small
    python/examples/map_matmul.py --backend host --torch-device cpu --count 3 --rows 64 \
        --dim 32

Prints both sides' times and device memory, and checks their outputs against each other
and against NumPy (float64) on the first rows; exit status 0 only when all agree.
"""
import sys

import map_common


def matmul_fn(row_block):
    """y = x @ W, written over x a block of rows at a time (each row of y needs only its
    own row of x), so fn holds one block's product, not a whole second tensor."""
    def fn(x, W):
        rows = x.shape[0]
        if row_block <= 0 or row_block >= rows:
            return x @ W
        for i in range(0, rows, row_block):
            x[i:i + row_block] = x[i:i + row_block] @ W
        return x
    return fn


def main():
    ap = map_common.parser(__doc__, 16, (25600,))
    ap.add_argument("--dim", type=int, default=4096, help="columns of x, W is dim x dim")
    ap.add_argument("--row-block", type=int, default=4096,
                    help="rows multiplied at once inside fn (0: all it is given)")
    ap.add_argument("--whole", action="store_true",
                    help="give fn whole tensors (rows=False), not runs of rows")
    a = ap.parse_args()
    import torch
    ours, theirs = map_common.inputs(torch, a, (a.rows, a.dim))
    gen = torch.Generator().manual_seed(a.seed + 1)
    W = torch.randn(a.dim, a.dim, generator=gen) / a.dim ** 0.5
    if a.pinned:
        W = W.pin_memory() if a.torch_device == "cuda" else W
    return map_common.run(
        torch, a, "map_matmul.py", matmul_fn(a.row_block), ours, theirs, (a.rows, a.dim),
        {"W": W}, {"rows": not a.whole}, lambda x, c: x @ c["W"], min(a.rows, 64), 1e-4)


if __name__ == "__main__":
    sys.exit(main())
