"""Host arrays as the runtime sees them: a pointer, a byte count, an element type, a shape.

The general path of a job's arrays (_plan.py takes plain NumPy arrays and CPU tensors of
the port's type by a faster one): an array becomes a `Buf` here, without a copy: NumPy
arrays (ml_dtypes' bfloat16 among them) directly, PyTorch CPU tensors through their data
pointer (which also covers torch.bfloat16, which NumPy cannot hold), anything else through
__array_interface__, DLPack or the buffer protocol, each read as a NumPy view whose data
pointer is checked to be the object's own. A Buf keeps the objects it was made from, so
that a job holding its Bufs holds the memory the runtime reads and writes.
"""
import numpy as np

# gr_dtype values, names, and NumPy's spelling (bfloat16: ml_dtypes', when installed).
DTYPES = ["float32", "float16", "bfloat16", "float64", "int32", "uint8"]
CODE = {name: i for i, name in enumerate(DTYPES)}
SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "uint8": 1}

try:
    import ml_dtypes as _ml_dtypes
except ImportError:  # bfloat16 then comes as torch.bfloat16 or reinterpret(..)
    _ml_dtypes = None


def numpy_dtype(name):
    """The NumPy dtype that holds elements of graphrun type `name`: ml_dtypes.bfloat16 for
    bfloat16 when ml_dtypes is installed, else uint16 (the bit patterns)."""
    if name == "bfloat16":
        return np.dtype(_ml_dtypes.bfloat16) if _ml_dtypes is not None else np.dtype(np.uint16)
    return np.dtype(name)


def _torch():
    import sys
    return sys.modules.get("torch")


def dtype_name(dtype):
    """graphrun's name for `dtype` (a name, a NumPy dtype or type, a torch.dtype), or
    raises ValueError naming it."""
    if isinstance(dtype, str) and dtype in CODE:
        return dtype
    t = _torch()
    if t is not None and isinstance(dtype, t.dtype):
        name = str(dtype).replace("torch.", "")
        if name in CODE:
            return name
        raise ValueError(f"graphrun has no element type for {dtype}")
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"not an element type: {dtype!r}") from None
    return numpy_name(d, strict=True)


_NAMES = {}  # dtype -> graphrun name or None: dtype.name is slow, and jobs have many


def numpy_name(d, strict=False):
    """graphrun's name for NumPy dtype `d`, or None (ValueError with strict) when none:
    only native (or single-byte) byte order."""
    try:
        name = _NAMES[d]
    except KeyError:
        name = None
        if d.name == "bfloat16" and d.itemsize == 2:
            name = "bfloat16"
        elif d.isnative and d.name in CODE:
            name = d.name
        _NAMES[d] = name
    if name is not None:
        return name
    if strict:
        raise ValueError(f"graphrun has no element type for NumPy's {describe_np(d)}")
    return None


def describe_np(d):
    return d.name if d.isnative else d.str


class Reinterpreted:
    """reinterpret(array, dtype): the array's bytes read as elements of another type of the
    same size (bfloat16 bit patterns in a uint16 array, without ml_dtypes)."""

    def __init__(self, array, dtype):
        self.array = array
        self.dtype = dtype_name(dtype)


def reinterpret(array, dtype):
    """Marks `array` (any array graphrun takes) as holding elements of `dtype`, a graphrun
    type whose size is the array's item size: `reinterpret(bits_uint16, "bfloat16")`. Nothing
    is copied or converted."""
    return Reinterpreted(array, dtype)


class Buf:
    """One host array: ptr, nbytes, dtype (graphrun's name; None when it has none), shape,
    contiguous, writable, and `keep`, the objects that own the memory."""

    __slots__ = ("ptr", "nbytes", "dtype", "known", "shape", "contiguous", "writable",
                 "keep", "what", "size", "copy_back", "owner", "array")

    def __init__(self, ptr, nbytes, dtype, known, shape, contiguous, writable, keep, what,
                 owner):
        self.ptr, self.nbytes, self.dtype, self.shape = ptr, nbytes, dtype, tuple(shape)
        self.known = known  # dtype is one of graphrun's (else it is NumPy's or torch's name)
        self.contiguous, self.writable, self.keep, self.what = contiguous, writable, keep, what
        self.size = 1
        for d in self.shape:
            self.size *= int(d)
        self.copy_back = None  # the user's array, when this Buf is a copy of it
        self.owner = owner     # the object the user passed
        self.array = keep if not isinstance(keep, tuple) else keep[1]  # ndarray or tensor


