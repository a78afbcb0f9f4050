"""What the tests share: references computed with NumPy itself, and arrays of either kind."""
import os

import numpy as np

try:
    import torch
except ImportError:
    torch = None

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
EXAMPLES = os.path.join(REPO, "graph", "examples")


def example(name):
    return os.path.join(EXAMPLES, name)


def seed_ref(x):
    """Ten rounds of x = sqrt(x * 1.01 + 1.01), each operation rounded to float32."""
    x = np.array(x, dtype=np.float32)
    for _ in range(10):
        x = np.sqrt(x * np.float32(1.01) + np.float32(1.01))
    return x


def rand(n, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).random(n).astype(dtype)


def make(kind, a):
    """A copy of NumPy array `a` as an array of `kind` ("numpy" or "torch")."""
    a = np.array(a)
    if kind == "numpy":
        return a
    return torch.from_numpy(a.copy())


def to_np(x):
    """NumPy's view of an array of either kind (bfloat16 tensors as uint16 bit patterns)."""
    if torch is not None and isinstance(x, torch.Tensor):
        if x.dtype == torch.bfloat16:
            return x.view(torch.int16).numpy().view(np.uint16)
        return x.numpy()
    return np.asarray(x)


def same_bits(a, b):
    a, b = to_np(a), to_np(b)
    if a.shape != b.shape or a.dtype.itemsize != b.dtype.itemsize:
        return False
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return np.array_equal(a.view(u), b.view(u))


def is_kind(kind, x):
    if kind == "numpy":
        return isinstance(x, np.ndarray)
    return isinstance(x, torch.Tensor)


def data_ptr(x):
    if torch is not None and isinstance(x, torch.Tensor):
        return x.data_ptr()
    return np.asarray(x).ctypes.data
