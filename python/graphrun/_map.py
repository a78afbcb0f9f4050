"""Runtime.map: a Python function per tensor, run by graphrun's workers as a kernel.

How it is built on the C API. Each map job gets a graph of its own,

    h2d  in0.. -> the tensor's buffers          (one per input port)
    h2d  inK   -> gr.index, one float64: the tensor's index (whole-tensor mode only)
    kernel fn: py.map.N(inputs.., constants.., gr.index, KEY) -> the output buffer
    d2h  the output buffer -> out0

whose kernel `py.map.N` is one registered definition per signature (the element types of
the inputs, constants and output, whether the output is the tensor's size, the mode): its
CPU implementation (the host backend's) and its GR_CUDA_STREAM callback (the CUDA
backend's, called eagerly on the worker's thread with the iteration's stream) are the two
ctypes callbacks of this module, shared by every definition. What tells a call which
function to run is the node's one scalar, KEY, a float64 (exact for every integer below
2**53): the key of the job's `Call` in `_calls`. So a new function, a lambda per call
included, costs no registration: registering per function would add a registration
and an unregistration to every job, and the registry's lock to every submission. The registrations are
cached here for the process (`_kernels`), a handful per program.

Why the index travels as a tensor input: gr_kernel_args says neither the job nor the
tensor, and a failure must be reported against its index, with its Python traceback. On
the host backend the kernel reads it directly; on CUDA it is in device memory, and only a
failure reads it (one synchronous copy, on the failure path only). In elementwise mode a
call covers a chunk of a tensor or a batch of several, no index exists to send (and a
fixed buffer would stop the graph from being cut), so failures there are the job's.

Why the host backend needs the package's help: a CPU kernel (gr_kernel_cpu_fn) returns
nothing, so it cannot fail its iteration; the library counts the index as done and copies
the output buffer out. The package keeps the failure (Call.failures) and Job reports the
index as failed (status, progress, error, iteration); the callback puts the output's old
contents into the output buffer first, so that the copy out leaves a failed index's
output as it was, as the CUDA backend does. (The C change that would make this
unnecessary, a CPU implementation that returns a status, is described in
docs/PYTHON.md's Runtime.map section.)

Views. The function gets views of graphrun's own buffers for the tensor: zero copy, valid
only during the call. CUDA: torch tensors from torch.as_tensor over an object with
__cuda_array_interface__, run under torch.cuda.ExternalStream(the iteration's stream), so
that everything the function enqueues is ordered between the tensor's copy in and its
copy out. Host: CPU torch tensors or NumPy arrays over the host pointers.
"""
import ctypes
import itertools
import keyword
import logging
import threading
import traceback

import numpy as np

from . import _arrays
from . import _lib as _c
from ._lib import lib

log = logging.getLogger("graphrun")

# Names a graph spec reserves, so not usable as constant names (docs/GRAPH_SPEC.md).
_RESERVED = {"buffer", "h2d", "kernel", "d2h", "cuda", "param", "const", "nan", "inf",
             "infinity"}
_TYPESTR = {"float32": "<f4", "float16": "<f2", "bfloat16": "<i2", "float64": "<f8",
            "int32": "<i4", "uint8": "|u1"}
# NumPy types of the views torch tensors are made from on the host: bfloat16 as int16 bits,
# viewed as torch.bfloat16 (torch.from_numpy takes no ml_dtypes array).
_HOST_NP = {"float32": np.float32, "float16": np.float16, "bfloat16": np.int16,
            "float64": np.float64, "int32": np.int32, "uint8": np.uint8}

_tls = threading.local()


def in_fn():
    """True on a thread that is running a map function now (a runtime worker)."""
    return getattr(_tls, "depth", 0) > 0


# ---------------------------------------------------------------------------------------
# Kernel registrations: one per signature, for the life of the process.

_kernels = {}
_reg_lock = threading.Lock()
_names = itertools.count(1)


