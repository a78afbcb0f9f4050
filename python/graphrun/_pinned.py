"""Pinned host memory as NumPy arrays (and PyTorch tensors over them).

gr_host_alloc gives page-locked memory that the device copies at the link's speed (plain
page-aligned memory on a machine without a GPU). The array is a view of a small owner
object whose finalizer calls gr_host_free: NumPy keeps the owner as the array's base, every
view keeps its base, and torch.from_numpy keeps the array, so the memory is freed exactly
when the last array or tensor over it is gone, never while one remains.
"""
import ctypes
import threading
import weakref

import numpy as np

from . import _arrays
from ._lib import lib

_lock = threading.Lock()
live = {"blocks": 0, "bytes": 0}  # what gr_host_alloc gave and gr_host_free has not taken


def _free(ptr, nbytes):
    lib.gr_host_free(ptr)
    with _lock:
        live["blocks"] -= 1
        live["bytes"] -= nbytes


class _HostBlock:
    """Owns one gr_host_alloc block; NumPy reads it through __array_interface__."""

    def __init__(self, nbytes):
        from . import _raise
        p = ctypes.c_void_p()
        st = lib.gr_host_alloc(max(nbytes, 1), ctypes.byref(p))
        if st != 0:
            _raise(st, message=f"gr_host_alloc({nbytes}) failed")
        self.ptr, self.nbytes = p.value, nbytes
        with _lock:
            live["blocks"] += 1
            live["bytes"] += nbytes
        # Not at exit: a job of a runtime still running then may be using the memory (the
        # runtimes are closed by an atexit hook that may run later); the process's end
        # frees it.
        weakref.finalize(self, _free, p.value, nbytes).atexit = False
        self.__array_interface__ = {"shape": (max(nbytes, 1),), "typestr": "|u1",
                                    "data": (p.value, False), "version": 3}


def pinned_empty(shape, dtype="float32"):
    """An uninitialized array of `shape` and `dtype` in pinned host memory.

    `dtype`: a graphrun type name, a NumPy dtype, or a torch.dtype; with a torch.dtype the
    result is a torch tensor over the memory (torch.bfloat16 too), otherwise a NumPy array
    (bfloat16 as ml_dtypes.bfloat16, or as uint16 bit patterns without ml_dtypes). Freed
    when the last array, view or tensor over it is freed."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    name = _arrays.dtype_name(dtype)
    n = 1
    for d in shape:
        n *= d
    nbytes = n * _arrays.SIZE[name]
    raw = np.asarray(_HostBlock(nbytes))[:nbytes]
    torch = _arrays._torch()
    if torch is not None and isinstance(dtype, torch.dtype):
        if name == "bfloat16":
            return torch.from_numpy(raw.view(np.int16).reshape(shape)).view(torch.bfloat16)
        return torch.from_numpy(raw.view(np.dtype(name)).reshape(shape))
    return raw.view(_arrays.numpy_dtype(name)).reshape(shape)


def pinned(array):
    """A copy of `array` (a NumPy array or a torch CPU tensor, C order) in pinned host
    memory: a NumPy array for a NumPy array, a tensor for a tensor."""
    torch = _arrays._torch()
    if torch is not None and isinstance(array, torch.Tensor):
        out = pinned_empty(tuple(array.shape), array.dtype)
        out.copy_(array)
        return out
    a = np.asarray(array)
    name = _arrays.numpy_name(a.dtype)
    if name is None:
        raise ValueError(f"graphrun has no element type for NumPy's "
                         f"{_arrays.describe_np(a.dtype)}")
    out = pinned_empty(a.shape, a.dtype)
    np.copyto(out, a, casting="no")
    return out
