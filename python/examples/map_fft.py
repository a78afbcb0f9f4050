#!/usr/bin/env python3
"""map_fft.py - |rfft(x)| along the last dimension for a stream of tensors with rt.map,
beside the careful PyTorch pipeline doing the same.

Every x is a (rows, length) float32 tensor (25,600 x 4,096: 400 MB); its output is
(rows, length // 2 + 1) float32, the same size for every tensor: graphrun's output buffer
is then of a fixed size (out_shape says it; an output must be the tensor's size or one
fixed size). The function allocates its result and the complex spectrum (PyTorch's
memory, outside graphrun's budget: job.fn_memory, printed), and graphrun copies the
result into its output buffer.

    python/examples/map_fft.py                                       # 16 x 400 MB, on a GPU
    python/examples/map_fft.py --count 4 --rows 1024 --length 1024   # small
    python/examples/map_fft.py --backend host --torch-device cpu --count 3 --rows 16 \
        --length 64

Prints both sides' times and device memory, and checks their outputs against each other
and against NumPy (float64) on the first rows; exit status 0 only when all agree.
"""
import sys

import numpy as np

import map_common


def magnitude(x):
    import torch
    return torch.fft.rfft(x).abs()


def main():
    ap = map_common.parser(__doc__, 16, (25600,))
    ap.add_argument("--length", type=int, default=4096, help="columns of x (4096)")
    a = ap.parse_args()
    import torch
    ours, theirs = map_common.inputs(torch, a, (a.rows, a.length))
    half = a.length // 2 + 1
    return map_common.run(
        torch, a, "map_fft.py", magnitude, ours, theirs, (a.rows, half), {},
        {"out_shape": lambda s: tuple(s[:-1]) + (s[-1] // 2 + 1,)},
        lambda x, c: np.abs(np.fft.rfft(x)), min(a.rows, 64), 1e-5)


if __name__ == "__main__":
    sys.exit(main())
