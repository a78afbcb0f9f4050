"""graphrun from Python: NumPy arrays and PyTorch CPU tensors through the GPU, in one call.

    import graphrun, torch
    xs = [torch.rand(100_000_000) for _ in range(10)]
    with graphrun.Runtime(budget="2GiB") as rt:
        ys = rt.run(graphrun.seed(), xs)     # new tensors, zero copy, under 2 GiB

A thin layer over the C library (libgraphrun.so.0, through ctypes: _lib.py says why).
docs/PYTHON.md is the reference: the contract of every call.

Threads. Every foreign call releases the GIL, so the runtime's workers, and other Python
threads, run while one thread submits or waits. The runtime's completion callbacks come on
its own threads; this package's C callback only puts an event on a queue, and one Python
thread per process, "graphrun-callbacks", takes the events off it in order: it finishes the
job (copies back what copy=True copied, lets go of the arrays), runs the user's on_complete,
and then wakes the job's waiters. So a user callback runs Python on an ordinary Python
thread, may call anything (submit too, which the C callback may not), and Job.wait returns
only after it has returned, as gr_job_wait does in C.

The memory contract. Until a job is complete the runtime reads its inputs and writes its
outputs; the package therefore keeps every array of a job referenced from a process-wide
table, taken out only when the job's completion event has been handled, so neither del
nor the garbage collector can free memory the runtime still uses.
"""
import atexit
import collections
import ctypes
import enum
import itertools
import logging
import os
import queue
import sys
import threading
import time
import weakref

import numpy as np

from . import _arrays, _map, _plan, _spec
from ._lib import lib
from . import _lib as _c
from ._arrays import reinterpret
from ._pinned import pinned, pinned_empty

__version__ = "0.4.0"
_c.check_version(lib.gr_version().decode(), __version__)
__all__ = [
    "Runtime", "Graph", "Job", "Port", "Constant", "Progress", "RuntimeInfo", "Probe",
    "Status", "Error", "InvalidArgument", "InvalidUsage", "OutOfMemory", "OverBudget",
    "CudaError", "DeviceLost", "Timeout", "Canceled", "Shutdown", "Unavailable", "Internal",
    "FunctionError", "seed", "pinned", "pinned_empty", "reinterpret", "now", "probe",
    "kernels", "parse_size", "library_version",
]

log = logging.getLogger("graphrun")


# ---------------------------------------------------------------------------------------
# Status and errors.

class Status(enum.IntEnum):
    """gr_status."""
    OK = 0
    INVALID_ARGUMENT = 1
    INVALID_USAGE = 2
    OUT_OF_MEMORY = 3
    OVER_BUDGET = 4
    CUDA = 5
    DEVICE_LOST = 6
    TIMEOUT = 7
    CANCELED = 8
    SHUTDOWN = 9
    UNAVAILABLE = 10
    INTERNAL = 11


def _status(value):
    try:
        return Status(value)
    except ValueError:
        return value


class Error(Exception):
    """A graphrun failure: `status` (a Status), `index` (the tensor index, or None), `node`
    (the graph node's name, or None) and `message` (the reason)."""

    def __init__(self, status, message, index=None, node=None):
        super().__init__(message)
        self.status = _status(status)
        self.message = message
        self.index = index
        self.node = node

    def __str__(self):
        where = []
        if self.index is not None:
            where.append(f"index {self.index}")
        if self.node:
            where.append(f"node '{self.node}'")
        text = lib.gr_status_str(int(self.status)).decode()
        return f"{text}: {self.message}" + (f" [{', '.join(where)}]" if where else "")

    def __reduce__(self):
        return (_make_error, (int(self.status), self.message, self.index, self.node))


class InvalidArgument(Error, ValueError):
    """GR_ERR_INVALID_ARGUMENT: a bad value (also the package's own refusals)."""


class InvalidUsage(Error, RuntimeError):
    """GR_ERR_INVALID_USAGE: not allowed in the object's state (a closed runtime, say)."""


class OutOfMemory(Error, MemoryError):
    """GR_ERR_OUT_OF_MEMORY: host memory, a thread or pinned memory could not be had."""


class OverBudget(Error):
    """GR_ERR_OVER_BUDGET: one iteration needs more device memory than the budget, and the
    graph cannot run it in parts."""


class CudaError(Error):
    """GR_ERR_CUDA: a CUDA call failed; the message names it."""


class DeviceLost(Error):
    """GR_ERR_DEVICE_LOST: the device hit a sticky CUDA error."""


class Timeout(Error, TimeoutError):
    """GR_ERR_TIMEOUT: the job's deadline passed before these indices executed."""


class Canceled(Error):
    """GR_ERR_CANCELED: the job was canceled."""


class Shutdown(Error):
    """GR_ERR_SHUTDOWN: the runtime is shutting down (or closed)."""


class Unavailable(Error):
    """GR_ERR_UNAVAILABLE: the backend, device or a kernel's implementation is not here."""


class Internal(Error):
    """GR_ERR_INTERNAL: a bug in graphrun."""


class FunctionError(Error):
    """Runtime.map's function raised, or returned what its output cannot take, for one
    index: `traceback` is the Python traceback's text (formatted on the worker thread;
    "" for the package's own refusals of what fn returned). `status` is Status.CUDA, the
    library's status for a kernel callback that failed, on either backend."""

    def __init__(self, status, message, index=None, node=None, traceback=""):
        super().__init__(status, message, index, node)
        self.traceback = traceback

    def __str__(self):
        where = f" [index {self.index}]" if self.index is not None else ""
        tb = f"\n\n{self.traceback.rstrip()}" if self.traceback else ""
        return f"{self.message}{where}{tb}"

    def __reduce__(self):
        return (FunctionError, (int(self.status), self.message, self.index, self.node,
                                self.traceback))


_ERRORS = {
    Status.INVALID_ARGUMENT: InvalidArgument, Status.INVALID_USAGE: InvalidUsage,
    Status.OUT_OF_MEMORY: OutOfMemory, Status.OVER_BUDGET: OverBudget,
    Status.CUDA: CudaError, Status.DEVICE_LOST: DeviceLost, Status.TIMEOUT: Timeout,
    Status.CANCELED: Canceled, Status.SHUTDOWN: Shutdown, Status.UNAVAILABLE: Unavailable,
    Status.INTERNAL: Internal,
}


def _make_error(status, message, index=None, node=None):
    return _ERRORS.get(_status(status), Error)(status, message, index, node)


def _from_info(info):
    index = None if info.index == _c.GR_NO_INDEX else int(info.index)
    node = info.node.decode(errors="replace") or None
    return _make_error(info.status, info.message.decode(errors="replace"), index, node)


def _raise(status, info=None, message=None, index=None, node=None):
    if info is not None and info.status == status:
        raise _from_info(info)
    raise _make_error(status, message or lib.gr_status_str(status).decode(), index, node)


def _refuse(message, index=None):
    raise InvalidArgument(Status.INVALID_ARGUMENT, message, index)


# ---------------------------------------------------------------------------------------
# Small helpers.

_UNITS = {"": 1, "K": 1 << 10, "KIB": 1 << 10, "KB": 10**3, "M": 1 << 20, "MIB": 1 << 20,
          "MB": 10**6, "G": 1 << 30, "GIB": 1 << 30, "GB": 10**9, "T": 1 << 40,
          "TIB": 1 << 40, "TB": 10**12, "B": 1}