def _from_numpy(a, what, owner, keep):
    name = numpy_name(a.dtype)
    desc = name if name is not None else describe_np(a.dtype)
    return Buf(a.ctypes.data if a.size else 0, a.nbytes, name or desc, name is not None,
               a.shape, a.flags.c_contiguous, a.flags.writeable, keep, what, owner)


def _from_torch(t, torch, what, owner):
    if t.device.type != "cpu":
        raise _Refusal(f"is on {t.device}: graphrun takes host (CPU) tensors and copies "
                       "them to the device itself")
    if t.layout != torch.strided:
        raise _Refusal(f"has layout {t.layout}: only dense (strided) tensors")
    name = str(t.dtype).replace("torch.", "")
    ok = name in CODE
    return Buf(t.data_ptr() if t.numel() else 0, t.numel() * t.element_size(),
               name if ok else str(t.dtype), ok, tuple(t.shape), t.is_contiguous(), True, t,
               what, owner)


class _Refusal(Exception):
    pass


def as_buf(obj, what):
    """A Buf for `obj`, or raises _Refusal with the reason (without the `what` prefix)."""
    owner = obj
    forced = None
    if isinstance(obj, Reinterpreted):
        forced, obj = obj.dtype, obj.array
        owner = obj
    torch = _torch()
    if isinstance(obj, np.ndarray):
        b = _from_numpy(obj, what, owner, obj)
    elif torch is not None and isinstance(obj, torch.Tensor):
        b = _from_torch(obj, torch, what, owner)
    else:
        a = _view(obj)
        b = _from_numpy(a, what, owner, (obj, a))
    if forced is not None:
        itemsize = b.nbytes // b.size if b.size else None
        if itemsize is not None and itemsize != SIZE[forced]:
            raise _Refusal(f"holds {itemsize}-byte elements ({b.dtype}), which cannot be "
                           f"read as {forced} ({SIZE[forced]} bytes)")
        b.dtype, b.known = forced, True
    return b


def _view(obj):
    """A NumPy view of an object that is not an ndarray or a torch tensor, without a copy."""
    if isinstance(obj, (list, tuple, int, float, complex, str, np.generic)):
        raise _Refusal(f"is a {type(obj).__name__}, not an array: pass a NumPy array "
                       "(numpy.asarray(x, dtype=...)) or a tensor")
    if hasattr(obj, "__array_interface__"):
        a = np.asarray(obj)
        want = obj.__array_interface__.get("data")
        if want is not None and isinstance(want, tuple) and a.size and \
                a.ctypes.data != want[0]:
            raise _Refusal("could only be read by copying it (its __array_interface__ "
                           "is not one NumPy can view)")
        return a
    if hasattr(obj, "__dlpack__"):
        try:
            return np.from_dlpack(obj)
        except (TypeError, RuntimeError, BufferError, ValueError) as e:
            raise _Refusal(f"cannot be read through DLPack by NumPy: {e}") from None
    try:
        m = memoryview(obj)
    except TypeError:
        raise _Refusal(f"is a {type(obj).__name__}: graphrun takes NumPy arrays, PyTorch "
                       "CPU tensors, and objects with __array_interface__, __dlpack__ or "
                       "the buffer protocol") from None
    return np.asarray(m)


def contiguous_copy(b):
    """A Buf over a C-contiguous copy of `b`'s array (copy=True); the copy is written back
    into the original on completion when it is an output."""
    a = b.array
    torch = _torch()
    if torch is not None and isinstance(a, torch.Tensor):
        c = a.contiguous()  # a copy: only non-contiguous arrays come here
        n = _from_torch(c, torch, b.what, b.owner)
    else:
        c = np.ascontiguousarray(a)
        n = _from_numpy(c, b.what, b.owner, c)
    n.dtype, n.known = b.dtype, b.known
    n.copy_back = a
    return n


def write_back(b):
    """Copies a contiguous_copy's data back into the user's array."""
    torch = _torch()
    if torch is not None and isinstance(b.copy_back, torch.Tensor):
        b.copy_back.copy_(b.array)
    else:
        np.copyto(b.copy_back, b.array, casting="no")