def _registered_names():
    out = set()
    for i in range(lib.gr_kernel_count()):
        k = _c.kernel_info_init()
        if lib.gr_kernel_info_get(i, ctypes.byref(k)) == 0:
            out.add(k.name.decode())
    return out


def kernel(in_dtypes, const_dtypes, indexed, out_dtype, out_one, elementwise):
    """The name of the map kernel of this signature, registered the first time it is asked
    for. Raises RuntimeError with the library's reason should it refuse."""
    sig = (tuple(in_dtypes), tuple(const_dtypes), bool(indexed), out_dtype, bool(out_one),
           bool(elementwise))
    with _reg_lock:
        name = _kernels.get(sig)
        if name is not None:
            return name
        types = list(in_dtypes) + list(const_dtypes) + (["float64"] if indexed else [])
        small = 0
        for k in range(len(in_dtypes), len(types)):
            small |= 1 << k
        taken = None
        while True:
            name = f"py.map.{next(_names)}"
            d = _c.KernelDef()
            d.struct_size = ctypes.sizeof(_c.KernelDef)
            d.magic = _c.GR_KERNEL_DEF_MAGIC
            d.name = name.encode()
            d.doc = b"graphrun.Runtime.map: a Python function per tensor"
            d.n_inputs = len(types)
            d.n_scalars = 1
            d.scalar_dtype[0] = _arrays.CODE["float64"]
            d.out_dtype = _arrays.CODE[out_dtype]
            for k, t in enumerate(types):
                d.in_dtype[k] = _arrays.CODE[t]
            d.elementwise = 1 if elementwise else 0
            d.cpu = _cpu_cb
            d.cuda_kind = _c.GR_CUDA_STREAM
            d.cuda = ctypes.cast(_stream_cb, ctypes.c_void_p)
            d.out_size = _c.GR_OUT_ONE if out_one else _c.GR_OUT_ELEMS
            d.small_inputs = small
            err = _c.ErrorInfo()
            st = lib.gr_kernel_register(ctypes.byref(d), ctypes.byref(err))
            if st == 0:
                break
            # Another copy of this module in the process (a reload) may hold the name.
            if taken is None:
                taken = _registered_names()
            if name in taken:
                continue
            raise RuntimeError(f"graphrun: registering the map kernel {name}: "
                               f"{err.message.decode(errors='replace')}")
        _kernels[sig] = name
        return name


# ---------------------------------------------------------------------------------------
# The calls of running map jobs, by key.

_calls = {}
_keys = itertools.count(1)


def register(call):
    _calls[call.key] = call


def unregister(call):
    _calls.pop(call.key, None)


class Failure:
    """One failed call: the index (None when a call of an elementwise job, which covers no
    one index), the status the package reports for it, the one-line message and the
    traceback text (formatted on the worker; "" for the package's own refusals)."""

    __slots__ = ("index", "status", "message", "traceback", "order")

    def __init__(self, index, status, message, tb, order):
        self.index, self.status, self.message, self.traceback = index, status, message, tb
        self.order = order


class _Refused(Exception):
    """The package refuses what fn returned (or its memory): the message says why."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


# gr_status values the failures carry (the enum lives in __init__, which imports this).
CUDA = 5
OVER_BUDGET = 4


class Shim:
    """What _plan.build reads of a graph: the user's ports (not the index port)."""

    def __init__(self, graph, n_in):
        self.name = graph.name
        self.inputs = graph.inputs[:n_in]
        self.outputs = graph.outputs
        self.in_place = tuple(frozenset(q for q in s if q < n_in) for s in graph.in_place)


class _CudaArray:
    """Device memory as __cuda_array_interface__ describes it, for torch.as_tensor."""

    def __init__(self, ptr, shape, dtype):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": _TYPESTR[dtype],
                                         "data": (ptr, False), "version": 2}