def parse_size(value):
    """Bytes from an int or a string such as "2GiB", "512MiB", "1.5G", "64MB" (the
    `graphrun` driver's units: K, M, G, T and KiB... are powers of 1024, KB... of 1000)."""
    if isinstance(value, bool):
        raise TypeError("a size is a number of bytes or a string, not a bool")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"negative size {value}")
        return value
    if isinstance(value, float):
        raise TypeError("a size in bytes is an int (or a string with a unit: '1.5GiB')")
    s = str(value).strip().replace(" ", "")
    i = len(s)
    while i > 0 and s[i - 1].isalpha():
        i -= 1
    num, unit = s[:i], s[i:].upper()
    try:
        v = float(num)
    except ValueError:
        raise ValueError(f"not a size: {value!r}") from None
    if unit not in _UNITS or v < 0:
        raise ValueError(f"not a size: {value!r} (units: K, KiB, KB, M, MiB, MB, G, GiB, "
                         "GB, T, TiB, TB)")
    return int(v * _UNITS[unit])


def library_version():
    """The C library's version, "MAJOR.MINOR.PATCH" (gr_version()): the one loaded, which
    graphrun checks at import has this package's (__version__) major and minor."""
    return lib.gr_version().decode()


def now():
    """The runtime's clock (CLOCK_MONOTONIC), in seconds."""
    return lib.gr_now_ns() / 1e9


_BACKENDS = {"auto": 0, "host": 1, "cuda": 2}
_LEVELS = {"debug": 0, "info": 1, "warn": 2, "warning": 2, "error": 3, "off": 4}
_PY_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR}

Probe = collections.namedtuple("Probe", "available backend devices reason")


def probe(backend="auto"):
    """Whether `backend` ("auto", "host", "cuda") can run here, without a runtime: a Probe
    (available, backend it resolves to, device count, reason when not available)."""
    if backend not in _BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: auto, host or cuda")
    n = ctypes.c_uint32()
    chosen = ctypes.c_int()
    err = _c.ErrorInfo()
    st = lib.gr_backend_probe(_BACKENDS[backend], ctypes.byref(n), ctypes.byref(chosen),
                              ctypes.byref(err))
    name = lib.gr_backend_name(chosen.value).decode()
    if st == 0:
        return Probe(True, name, int(n.value), "")
    return Probe(False, backend, 0, err.message.decode(errors="replace"))


KernelInfo = collections.namedtuple("KernelInfo", "name inputs scalars elementwise doc "
                                    "out_dtype in_dtypes")


def kernels():
    """Every registered kernel (the built-ins first), one KernelInfo per definition."""
    out = []
    for i in range(lib.gr_kernel_count()):
        k = _c.kernel_info_init()
        if lib.gr_kernel_info_get(i, ctypes.byref(k)) != 0:
            continue
        names = _arrays.DTYPES
        out.append(KernelInfo(k.name.decode(), k.n_inputs, k.n_scalars, bool(k.elementwise),
                              (k.doc or b"").decode(), names[k.out_dtype],
                              tuple(names[k.in_dtype[j]] for j in range(k.n_inputs))))
    return out


# ---------------------------------------------------------------------------------------
# The callback thread: completion events and log lines from the runtime's threads.

_events = queue.SimpleQueue()
_jobs = {}  # key -> Job, from submission until its completion is handled: holds the arrays
_jobs_lock = threading.Lock()
_keys = itertools.count(1)
_thread = None
_thread_lock = threading.Lock()


@_c.JOB_CALLBACK
def _on_complete_c(job, status, user):
    # A runtime thread (or the thread that ended the job): queue, nothing else. No lock
    # that Python code elsewhere holds across a foreign call is taken here.
    _events.put(("job", user, job, status))


@_c.LOG_CALLBACK
def _on_log_c(level, message, user):
    _events.put(("log", level, message))


def _loop():
    while True:
        if not _handle(_events.get()):
            return


def _handle(item):
    # A function of its own, so that nothing of the last event (a job and its arrays)
    # stays referenced by the loop while it waits for the next one.
    try:
        if item[0] == "job":
            with _jobs_lock:
                job = _jobs.get(item[1])
            if job is not None:
                if job._handle is None:
                    job._handle = item[2]
                job._finish(item[3])
        elif item[0] == "log":
            level = _PY_LEVELS.get(item[1], logging.ERROR)
            log.log(level, "%s", item[2].decode(errors="replace"))
        elif item[0] == "close":
            lib.gr_runtime_destroy(item[1])
        elif item[0] == "sync":
            item[1].set()
        elif item[0] == "stop":
            return False
    except BaseException:  # the thread must outlive a bad callback
        log.exception("graphrun: error on the callback thread")
    return True


def _sync():
    """Returns once the callback thread has handled every event queued before the call."""
    done = threading.Event()
    _events.put(("sync", done))
    done.wait()


def _on_callback_thread():
    return threading.current_thread() is _thread


def _start_thread():
    global _thread
    with _thread_lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_loop, name="graphrun-callbacks", daemon=True)
            _thread.start()


def _after_fork_in_child():
    # The parent's runtime and jobs are unusable in a child (the library refuses them);
    # their arrays stay referenced, the child's own work starts afresh.
    global _events, _thread, _jobs_lock, _thread_lock
    _events = queue.SimpleQueue()
    _thread = None
    _jobs_lock = threading.Lock()
    _thread_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---------------------------------------------------------------------------------------
# Graphs.

Port = collections.namedtuple("Port", "dtype fixed_elems")
Port.__doc__ = ("A host port: its element type (a graphrun type name) and, for a port of "
                "fixed-size buffers, the elements it moves per tensor (None: the tensor's).")
Constant = collections.namedtuple("Constant", "name dtype shape")
Constant.__doc__ = ("A constant of a graph (gr_graph_const_get): its name, element type (a "
                    "graphrun type name) and shape; each job gives its contents (constants=).")


