"""Pinned host memory as NumPy arrays (and PyTorch tensors over them).

gr_host_alloc gives page-locked memory that the device copies at the link's speed (plain
page-aligned memory on a machine without a GPU). The array is a view of a small owner
object that frees the block (gr_host_free) when it is itself freed: NumPy keeps the owner
as the array's base, every view keeps its base, and torch.from_numpy keeps the array, so
the memory is freed exactly when the last array or tensor over it is gone, never while one
remains. Once the interpreter is exiting (the atexit hooks have closed every runtime) nothing
more is freed: the process's end frees it, and no call goes into the library while the
interpreter tears down.

The owner frees in __del__ rather than through weakref.finalize, and the array is made in
one step from the owner's __array_interface__ (shape and type included): jobs may allocate
an output per tensor, and each of the two saves about a microsecond of each.
"""
import atexit
import ctypes
import threading

import numpy as np

from . import _arrays
from ._lib import lib

_lock = threading.Lock()
live = {"blocks": 0, "bytes": 0}  # what gr_host_alloc gave and gr_host_free has not taken
_state = {"exiting": False}


@atexit.register
def _exiting():
    _state["exiting"] = True


class _HostBlock:
    """Owns one gr_host_alloc block; NumPy reads it through __array_interface__."""

    __slots__ = ("ptr", "nbytes", "__array_interface__", "__weakref__")

    def __init__(self, nbytes, shape, typestr):
        self.ptr = None
        p = ctypes.c_void_p()
        st = lib.gr_host_alloc(max(nbytes, 1), ctypes.byref(p))
        if st != 0:
            from . import _raise
            _raise(st, message=f"gr_host_alloc({nbytes}) failed")
        self.ptr, self.nbytes = p.value, nbytes
        with _lock:
            live["blocks"] += 1
            live["bytes"] += nbytes
        self.__array_interface__ = {"shape": shape, "typestr": typestr,
                                    "data": (p.value, False), "version": 3}

    def __del__(self, _free=lib.gr_host_free, _lock=_lock, _live=live, _state=_state):
        # Default arguments: the names stay reachable while the interpreter shuts down.
        if self.ptr is None or _state["exiting"]:
            return
        _free(self.ptr)
        with _lock:
            _live["blocks"] -= 1
            _live["bytes"] -= self.nbytes


# A NumPy type string per graphrun type for the array made from the block: the type
# itself, or (bfloat16) integers of its size, viewed as the type afterwards.
_TYPESTR = {name: np.dtype("uint16" if name == "bfloat16" else name).str
            for name in _arrays.DTYPES}


def new(shape, name, as_torch=None):
    """An uninitialized pinned array of graphrun type `name` and `shape` (a tuple of ints):
    a NumPy array, or with `as_torch` (the torch module) a tensor over the memory."""
    n = 1
    for d in shape:
        n *= d
    a = np.asarray(_HostBlock(n * _arrays.SIZE[name], shape, _TYPESTR[name]))
    if as_torch is not None:
        if name == "bfloat16":
            return as_torch.from_numpy(a.view(np.int16)).view(as_torch.bfloat16)
        return as_torch.from_numpy(a)
    if name == "bfloat16":
        return a.view(_arrays.numpy_dtype(name))
    return a


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
    torch = _arrays._torch()
    as_torch = torch if torch is not None and isinstance(dtype, torch.dtype) else None
    return new(shape, name, as_torch)


def is_pinned(obj):
    """Whether `obj` (an ndarray or a torch tensor) is over memory the package knows to be
    pinned: a pinned_empty block (through any views), or a tensor PyTorch says is pinned."""
    b = obj
    while isinstance(b, np.ndarray):
        if b.base is None:
            return False
        b = b.base
    if type(b) is _HostBlock:
        return True
    torch = _arrays._torch()
    if torch is not None and isinstance(b, torch.Tensor):
        return bool(b.is_pinned())
    return False


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