def _prod(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


class Call:
    """One map job's function and what its calls need, from before submission until the
    job is complete (Job._finish unregisters it)."""

    def __init__(self, fn, views, torch, in_dtypes, consts, out_dtype, out_shape, out_fixed,
                 alias, elementwise, limit, meter):
        self.key = next(_keys)
        self.fn = fn
        self.views = views          # "torch" or "numpy"
        self.torch = torch
        self.in_dtypes = tuple(in_dtypes)
        self.consts = tuple(consts)  # (name, dtype, shape)
        self.out_dtype = out_dtype
        self.out_shape = out_shape  # None, a tuple or a callable
        self.out_fixed = out_fixed  # elements of a fixed output, or None (the tensor's)
        self.alias = alias          # the output is written over input 0's buffer
        self.elementwise = elementwise
        self.indexed = not elementwise
        # rows=True: (the inputs' row shape, the output's); calls get whole rows, 2+-D views
        self.rows = None
        self.cut = 0                # gr_job_options.cut_elems: elements of one row
        self.limit = limit          # fn_memory, bytes, or None
        self.meter = meter
        self.failures = {}          # index (or None) -> Failure, the first per index
        self.lock = threading.Lock()
        self._order = itertools.count()
        self.index_array = None
        self.out_ptrs = self.out_nbytes = None
        self.shim = None

    # -- submission

    def bind(self, plan, count):
        """Fills the index port's pointers into the job's gr_tensor array, and keeps what
        a failed call on the host needs: each index's output pointer and size."""
        if self.indexed:
            self.index_array = np.arange(count, dtype=np.float64)
            base = self.index_array.ctypes.data
            plan.tensors["in"][:count, len(self.in_dtypes)] = (
                base + 8 * np.arange(count, dtype=np.uint64))
            self.out_ptrs = plan.tensors["out"][:count, 0].copy()
            size = _arrays.SIZE[self.out_dtype]
            if self.out_fixed:
                self.out_nbytes = np.full(count, self.out_fixed * size, np.uint64)
            else:
                self.out_nbytes = plan.tensors["elems"][:count] * np.uint64(size)

    def finish(self):
        """The job is complete: let go of the function (and what it closes over)."""
        self.fn = None
        self.index_array = None

    # -- failures

    def record(self, index, status, message, tb):
        with self.lock:
            if index not in self.failures:
                self.failures[index] = Failure(index, status, message, tb, next(self._order))

    def first_failure(self):
        with self.lock:
            if not self.failures:
                return None
            return min(self.failures.values(), key=lambda f: f.order)

    def _raised(self, e, in_fn=False):
        """(status, message, traceback text) of an exception of the call; the exception's
        frames are cleared, so that nothing keeps views of buffers the runtime reuses. For
        one fn raised, the traceback starts at fn (the package's frame that called it is
        left out)."""
        if isinstance(e, _Refused):
            status, message, tb = e.status or CUDA, str(e), ""
        else:
            status = CUDA
            message = f"fn raised {type(e).__name__}: {e}"
            frames = e.__traceback__
            if in_fn and frames is not None and frames.tb_next is not None:
                frames = frames.tb_next
            tb = "".join(traceback.format_exception(type(e), e, frames))
        if e.__traceback__ is not None:
            traceback.clear_frames(e.__traceback__)
        e.__traceback__ = None
        return status, message, tb

    # -- the shapes a call sees

    def _in_shape(self, a):
        if self.rows is not None:  # whole rows: the library cuts at multiples of self.cut
            if int(a.n) % self.cut:
                raise _Refused(f"rows=True: the library gave {int(a.n)} elements, not whole "
                               f"rows of {self.cut} (a library without "
                               "gr_job_options.cut_elems?)")
            return (int(a.n) // self.cut,) + self.rows[0]
        if self.elementwise or a.rank == 0:
            return (int(a.n if self.elementwise else a.in_n[0]),)
        return tuple(int(a.shape[d]) for d in range(a.rank))

    def _out_view_shape(self, shape, a):
        if self.rows is not None:
            return shape[:1] + self.rows[1]
        if self.elementwise:
            return shape
        want = self.out_fixed or int(a.in_n[0])
        s = self.out_shape
        if s is None:
            out = shape
        elif callable(s):
            out = tuple(int(d) for d in s(shape))
        else:
            out = tuple(s)
        if _prod(out) != want:
            raise _Refused(f"out_shape gives {out} ({_prod(out)} elements) for the input "
                           f"shape {shape} fn sees, but the output holds {want} elements")
        return out

    # -- the host backend

    def _np_view(self, ptr, shape, dtype, readonly=False):
        n = _prod(shape)
        npd = _HOST_NP[dtype] if self.views == "torch" else _arrays.numpy_dtype(dtype)
        buf = (ctypes.c_char * (n * _arrays.SIZE[dtype])).from_address(ptr)
        a = np.frombuffer(buf, npd, n).reshape(shape)
        if readonly and self.views == "numpy":
            a.flags.writeable = False
        return a

    def _host_view(self, ptr, shape, dtype, readonly=False):
        a = self._np_view(ptr, shape, dtype, readonly)
        if self.views == "numpy":
            return a
        t = self.torch.from_numpy(a)
        return t.view(self.torch.bfloat16) if dtype == "bfloat16" else t

    def run_host(self, a):
        """The CPU kernel: one call of fn, on a runtime worker (which ctypes gave the GIL)."""
        n_in = len(self.in_dtypes)
        index = None
        if self.indexed:
            index = int(ctypes.c_double.from_address(a.in_[n_in + len(self.consts)]).value)
        try:
            shape = self._in_shape(a)
            views = [self._host_view(a.in_[k], shape, self.in_dtypes[k])
                     for k in range(n_in)]
            consts = {name: self._host_view(a.in_[n_in + j], cshape, dtype, readonly=True)
                      for j, (name, dtype, cshape) in enumerate(self.consts)}
            oshape = self._out_view_shape(shape, a)
            if self.alias:
                out = views[0] if oshape == shape else views[0].reshape(oshape)
            else:
                out = self._host_view(a.out, oshape, self.out_dtype)
            failed = self._call(views, consts, out, 0)
        except BaseException as e:  # the package's own views failed: still this index's
            failed = self._raised(e)
        views = consts = out = None
        if failed is None:
            return
        self.record(index, *failed)
        if index is not None:
            # The library copies the output buffer out after this call: with the output's
            # own contents in it, a failed index's output is left as it was.
            ctypes.memmove(a.out, int(self.out_ptrs[index]), int(self.out_nbytes[index]))

    # -- the CUDA backend

    def _cuda_view(self, ptr, shape, dtype):
        torch = self.torch
        t = torch.as_tensor(_CudaArray(ptr, shape, dtype))
        if t.data_ptr() != ptr or t.device.type != "cuda":
            raise RuntimeError(f"PyTorch made a copy of graphrun's buffer at {ptr:#x} "
                               f"(device {t.device}) instead of a view")
        return t.view(torch.bfloat16) if dtype == "bfloat16" else t

    def run_cuda(self, stream, a):
        """The GR_CUDA_STREAM callback: one call of fn with CUDA tensors, its work enqueued
        on the iteration's stream. Returns 0, or 1 to fail the iteration."""
        torch = self.torch
        n_in = len(self.in_dtypes)
        try:
            shape = self._in_shape(a)
            views = [self._cuda_view(a.in_[k], shape, self.in_dtypes[k])
                     for k in range(n_in)]
            consts = {name: self._cuda_view(a.in_[n_in + j], cshape, dtype)
                      for j, (name, dtype, cshape) in enumerate(self.consts)}
            oshape = self._out_view_shape(shape, a)
            if self.alias:
                out = views[0] if oshape == shape else views[0].reshape(oshape)
            else:
                out = self._cuda_view(a.out, oshape, self.out_dtype)
            dev = out.device
            s = _external_stream(torch, stream or 0, dev)
            with torch.cuda.device(dev), torch.cuda.stream(s):
                failed = self._call(views, consts, out, dev.index)
                index = None
                if failed is not None and self.indexed:
                    # Ordered after the index's copy in, on the same stream.
                    index = int(self._cuda_view(a.in_[n_in + len(self.consts)], (1,),
                                                "float64").item())
        except BaseException as e:
            failed, index = self._raised(e), None
        views = consts = out = None
        if failed is None:
            return 0
        self.record(index, *failed)
        return 1

    # -- one call

    def _call(self, views, consts, out, device):
        """fn(*views, **consts), its result stored into `out`, the memory limit checked:
        None, or (status, message, traceback) of the failure."""
        torch = self.torch if self.views == "torch" else None
        _tls.depth = getattr(_tls, "depth", 0) + 1
        try:
            try:
                if torch is not None:
                    with torch.no_grad():
                        r = self.fn(*views, **consts)
                else:
                    r = self.fn(*views, **consts)
            except BaseException as e:
                return self._raised(e, in_fn=True)
            if torch is not None:
                with torch.no_grad():
                    self._store_torch(torch, r, out)
            else:
                self._store_numpy(r, out)
            r = None
            if self.limit is not None and self.meter is not None:
                used = self.meter.used(device)
                if used > self.limit:
                    raise _Refused(f"fn's own device memory reached {used} bytes on device "
                                   f"{device} (PyTorch's allocations, outside graphrun's "
                                   f"budget), over fn_memory={self.limit}", OVER_BUDGET)
        except BaseException as e:
            return self._raised(e)
        finally:
            _tls.depth -= 1
        return None

    def _store_numpy(self, r, out):
        if not isinstance(r, np.ndarray):
            raise _Refused(f"fn returned {type(r).__name__}: with views='numpy' it returns "
                           f"its output as a NumPy array ({_describe(out)})")
        if r.dtype != out.dtype or r.shape != out.shape:
            raise _Refused(f"fn returned {_describe(r)}; the output is {_describe(out)} "
                           "(rt.map's out_dtype and out_shape say what it must be)")
        if r.ctypes.data == out.ctypes.data and r.flags.c_contiguous:
            return  # the output view itself, written in place
        np.copyto(out, r, casting="no")  # NumPy copies overlapping memory safely itself

    def _store_torch(self, torch, r, out):
        if not isinstance(r, torch.Tensor):
            raise _Refused(f"fn returned {type(r).__name__}: it returns its output as a "
                           f"torch tensor ({_describe(out)})")
        if r.device != out.device:
            raise _Refused(f"fn returned a tensor on {r.device}; the output is on "
                           f"{out.device}")
        if r.dtype != out.dtype or tuple(r.shape) != tuple(out.shape):
            raise _Refused(f"fn returned {_describe(r)}; the output is {_describe(out)} "
                           "(rt.map's out_dtype and out_shape say what it must be)")
        if r.data_ptr() == out.data_ptr() and r.is_contiguous():
            return  # the output view itself, written in place
        if _overlaps(r, out):
            r = r.clone()
        out.copy_(r)


def _describe(a):
    return f"{str(a.dtype).replace('torch.', '')} {tuple(a.shape)}"


def _extent(t):
    size = t.element_size()
    span = 1 + sum((d - 1) * s for d, s in zip(t.shape, t.stride()) if d > 0)
    return t.data_ptr(), t.data_ptr() + span * size


def _overlaps(r, out):
    a0, a1 = _extent(r)
    b0, b1 = _extent(out)
    return a0 < b1 and b0 < a1


_streams = {}


def _external_stream(torch, stream, device):
    key = (stream, device.index)
    s = _streams.get(key)
    if s is None:
        if len(_streams) > 256:  # streams of runtimes long closed
            _streams.clear()
        s = _streams[key] = torch.cuda.ExternalStream(stream, device=device)
    return s


# ---------------------------------------------------------------------------------------
# The C callbacks, one of each for every map kernel (kept for the life of the process, as
# the registry keeps the definitions that name them).

@_c.KERNEL_CPU_FN
def _cpu_cb(args, user):
    try:
        a = args.contents
        call = _calls.get(int(a.s[0].f64))
        if call is not None:
            call.run_host(a)
        else:
            log.error("graphrun: a map kernel ran for a job the package does not know")
    except BaseException:  # nothing may propagate into the library's worker
        log.exception("graphrun: the map kernel failed")


@_c.KERNEL_LAUNCH_FN
def _stream_cb(stream, args, user):
    try:
        a = args.contents
        call = _calls.get(int(a.s[0].f64))
        if call is None:
            log.error("graphrun: a map kernel ran for a job the package does not know")
            return 1
        return call.run_cuda(stream, a)
    except BaseException:
        log.exception("graphrun: the map kernel failed")
        return 1


# ---------------------------------------------------------------------------------------
# fn's own device memory.

class TorchMeter:
    """PyTorch's allocations on the runtime's devices during one job: what was allocated
    when the job began is the base; reset_peak_memory_stats starts PyTorch's peak there."""

    def __init__(self, torch, devices):
        self.torch = torch
        self.base = {}
        # The caching allocator's statistics exist once PyTorch has initialized CUDA: before
        # that, reset_peak_memory_stats refuses every device ("Invalid device argument").
        torch.cuda.init()
        for d in devices:
            self.base[d] = torch.cuda.memory_allocated(d)
            torch.cuda.reset_peak_memory_stats(d)

    def used(self, device):
        """The peak since the job began, above its base, in bytes."""
        return max(0, self.torch.cuda.max_memory_allocated(device) - self.base.get(device, 0))

    def report(self):
        return {d: self.used(d) for d in self.base}


def meter_for(backend, torch, devices):
    """The meter of a job's fn memory: PyTorch's on CUDA; none on the host backend (fn's
    memory there is host memory, no budget's). Tests replace it."""
    if backend == "cuda" and torch is not None:
        return TorchMeter(torch, devices)
    return None


# ---------------------------------------------------------------------------------------
# The graph of a map job.

def check_const_name(name):
    """Refusal text for a constant name a map function cannot take as a keyword argument
    or a graph spec cannot declare; None when it is fine."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        return (f"constant name {name!r} is not a Python identifier (fn takes constants as "
                "keyword arguments)")
    if not name.isascii() or len(name) > _c.GR_NAME_MAX:
        return f"constant name {name!r}: at most {_c.GR_NAME_MAX} ASCII characters"
    if name.lower() in _RESERVED:
        return f"constant name {name!r} is a word graph specs reserve"
    return None


def spec(kname, key, in_dtypes, consts, out_dtype, out_fixed, alias, indexed):
    """The graph spec text of a map job (docs/GRAPH_SPEC.md)."""
    n_in = len(in_dtypes)
    lines = [f"# graphrun.Runtime.map, job key {key}"]
    for k, t in enumerate(in_dtypes):
        lines.append(f"buffer gr.in{k} {t}")
    for name, t, shape in consts:
        lines.append(f"const {name} {t} [{', '.join(str(int(d)) for d in shape)}]")
    args = [f"gr.in{k}" for k in range(n_in)] + [c[0] for c in consts]
    if indexed:
        lines.append("buffer gr.index float64 [1]")
        args.append("gr.index")
    out = "gr.in0" if alias else "gr.out"
    if not alias:
        lines.append(f"buffer gr.out {out_dtype}" + (f" [{out_fixed}]" if out_fixed else ""))
    for k in range(n_in):
        lines.append(f"h2d gr.load{k}: in{k} -> gr.in{k}")
    if indexed:
        lines.append(f"h2d gr.load.index: in{n_in} -> gr.index")
    lines.append(f"kernel fn: {kname}({', '.join(args)}, {key}) -> {out}")
    lines.append(f"d2h gr.store: {out} -> out0")
    return "\n".join(lines) + "\n"