class Graph:
    """A finalized graph (gr_graph): what one iteration does to one tensor. Read-only and
    shareable by any number of jobs and threads. Make one with Graph.load, Graph.parse or
    graphrun.seed()."""

    def __init__(self, handle, name, text=None, in_place=None):
        self._handle = handle
        self.name = name
        self._finalizer = weakref.finalize(self, lib.gr_graph_destroy, handle)
        self._finalizer.atexit = False
        self.inputs = tuple(self._port(0, i) for i in range(lib.gr_graph_input_count(handle)))
        self.outputs = tuple(self._port(1, i)
                             for i in range(lib.gr_graph_output_count(handle)))
        self.constants = tuple(self._const(i) for i in range(lib.gr_graph_const_count(handle)))
        if in_place is None:
            in_place = _spec.in_place_ports(text or "", len(self.inputs), len(self.outputs))
        # Per output port, the input ports it may be written over (same type and size).
        self.in_place = tuple(
            frozenset(q for q in in_place[p]
                      if q < len(self.inputs) and self.inputs[q] == self.outputs[p])
            for p in range(len(self.outputs)))

    def _port(self, output, i):
        info = _c.PortInfo()
        st = lib.gr_graph_port_get(self._handle, output, i, ctypes.byref(info))
        if st != 0:
            _raise(st, message=f"gr_graph_port_get({output}, {i})")
        return Port(_arrays.DTYPES[info.dtype], int(info.fixed_elems) or None)

    def _const(self, i):
        info = _c.ConstInfo()
        st = lib.gr_graph_const_get(self._handle, i, ctypes.byref(info))
        if st != 0:
            _raise(st, message=f"gr_graph_const_get({i})")
        shape = tuple(int(info.shape[d]) for d in range(info.rank)) or (int(info.elems),)
        return Constant(info.name.decode(), _arrays.DTYPES[info.dtype], shape)

    @classmethod
    def load(cls, path):
        """Reads and parses the graph spec at `path` (docs/GRAPH_SPEC.md); its `cuda`
        statements register their files' kernels. InvalidArgument with "PATH:LINE:COL:
        reason" when the file cannot be read or the spec is wrong."""
        path = os.fspath(path)
        h = ctypes.c_void_p()
        err = _c.ErrorInfo()
        st = lib.gr_graph_load(os.fsencode(path), ctypes.byref(h), ctypes.byref(err))
        if st != 0:
            _raise(st, err)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
        return cls(h.value, path, text)

    @classmethod
    def parse(cls, text, name=None):
        """Parses a graph spec from `text` (str or bytes); `name` names it in messages.
        `cuda` statements are refused here (only Graph.load reads files)."""
        data = text.encode() if isinstance(text, str) else bytes(text)
        h = ctypes.c_void_p()
        err = _c.ErrorInfo()
        st = lib.gr_graph_parse(data, len(data), name.encode() if name else None,
                                ctypes.byref(h), ctypes.byref(err))
        if st != 0:
            _raise(st, err)
        return cls(h.value, name or "<graph spec>", data.decode(errors="replace"))

    def footprint(self, elems):
        """Device bytes one iteration needs for a tensor of `elems` elements."""
        out = ctypes.c_uint64()
        st = lib.gr_graph_footprint(self._handle, int(elems), ctypes.byref(out))
        if st != 0:
            _raise(st, message=f"no footprint for {elems} elements (0, or too many)")
        return int(out.value)

    def close(self):
        """Drops the graph now (jobs that use it keep their own reference)."""
        self._finalizer()

    def __repr__(self):
        ins = ", ".join(p.dtype + (f"[{p.fixed_elems}]" if p.fixed_elems else "")
                        for p in self.inputs)
        outs = ", ".join(p.dtype + (f"[{p.fixed_elems}]" if p.fixed_elems else "")
                         for p in self.outputs)
        consts = "".join(f", const {c.name} {c.dtype} {list(c.shape)}"
                         for c in self.constants)
        return f"<graphrun.Graph {self.name!r}: ({ins}) -> ({outs}){consts}>"


def seed():
    """The seed pipeline: ten rounds of x = sqrt(x * 1.01 + 1.01) in float32, in place
    (gr_graph_create_seed): one float32 input port, one output port."""
    h = ctypes.c_void_p()
    st = lib.gr_graph_create_seed(ctypes.byref(h))
    if st != 0:
        _raise(st)
    return Graph(h.value, "seed", in_place=(frozenset({0}),))


# ---------------------------------------------------------------------------------------
# Runtimes.

RuntimeInfo = collections.namedtuple(
    "RuntimeInfo", "backend device_count workers_per_device budget_bytes backend_note devices")

_runtimes = weakref.WeakSet()


class Runtime:
    """A graphrun runtime (gr_runtime): workers, and per device a budget and an arena.

    Runtime(budget="2GiB", workers=3, backend="auto", devices=None, ...) starts it; use it
    as a context manager, or call close(). Every argument maps to a gr_config field
    (docs/PYTHON.md has the table); a bad one raises InvalidArgument naming it."""

    def __init__(self, budget="2GiB", workers=3, backend="auto", devices=None, *,
                 host_devices=1, ring_capacity=4096, copy_threads=0, staging="64MiB",
                 batch_below="1MiB", pipeline="128MiB", split_tensors=True,
                 contexts="primary", fault_plan=None, log_level=None, host_cache=0):
        self._handle = None
        if backend not in _BACKENDS:
            raise ValueError(f"unknown backend {backend!r}: auto, host or cuda")
        if contexts not in ("primary", "private"):
            raise ValueError(f"unknown contexts {contexts!r}: primary or private")
        cfg = _c.config_init()
        cfg.backend = _BACKENDS[backend]
        cfg.budget_bytes = parse_size(budget)
        cfg.workers_per_device = int(workers)
        cfg.ring_capacity = int(ring_capacity)
        cfg.host_devices = int(host_devices)
        cfg.context_mode = 0 if contexts == "primary" else 1
        cfg.copy_threads = int(copy_threads)
        cfg.staging_bytes = parse_size(staging)
        cfg.batch_below_bytes = parse_size(batch_below)
        cfg.pipeline_bytes = parse_size(pipeline)
        cfg.host_cache_bytes = parse_size(host_cache)
        self._host_cache = cfg.host_cache_bytes != 0
        cfg.split_tensors = 1 if split_tensors else 0
        self._fault_plan = fault_plan.encode() if fault_plan is not None else None
        lib.gr_testing_set_fault_plan(ctypes.byref(cfg), self._fault_plan)
        if devices is not None and devices != "all":
            devs = [int(d) for d in devices]
            arr = (ctypes.c_int * max(len(devs), 1))(*devs)
            cfg.devices = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int))
            cfg.device_count = len(devs)
        if log_level is not None:
            if log_level not in _LEVELS:
                raise ValueError(f"unknown log_level {log_level!r}: debug, info, warn, "
                                 "error or off")
            cfg.log_level = _LEVELS[log_level]
            cfg.log_callback = _on_log_c
        _start_thread()
        h = ctypes.c_void_p()
        err = _c.ErrorInfo()
        st = lib.gr_runtime_create(ctypes.byref(cfg), ctypes.byref(h), ctypes.byref(err))
        if st != 0:
            _raise(st, err)
        self._handle = h.value
        self._closed = False
        self._contexts = contexts
        info = self.info()
        self._backend, self._devices = info.backend, info.devices
        _runtimes.add(self)

    # -- lifecycle

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # An exception (Ctrl-C among them) stops what is queued; a normal exit lets every
        # job finish first, as concurrent.futures' executors do.
        self.close(wait=exc_type is None)
        return False

    def _live_jobs(self):
        with _jobs_lock:
            return [j for j in _jobs.values() if j.runtime is self]

    def shutdown(self):
        """Begins shutting down without waiting (gr_runtime_shutdown): submissions are
        refused from now on, indices not started end with Status.SHUTDOWN."""
        h = self._handle
        if h is not None:
            lib.gr_runtime_shutdown(h)

    def close(self, wait=True):
        """Destroys the runtime (gr_runtime_destroy). wait=True first waits for every job of
        this runtime to complete; wait=False stops what has not started (Status.SHUTDOWN).
        On return every job is complete, its callback has run and every log line has been
        delivered (except when called from a callback: then the other jobs' callbacks and
        the log lines run after it returns).
        Idempotent. Ctrl-C while waiting stops everything, then re-raises."""
        if self._handle is None:
            return
        if _map.in_fn():
            raise InvalidUsage(Status.INVALID_USAGE, "close from inside a map function: it "
                               "runs on one of the runtime's workers, which close joins")
        try:
            while wait:  # callbacks may submit more: until none is left
                # From a callback: not the jobs whose callbacks are running (this one's).
                live = [j for j in self._live_jobs()
                        if not (j._finished and _on_callback_thread())]
                if not live:
                    break
                for j in live:
                    j.wait()
        finally:
            h, self._handle = self._handle, None
            if h is not None:
                self._closed = True
                lib.gr_runtime_destroy(h)
                # Every completion and log line of the runtime was queued before destroy
                # returned: once the callback thread reaches this marker, all are handled.
                if not _on_callback_thread():
                    _sync()

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h is not None:
            # Possibly on a runtime thread (a collection triggered inside a callback):
            # destroy joins the workers, so it is done on the callback thread instead.
            self._handle = None
            _events.put(("close", h))

    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidUsage(Status.INVALID_USAGE, "the runtime is closed")
        return h

    # -- introspection

    def info(self):
        """Backend in use, devices, workers per device, budget per device as the arenas
        hold it, how the backend was chosen, and the devices' ordinals."""
        h = self._h()
        i = _c.runtime_info_init()
        st = lib.gr_runtime_info_get(h, ctypes.byref(i))
        if st != 0:
            _raise(st)
        ords = []
        for d in range(i.device_count):
            o = ctypes.c_int()
            lib.gr_runtime_device_ordinal(h, d, ctypes.byref(o))
            ords.append(o.value)
        return RuntimeInfo(lib.gr_backend_name(i.backend).decode(), i.device_count,
                           i.workers_per_device, int(i.budget_bytes),
                           i.backend_note.decode(errors="replace"), tuple(ords))

    def forget(self, array):
        """With host_cache: unregister what the registration cache holds of `array`'s memory
        (gr_host_forget), so that it may be freed. Call it before dropping the last
        reference to an array a job of this runtime used, when the cache is on. Raises
        InvalidUsage while a job that has not ended uses the memory."""
        try:
            b = _arrays.as_buf(array, "forget")
        except _arrays._Refusal as e:
            raise TypeError(f"forget: {e}") from None
        if b.nbytes == 0:
            return
        st = lib.gr_host_forget(self._h(), b.ptr, b.nbytes)
        if st != 0:
            _raise(st)

    def stats(self):
        """A snapshot of the statistics (gr_runtime_stats_get): a dict of the runtime-wide
        counters, with "devices", a list of one dict per device (tensors, iterations, bytes,
        budget, and the budget_wait and iteration histograms)."""
        h = self._h()
        out = None
        devices = []
        n = 1
        d = 0
        while d < n:
            s = _c.stats_init()
            st = lib.gr_runtime_stats_get(h, d, ctypes.byref(s))
            if st != 0:
                _raise(st)
            n = s.device_count
            if out is None:
                out = {k: int(getattr(s, k)) for k in (
                    "device_count", "devices_lost", "jobs_submitted", "jobs_completed",
                    "jobs_failed", "nodevice_failed", "nodevice_canceled",
                    "staging_pageable", "host_cache_bytes", "host_cache_registrations",
                    "host_cache_evictions", "host_cache_failures", "host_cache_hits",
                    "host_cache_register_ns")}
            dev = {k: int(getattr(s, k)) for k in (
                "device", "lost", "workers", "workers_retired", "tensors_done",
                "tensors_failed", "tensors_canceled", "iterations_done", "iterations_failed",
                "graph_instantiations", "graph_updates", "bytes_h2d", "bytes_d2h",
                "budget_bytes", "budget_in_use", "budget_peak", "units_direct",
                "units_staged", "units_scattered", "units_overlapped", "copies_refused",
                "constants_copied", "constant_bytes", "units_streamed")}
            for k in ("budget_wait", "iteration"):
                hg = getattr(s, k)
                dev[k] = {"count": int(hg.count), "sum_ns": int(hg.sum_ns),
                          "buckets": [int(b) for b in hg.buckets]}
            devices.append(dev)
            d += 1
        out["devices"] = devices
        return out

    def prometheus(self):
        """Every statistic in the Prometheus text format (gr_runtime_stats_prometheus)."""
        h = self._h()
        size = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(size)
            n = lib.gr_runtime_stats_prometheus(h, buf, size)
            if n == 0:
                _raise(Status.OUT_OF_MEMORY, message="no snapshot of the statistics")
            if n < size:
                return buf.value.decode()
            size = n + n // 4 + 1

    # -- work

    def submit(self, graph, inputs, outputs=None, deadline=None, on_complete=None, *,
               copy=False, inplace=False, out=None, constants=None):
        """Submits a job: `graph` applied to every tensor of `inputs`; returns its Job at
        once (the work goes on in the runtime's workers). Outputs not given (`outputs`, or
        `out` as NumPy spells it) are new arrays like the inputs; with inplace=True they
        are written over the inputs where the graph allows it. `constants`: a dict giving
        each of the graph's constants (Graph.constants) its contents, an array of its
        type and size. docs/PYTHON.md has the rules for inputs and outputs; refusals raise
        before anything runs and write nothing."""
        if out is not None:
            if outputs is not None:
                raise TypeError("give the outputs as outputs or as out, not both")
            outputs = out
        return Job._submit(self, graph, inputs, outputs, deadline, on_complete, copy,
                           bool(inplace), constants)

    def run(self, graph, tensors, outputs=None, deadline=None, *, copy=False,
            progress=False, inplace=False, out=None, constants=None):
        """submit, then wait: returns the outputs (Job.result()); raises the job's first
        failure. Ctrl-C cancels the job and re-raises."""
        job = self.submit(graph, tensors, outputs, deadline, copy=copy, inplace=inplace,
                          out=out, constants=constants)
        job.wait(progress=progress)
        return job.result()

    def submit_map(self, fn, tensors, constants=None, outputs=None, deadline=None,
                   on_complete=None, *, out=None, out_dtype=None, out_shape=None,
                   elementwise=False, rows=False, views="auto", inplace=False, copy=False,
                   fn_memory=None):
        """Submits a job that calls `fn` once per tensor, on the runtime's workers, with
        views of graphrun's buffers for that tensor (zero copy: CUDA tensors on the CUDA
        backend, run on the iteration's stream; CPU tensors or NumPy arrays on the host
        backend), the constants as keyword arguments by name; what fn returns is copied
        into the tensor's output. Returns the Job at once. docs/PYTHON.md (Runtime.map)
        has the contract: views, outputs, threads and the GIL, errors, memory."""
        self._h()
        if _map.in_fn():
            raise InvalidUsage(Status.INVALID_USAGE, "a job submitted from inside a map "
                               "function: it runs on one of the runtime's workers, which a "
                               "job of its own could wait for forever")
        if not callable(fn):
            raise TypeError(f"fn must be callable, not {type(fn).__name__}")
        if out is not None:
            if outputs is not None:
                raise TypeError("give the outputs as outputs or as out, not both")
            outputs = out
        views, torch = self._map_views(views)
        call, graph, outputs = _map_plan(self, fn, tensors, constants, outputs, out_dtype,
                                         out_shape, bool(elementwise), bool(rows), views,
                                         torch, bool(inplace), fn_memory)
        _map.register(call)
        try:
            return Job._submit(self, graph, tensors, outputs, deadline, on_complete, copy,
                               bool(inplace), constants, call)
        except BaseException:
            _map.unregister(call)
            raise

    def map(self, fn, tensors, constants=None, outputs=None, deadline=None, *, out=None,
            out_dtype=None, out_shape=None, elementwise=False, rows=False, views="auto",
            inplace=False, copy=False, fn_memory=None, progress=False):
        """submit_map, then wait: returns the outputs (a list, one per tensor), or raises
        the job's first failure (a FunctionError with fn's traceback when fn raised).
        Ctrl-C cancels the job and re-raises."""
        job = self.submit_map(fn, tensors, constants, outputs, deadline, out=out,
                              out_dtype=out_dtype, out_shape=out_shape,
                              elementwise=elementwise, rows=rows, views=views,
                              inplace=inplace, copy=copy, fn_memory=fn_memory)
        job.wait(progress=progress)
        return job.result()

    def _map_views(self, views):
        """("torch" or "numpy", the torch module or None) for a map job here."""
        if views not in ("auto", "torch", "numpy"):
            raise ValueError(f"unknown views {views!r}: auto, torch or numpy")
        torch = _import_torch() if views != "numpy" else None
        if self._backend == "cuda":
            if views == "numpy":
                _refuse("views='numpy' on the CUDA backend: fn gets device memory, which "
                        "NumPy cannot view; use views='torch' (PyTorch with CUDA)")
            if torch is None or not torch.cuda.is_available():
                raise Unavailable(Status.UNAVAILABLE, "rt.map on the CUDA backend needs "
                                  "PyTorch with CUDA (fn gets CUDA tensors): "
                                  + ("PyTorch is not installed" if torch is None else
                                     "torch.cuda.is_available() is False"))
            if self._contexts != "primary":
                raise Unavailable(Status.UNAVAILABLE, "rt.map needs contexts='primary': "
                                  "PyTorch works in each device's primary context")
            return "torch", torch
        if views == "torch" and torch is None:
            raise Unavailable(Status.UNAVAILABLE, "views='torch': PyTorch is not installed")
        return ("torch", torch) if torch is not None else ("numpy", None)

    def __repr__(self):
        if self._handle is None:
            return "<graphrun.Runtime closed>"
        i = self.info()
        return (f"<graphrun.Runtime {i.backend} devices={list(i.devices)} "
                f"budget={i.budget_bytes} workers={i.workers_per_device}>")


def _close_all_at_exit():
    # Before the interpreter finalizes: no runtime thread may call into Python after it.
    for rt in list(_runtimes):
        try:
            rt.close(wait=False)
        except BaseException:
            pass


atexit.register(_close_all_at_exit)


# ---------------------------------------------------------------------------------------
# Map jobs: the planning that Runtime.submit_map does before Job._submit (_map.py has the
# design: the kernel, the graph, the callbacks).

_torch_module = None  # False once the import failed: it is not tried again


def _import_torch():
    global _torch_module
    if _torch_module is None:
        try:
            import torch
            _torch_module = torch
        except ImportError:
            _torch_module = False
    return _torch_module or None


def _shape_of(x):
    t = _arrays._torch()
    if isinstance(x, _arrays.Reinterpreted):
        x = x.array
    if isinstance(x, np.ndarray) or (t is not None and isinstance(x, t.Tensor)):
        return tuple(int(d) for d in x.shape)
    try:
        return _arrays.as_buf(x, "input").shape
    except _arrays._Refusal:
        return ()  # refused by the plan, with its reason


def _prod(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _map_plan(rt, fn, tensors, constants, outputs, out_dtype, out_shape, elementwise, rows,
              views, torch, inplace, fn_memory):
    """The Call, the graph and the outputs of a map job. Refusals raise InvalidArgument
    before anything is registered or submitted (Job._submit checks the rest)."""
    if not isinstance(tensors, (list, tuple)):
        _refuse("tensors must be a list: one array per tensor, or one such sequence per "
                f"input of fn; got {type(tensors).__name__}")
    items = list(tensors)
    ports = [list(x) for x in items] if items and all(
        isinstance(x, (list, tuple)) for x in items) else [items]
    n_in, count = len(ports), len(ports[0])
    if count == 0:
        _refuse("rt.map: no tensors")
    in_dtypes = []
    for p, seq in enumerate(ports):
        if not seq:
            _refuse(f"inputs: port 0 has {count} arrays, port {p} has 0")
        try:
            b = _arrays.as_buf(seq[0], f"input {p} of index 0")
        except _arrays._Refusal as r:
            _refuse(f"input {p} of index 0 {r}", 0)
        if not b.known:
            _refuse(f"input {p} of index 0 holds {b.dtype}: graphrun has no such element type",
                    0)
        in_dtypes.append(b.dtype)
    row_shape = None
    if rows:
        if elementwise:
            _refuse("rows=True and elementwise=True: give one (elementwise=True lets graphrun "
                    "cut anywhere, rows=True only between rows)")
        row_shape = _row_shape(ports)

    consts = []
    if constants is not None:
        if not hasattr(constants, "keys"):
            _refuse(f"constants must be a dict of name -> array, not "
                    f"{type(constants).__name__}")
        for name in constants.keys():
            why = _map.check_const_name(name)
            if why:
                _refuse(why)
            try:
                b = _arrays.as_buf(constants[name], f"constant {name!r}")
            except _arrays._Refusal as r:
                _refuse(f"constant {name!r} {r}")
            if not b.known:
                _refuse(f"constant {name!r} holds {b.dtype}: graphrun has no such element "
                        "type")
            shape = b.shape or (1,)
            if len(shape) > _c.GR_MAX_DIMS:
                _refuse(f"constant {name!r} has {len(shape)} dimensions; a graphrun constant "
                        f"has at most {_c.GR_MAX_DIMS} (reshape it)")
            if b.size == 0:
                _refuse(f"constant {name!r} has no elements")
            consts.append((name, b.dtype, shape))
    if len(consts) > _c.GR_MAX_CONSTS:
        _refuse(f"{len(consts)} constants; a graph has at most {_c.GR_MAX_CONSTS}")

    indexed = not (elementwise or rows)
    if n_in + indexed > _c.GR_MAX_PORTS or \
            n_in + len(consts) + indexed > _c.GR_MAX_KERNEL_INPUTS:
        _refuse(f"rt.map: {n_in} inputs and {len(consts)} constants: a graphrun kernel reads "
                f"at most {_c.GR_MAX_KERNEL_INPUTS} buffers"
                + (", one of them the tensor's index (whole tensors: elementwise=False)"
                   if indexed else ""))
    try:
        out_t = _arrays.dtype_name(out_dtype) if out_dtype is not None else in_dtypes[0]
    except ValueError as e:
        _refuse(f"out_dtype: {e}")

    out_fixed = None
    if out_shape is not None:
        if not callable(out_shape):
            try:
                fixed_shape = tuple(int(d) for d in out_shape)
            except (TypeError, ValueError):
                _refuse("out_shape must be a shape (a tuple of ints) or a function of the "
                        f"input's shape, not {out_shape!r}")
        shapes = [_shape_of(x) for x in ports[0]]
        outs_shapes = [tuple(int(d) for d in out_shape(s)) if callable(out_shape)
                       else fixed_shape for s in shapes]
        elems = [_prod(s) for s in shapes]
        ons = [_prod(s) for s in outs_shapes]
        if 0 in ons:
            _refuse(f"out_shape gives an empty output for index {ons.index(0)}",
                    ons.index(0))
        if ons != elems:
            if ons.count(ons[0]) != count:
                i = next(i for i in range(count) if ons[i] != ons[0])
                _refuse(f"out_shape: index 0's output has {ons[0]} elements (its input "
                        f"{elems[0]}), index {i}'s {ons[i]} (its input {elems[i]}): an "
                        "output has the tensor's element count or one fixed count for every "
                        "tensor, as graphrun sizes its buffers", i)
            out_fixed = ons[0]
            if elementwise or rows:
                _refuse(f"{'rows' if rows else 'elementwise'}=True: the output must have the "
                        "input's element count (fn gets chunks and batches of tensors, back "
                        "to back)")
    alias = out_fixed is None and out_t == in_dtypes[0]
    if out_shape is not None:
        if outputs is None and not (inplace and alias):
            # New outputs shaped as out_shape says (the plan would shape them as inputs).
            tt = _arrays._torch()
            port = Port(out_t, None)
            outputs = []
            for x, s in zip(ports[0], outs_shapes):
                lead = x.array if isinstance(x, _arrays.Reinterpreted) else x
                if not (isinstance(lead, np.ndarray) or
                        (tt is not None and isinstance(lead, tt.Tensor))):
                    lead = None
                outputs.append(_plan._allocate(port, s, lead, tt))
    limit = parse_size(fn_memory) if fn_memory is not None else None

    out_row = row_shape
    if rows and out_shape is not None:
        out_row = outs_shapes[0][1:]
        for i, (s, o) in enumerate(zip(shapes, outs_shapes)):
            if o[:1] != s[:1] or o[1:] != out_row:
                _refuse(f"rows=True: out_shape gives {o} for index {i}'s {s}: the output has "
                        f"the input's rows (first dimension), each of one shape ({out_row} "
                        "for index 0)", i)
    cut = elementwise or rows
    kname = _map.kernel(in_dtypes, [c[1] for c in consts], indexed, out_t,
                        out_fixed is not None, cut)
    meter = _map.meter_for(rt._backend, torch, list(rt._devices))
    call = _map.Call(fn, views, torch, in_dtypes, consts, out_t, out_shape, out_fixed, alias,
                     cut, limit, meter)
    if rows:
        call.rows, call.cut = (row_shape, out_row), _prod(row_shape)
    text = _map.spec(kname, call.key, in_dtypes, consts, out_t, out_fixed, alias, indexed)
    fname = getattr(fn, "__qualname__", None) or type(fn).__name__
    graph = Graph.parse(text, name=f"map({fname[:40]})")
    call.shim = _map.Shim(graph, n_in)
    return call, graph, outputs


# ---------------------------------------------------------------------------------------
# Jobs.

Progress = collections.namedtuple("Progress", "total queued in_flight done failed canceled")
_STATES = ("queued", "running", "done", "failed", "canceled")
_SLICE = 0.05  # seconds per wait slice: how soon Ctrl-C and a progress bar are served
_TENSOR_P = ctypes.POINTER(_c.Tensor)


def _row_shape(ports):
    """rows=True: the one shape of every input's rows (all but its first dimension)."""
    row = None
    for p, seq in enumerate(ports):
        for i, x in enumerate(seq):
            s = _shape_of(x)
            if not s:
                _refuse(f"rows=True: input {p} of index {i} has no dimensions: fn gets runs of "
                        "its rows, the slices along its first dimension", i)
            if row is None:
                row = s[1:]
            elif s[1:] != row:
                _refuse(f"rows=True: input {p} of index {i} has rows of shape {s[1:]}, input 0 "
                        f"of index 0 {row}: every input's rows (all but the first dimension) "
                        "must have one shape, as graphrun may give fn rows of several tensors "
                        "in one call", i)
    if _prod(row) == 0:
        _refuse(f"rows=True: rows of shape {row} hold no elements")
    return row


def _per_port(value, n_ports, what, graph):
    """Per-port lists: `value` is a list of one sequence per port, or for a graph of one
    port, that port's sequence of arrays itself."""
    if not isinstance(value, (list, tuple)):
        _refuse(f"{what} must be a list: one sequence of arrays per port of the graph "
                f"({graph.name} has {n_ports}), or for a graph of one port its arrays; "
                f"got {type(value).__name__}")
    items = list(value)
    if items and all(isinstance(x, (list, tuple)) for x in items):
        if len(items) != n_ports:
            _refuse(f"{what}: {len(items)} sequences for the {n_ports} {what[:-1]} port(s) "
                    f"of {graph.name}")
        return [list(x) for x in items]
    if n_ports != 1:
        _refuse(f"{what}: {graph.name} has {n_ports} {what[:-1]} ports: give one sequence "
                "of arrays per port")
    return [items]


class Job:
    """A submitted job (gr_job): every index ends exactly once, done, failed or canceled.
    Iterating over a job yields the indices as they finish (done), then raises the job's
    failure if it has one."""

    def __init__(self):
        raise TypeError("jobs come from Runtime.submit")

    # -- submission

    @classmethod
    def _submit(cls, rt, graph, inputs, outputs, deadline, on_complete, copy, inplace,
                constants=None, mapped=None):
        h = rt._h()
        if _map.in_fn():
            raise InvalidUsage(Status.INVALID_USAGE, "a job submitted from inside a map "
                               "function: it runs on one of the runtime's workers, which a "
                               "job of its own could wait for forever")
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a graphrun.Graph, not {type(graph).__name__}")
        if on_complete is not None and not callable(on_complete):
            raise TypeError("on_complete must be callable (it gets the Job)")
        # A map job's graph has an index port of the package's own: the user's are these.
        ports = mapped.shim if mapped is not None else graph
        n_in, n_out = len(ports.inputs), len(ports.outputs)
        ins = _per_port(inputs, n_in, "inputs", graph)
        count = len(ins[0]) if n_in else 0
        for p, seq in enumerate(ins):
            if len(seq) != count:
                _refuse(f"inputs: port 0 has {count} arrays, port {p} has {len(seq)}")
        outs = None
        if outputs is not None:
            outs = _per_port(outputs, n_out, "outputs", graph)
            for p, seq in enumerate(outs):
                if len(seq) != count:
                    _refuse(f"outputs: port {p} has {len(seq)} arrays for {count} tensors")

        try:
            plan = _plan.build(ports, ins, outs, count, copy, inplace)
            cptrs, ckeep, ccopies = _plan.constants(graph, constants, copy)
        except _plan.Refused as r:
            _refuse(r.message, r.index)
        if mapped is not None:
            mapped.bind(plan, count)

        job = object.__new__(cls)
        job.runtime = rt
        job.graph = graph
        job.count = count
        job._handle = None
        job._lock = threading.Lock()
        job._event = threading.Event()
        job._fd = None
        job._loop_waits = {}  # event loop -> the future __await__ waits on there
        job._finished = False
        job._status = None
        job._error = None
        job._keep = (plan.keep, ckeep, cptrs, mapped and mapped.index_array)
        job._copies = plan.copies + ccopies
        job._map = mapped
        job.fn_memory = None
        job._copy_backs = plan.copy_backs
        job._on_complete = on_complete
        job._results = plan.results
        job._flat = n_out == 1
        job._key = next(_keys)
        opts = _c.job_options_init()
        if deadline is not None:
            opts.deadline_ns = lib.gr_now_ns() + max(1, int(float(deadline) * 1e9))
        opts.on_complete = _on_complete_c
        opts.user = job._key
        if cptrs is not None:
            opts.constants = ctypes.cast(cptrs, ctypes.POINTER(ctypes.c_void_p))
            opts.n_constants = len(cptrs)
        if mapped is not None and mapped.cut > 1:
            opts.cut_elems = mapped.cut  # rows=True: units of whole rows
        with _jobs_lock:
            _jobs[job._key] = job
        out = ctypes.c_void_p()
        err = _c.ErrorInfo()
        st = lib.gr_job_submit(h, graph._handle, plan.tensors.ctypes.data_as(_TENSOR_P), count,
                               ctypes.byref(opts), ctypes.byref(out), ctypes.byref(err))
        if st != 0:
            with _jobs_lock:
                _jobs.pop(job._key, None)
            if st == Status.INVALID_ARGUMENT and plan.defaults_in_place and \
                    b"overlaps output" in err.message:
                # The package's reading of the spec (_spec.py) allowed an alias that the
                # library does not: the same job with its outputs allocated.
                return cls._submit(rt, graph, inputs, outputs, deadline, on_complete, copy,
                                   False, constants, mapped)
            _raise(st, err)
        job._handle = out.value
        job._finalizer = weakref.finalize(job, lib.gr_job_destroy, out.value)
        job._finalizer.atexit = False
        return job

    # -- completion (on the callback thread, or inline where it waits itself)

    def _finish(self, status):
        with self._lock:
            if self._finished:
                return
            self._finished = True
        try:
            self._status = _status(status)
            if self._status != Status.OK:
                self._error = self._read_error()
            for b in self._copy_backs:
                try:
                    _arrays.write_back(b)
                except BaseException:
                    log.exception("graphrun: job %d: copying an output back failed",
                                  self.id)
            if self.runtime._host_cache:
                # The package's own contiguous copies die with the job: the registration
                # cache must not keep their pages (gr_host_forget's promise).
                for b in self._copies:
                    if b.nbytes:
                        st = lib.gr_host_forget(self.runtime._handle, b.ptr, b.nbytes)
                        if st != 0:
                            log.warning("graphrun: job %d: forgetting a copy's memory: %s",
                                        self.id, _status(st).name)
            if self._map is not None:
                # No call of fn comes after the job's completion: its state may go.
                m = self._map
                _map.unregister(m)
                if m.meter is not None:
                    try:
                        self.fn_memory = m.meter.report()
                    except BaseException:
                        log.exception("graphrun: job %d: reading fn's device memory",
                                      self.id)
                m.finish()
            self._keep = self._copies = None
            if self._on_complete is not None:
                try:
                    self._on_complete(self)
                except BaseException:
                    log.exception("graphrun: job %d: on_complete raised", self.id)
        finally:
            with _jobs_lock:
                _jobs.pop(self._key, None)
            # Under the lock fileno() makes its descriptor under: it starts readable or
            # is written here, once either way.
            with self._lock:
                self._event.set()
                if self._fd is not None:
                    os.eventfd_write(self._fd, 1)

    def _read_error(self):
        info = _c.ErrorInfo()
        if lib.gr_job_error_get(self._handle, ctypes.byref(info)) != 0 or info.status == 0:
            return None
        return (int(info.status), info.message.decode(errors="replace"),
                None if info.index == _c.GR_NO_INDEX else int(info.index),
                info.node.decode(errors="replace") or None)

    def _complete_within(self, seconds):
        """True once the job is complete and finished here (its callback has run)."""
        if self._event.is_set():
            return True
        if seconds != 0 and _map.in_fn():
            raise InvalidUsage(Status.INVALID_USAGE, "waiting for a job inside a map "
                               "function: it runs on one of the runtime's workers, which the "
                               "job may need")
        if _on_callback_thread():
            # The callback thread cannot wait for itself: the library's own wait, then the
            # job's completion handled here (its event is still in the queue behind us).
            st = ctypes.c_int()
            ns = -1 if seconds is None else int(seconds * 1e9)
            if lib.gr_job_wait(self._handle, ns, ctypes.byref(st)) != 0:
                return False
            self._finish(st.value)
            return True
        return self._event.wait(seconds)

    # -- the public calls

    @property
    def id(self):
        """The job's number in its runtime's log lines (gr_job_id)."""
        return int(lib.gr_job_id(self._handle))

    def __len__(self):
        return self.count

    def done(self):
        """True once the job is complete and its callback has run."""
        return self._event.is_set()

    def wait(self, timeout=None, progress=False):
        """Waits until the job is complete and its on_complete has returned, or `timeout`
        seconds pass: True when complete, False when not (yet). Never raises the job's
        failure (result() and error() do). progress=True shows a progress bar (tqdm when
        installed, else a line on stderr; "text" forces the line). Ctrl-C (KeyboardInterrupt)
        while waiting cancels the job, waits for it to end, and re-raises."""
        end = None if timeout is None else time.monotonic() + timeout
        bar = _Bar(self, progress) if progress else None
        try:
            while True:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return self._complete_within(0)
                step = _SLICE if left is None else min(_SLICE, left)
                if self._complete_within(step):
                    return True
                if bar is not None:
                    bar.update()
        except KeyboardInterrupt:
            self._stop_after_interrupt()
            raise
        finally:
            if bar is not None:
                bar.close()

    def _stop_after_interrupt(self):
        self.cancel()
        while not self._complete_within(_SLICE):
            pass

    def fileno(self):
        """A file descriptor that becomes readable once the job is complete and finished
        here (done() is True: outputs copied back, on_complete returned), so that an event
        loop can wait for it: selectors, select, or asyncio's
        loop.add_reader(job, callback). Readable at once if the job is done already. The
        job owns it and closes it when the job is collected: do not close it; remove it
        from the loop before dropping the job. Reading it is not needed (a read makes it
        not readable again). Not gr_job_completion_fd's descriptor: the C one turns
        readable when the library's side is complete, before this package has copied
        outputs back on its callback thread. Linux only."""
        with self._lock:
            if self._fd is None:
                fd = os.eventfd(1 if self._event.is_set() else 0,
                                os.EFD_CLOEXEC | os.EFD_NONBLOCK)
                self._fd_finalizer = weakref.finalize(self, os.close, fd)
                self._fd_finalizer.atexit = False
                self._fd = fd
            return self._fd

    def __await__(self):
        """`await job` in a coroutine: the outputs as result() returns them, or the job's
        first failure raised, without blocking the event loop (the loop watches fileno()).
        Any number of coroutines on any number of loops may await one job. Cancelling an
        awaiting task cancels the job (as Ctrl-C does in wait) and raises CancelledError
        there. Linux only."""
        return self._wait_async().__await__()

    async def _wait_async(self):
        import asyncio
        if not self.done():
            loop = asyncio.get_running_loop()
            ready = self._loop_waits.get(loop)
            if ready is None:
                # One reader per loop and descriptor (add_reader keeps only the last), and
                # one future every awaiter on the loop shares.
                ready = loop.create_future()
                fd = self.fileno()

                def readable():
                    loop.remove_reader(fd)
                    self._loop_waits.pop(loop, None)
                    if not ready.done():
                        ready.set_result(None)

                self._loop_waits[loop] = ready
                loop.add_reader(fd, readable)
            try:
                await asyncio.shield(ready)
            except asyncio.CancelledError:
                self.cancel()
                raise
        return self.result(timeout=0)

    def cancel(self):
        """Indices not started end as canceled at once; running ones finish and write
        their outputs (gr_job_cancel). Idempotent."""
        st = lib.gr_job_cancel(self._handle)
        if st != 0:
            _raise(st, message="gr_job_cancel")

    def progress(self):
        """A snapshot: Progress(total, queued, in_flight, done, failed, canceled)."""
        p = _c.job_progress_init()
        st = lib.gr_job_progress_get(self._handle, ctypes.byref(p))
        if st != 0:
            _raise(st, message="gr_job_progress_get")
        done, failed = int(p.done), int(p.failed)
        if self._map is not None and self._map.failures:
            # Indices whose fn failed but that the library counts as done (host backend).
            state, code = ctypes.c_int(), ctypes.c_int()
            moved = 0
            for i in list(self._map.failures):
                if i is not None and lib.gr_job_index_get(
                        self._handle, i, ctypes.byref(state), ctypes.byref(code)) == 0 and \
                        state.value == 2:  # GR_INDEX_DONE
                    moved += 1
            moved = min(moved, done)  # the snapshot may lag the index's own state
            done, failed = done - moved, failed + moved
        return Progress(int(p.total), int(p.queued), int(p.in_flight), done, failed,
                        int(p.canceled))

    def status(self, index):
        """(state, status) of one index: state one of "queued", "running", "done",
        "failed", "canceled"; status a Status (Status.OK until it has ended)."""
        state = ctypes.c_int()
        st = ctypes.c_int()
        r = lib.gr_job_index_get(self._handle, int(index), ctypes.byref(state),
                                 ctypes.byref(st))
        if r != 0:
            _raise(r, message=f"index {index} not below the job's {self.count}")
        name = _STATES[state.value]
        if self._map is not None and name in ("done", "failed") and self._map.failures:
            # fn failed here: on the host backend the library counted the index as done
            # (a CPU kernel cannot fail), on CUDA as failed with the callback's status.
            f = self._map.failures.get(int(index))
            if f is not None:
                return "failed", _status(f.status)
        return name, _status(st.value)

    def error(self, index=None):
        """The job's first failure as an Error (not raised), or None: None also while it is
        still running and nothing has failed yet. For a map job, the first failure of its
        function (a FunctionError with the traceback) comes before the library's. With an
        index: that index's failure (None while it has none): its function's for a map
        job, else an Error of its status, the job's own message when it is the index of
        the job's first failure."""
        if self._event.is_set():
            e = self._error
        else:
            e = self._read_error()
        if index is not None:
            return self._index_error(int(index), e)
        if self._map is not None:
            f = self._map.first_failure()
            if f is not None:
                return _failure_error(f, e)
        return _make_error(*e) if e is not None else None

    def _index_error(self, index, e):
        state, st = self.status(index)
        if state not in ("failed", "canceled"):
            return None
        if self._map is not None:
            f = self._map.failures.get(index)
            if f is None and state == "failed" and e is not None and e[2] == index:
                f = self._map.failures.get(None)  # an elementwise call: the job's
            if f is not None:
                return _failure_error(f, e, index)
        if e is not None and e[2] == index:
            return _make_error(*e)
        return _make_error(st, lib.gr_status_str(int(st)).decode(), index)

    def result(self, timeout=None):
        """Waits (as wait), then returns the outputs, or raises the job's first failure.
        The outputs: for a graph of one output port a list of arrays (one per tensor),
        else a list of one such list per output port; in place they are the very input
        objects. TimeoutError (the built-in) when not
        complete within `timeout`."""
        if not self.wait(timeout):
            raise TimeoutError(f"graphrun job {self.id}: not complete after {timeout} s")
        e = self.error()
        if e is not None:
            raise e
        return self.outputs

    @property
    def outputs(self):
        """The output arrays, in result()'s form, available at once: an index's are
        written when it is done (iterate over the job to know when)."""
        if self._flat:
            return list(self._results[0])
        return [list(r) for r in self._results]

    def __iter__(self):
        try:
            if self._copy_backs:
                # Copied outputs are only in the caller's arrays once the job is complete.
                self.wait()
                yield from (i for i in range(self.count)
                            if self.status(i)[0] == "done")
            else:
                yield from self._iter_live()
        except KeyboardInterrupt:
            self._stop_after_interrupt()
            raise
        e = self.error()
        if e is not None:
            raise e

    def _iter_live(self):
        pending = list(range(self.count))
        seen = 0
        while pending:
            complete = self._complete_within(0)
            p = self.progress()
            ended = p.done + p.failed + p.canceled
            if ended > seen or complete:
                want = len(pending) if complete else ended - seen
                keep, found, done = [], 0, []
                for k, i in enumerate(pending):
                    if found >= want:
                        keep.extend(pending[k:])
                        break
                    state, _ = self.status(i)
                    if state in ("done", "failed", "canceled"):
                        found += 1
                        if state == "done":
                            done.append(i)
                    else:
                        keep.append(i)
                seen += found
                pending = keep
                yield from done
            if complete:
                break  # every index has ended: none is left in pending
            if pending:
                self._complete_within(_SLICE)
        self.wait()

    def __repr__(self):
        state = "complete" if self.done() else "running"
        return f"<graphrun.Job {self.id}: {self.count} tensors, {state}>"


def _failure_error(f, cerr, index=None):
    """The exception of a map failure (_map.Failure); an elementwise call's, which covers no
    one index, takes the library's index for it."""
    if index is None:
        index = f.index
        if index is None and cerr is not None and cerr[0] == Status.CUDA:
            index = cerr[2]
    if f.status == Status.CUDA:
        return FunctionError(f.status, f.message, index, "fn", f.traceback)
    return _make_error(f.status, f.message, index, "fn")


class _Bar:
    """A progress bar over a job's ended indices: tqdm when installed, else one stderr
    line rewritten in place."""

    def __init__(self, job, kind):
        self.job, self.n = job, 0
        self.tqdm = None
        if kind != "text":
            try:
                from tqdm import tqdm
                self.tqdm = tqdm(total=job.count, unit="tensor", desc="graphrun")
            except ImportError:
                pass
        self.update()

    def update(self):
        p = self.job.progress()
        n = p.done + p.failed + p.canceled
        if self.tqdm is not None:
            if n > self.n:
                self.tqdm.update(n - self.n)
        else:
            sys.stderr.write(f"\rgraphrun: {n}/{p.total} tensors "
                             f"({p.failed} failed, {p.canceled} canceled)")
            sys.stderr.flush()
        self.n = n

    def close(self):
        self.update()
        if self.tqdm is not None:
            self.tqdm.close()
        else:
            sys.stderr.write("\n")
            sys.stderr.flush()
