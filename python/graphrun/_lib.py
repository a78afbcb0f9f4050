"""The C library through ctypes: where it is found, and graphrun.h's types and functions
(with the few of graphrun_testing.h and graphrun_workloads.h the package uses).

Why ctypes (not cffi, not a compiled extension): it is in the standard library, so the
package is plain Python that needs no compiler and no third-party package on the user's
machine, and it releases the GIL around every foreign call, which is what the runtime's
blocking calls (submit under backpressure, wait, destroy) need. The cost is that the
structs are written twice, here and in graphrun.h; test_struct_layouts_match_the_header
(python/tests/test_runtime.py) compiles a program against the installed header and checks
every size and offset against these.

Where the library comes from, first found wins:
  1. $GRAPHRUN_LIBRARY, a path to libgraphrun.so.0 (or any soname-compatible build): an
     explicit choice overrides every other;
  2. inside the package, graphrun/libgraphrun.so.0: the wheel tools/wheel builds carries
     it there;
  3. beside an installed package: tools/install PREFIX puts this package in
     PREFIX/lib/python3/site-packages and the library in PREFIX/lib;
  4. the dynamic loader's search (LD_LIBRARY_PATH, ldconfig's cache): libgraphrun.so.0.
"""
import ctypes
import os

SONAME = "libgraphrun.so.0"

# Mirrors graphrun.h (0.4). Enums are C ints.
GR_MAX_PORTS = 4
GR_MAX_DIMS = 4
GR_MAX_KERNEL_INPUTS = 4
GR_MAX_SCALARS = 8
GR_MAX_CONSTS = 8
GR_NAME_MAX = 31
GR_HISTOGRAM_BUCKETS = 28
GR_NO_INDEX = 2**64 - 1
GR_WAIT_FOREVER = -1
GR_NO_DEADLINE = 0
GR_CONFIG_MAGIC = 0x67724346
GR_JOB_OPTIONS_MAGIC = 0x67724A4F
GR_STATS_MAGIC = 0x67725354
GR_RUNTIME_INFO_MAGIC = 0x67725249
GR_JOB_PROGRESS_MAGIC = 0x67724A50
GR_KERNEL_INFO_MAGIC = 0x67724B49

c_enum = ctypes.c_int


class ErrorInfo(ctypes.Structure):
    _fields_ = [
        ("status", c_enum),
        ("index", ctypes.c_uint64),
        ("node", ctypes.c_char * 32),
        ("message", ctypes.c_char * 256),
    ]


LOG_CALLBACK = ctypes.CFUNCTYPE(None, c_enum, ctypes.c_char_p, ctypes.c_void_p)
JOB_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, c_enum, ctypes.c_void_p)


class Config(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("magic", ctypes.c_uint32),
        ("backend", c_enum),
        ("budget_bytes", ctypes.c_uint64),
        ("workers_per_device", ctypes.c_uint32),
        ("ring_capacity", ctypes.c_uint32),
        ("host_devices", ctypes.c_uint32),
        ("context_mode", c_enum),
        ("copy_threads", ctypes.c_uint32),
        ("staging_bytes", ctypes.c_uint64),
        ("batch_below_bytes", ctypes.c_uint64),
        ("split_tensors", ctypes.c_uint32),
        ("testing_", ctypes.c_char_p),  # private: gr_testing_set_fault_plan sets it
        ("log_callback", LOG_CALLBACK),
        ("log_user", ctypes.c_void_p),
        ("log_level", c_enum),
        ("devices", ctypes.POINTER(ctypes.c_int)),
        ("device_count", ctypes.c_uint32),
        ("pipeline_bytes", ctypes.c_uint64),
        ("host_cache_bytes", ctypes.c_uint64),
    ]


def config_init():
    """GR_CONFIG_INIT."""
    c = Config()
    c.struct_size = ctypes.sizeof(Config)
    c.magic = GR_CONFIG_MAGIC
    c.backend = 0
    c.budget_bytes = 0
    c.workers_per_device = 3
    c.ring_capacity = 4096
    c.host_devices = 1
    c.context_mode = 0
    c.copy_threads = 0
    c.staging_bytes = 64 << 20
    c.batch_below_bytes = 1 << 20
    c.split_tensors = 1
    c.log_level = 1  # GR_LOG_INFO
    c.device_count = 0
    c.pipeline_bytes = 128 << 20
    c.host_cache_bytes = 0
    return c


class RuntimeInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("magic", ctypes.c_uint32),
        ("backend", c_enum),
        ("device_count", ctypes.c_uint32),
        ("workers_per_device", ctypes.c_uint32),
        ("budget_bytes", ctypes.c_uint64),
        ("backend_note", ctypes.c_char * 128),
    ]


def runtime_info_init():
    """GR_RUNTIME_INFO_INIT."""
    i = RuntimeInfo()
    i.struct_size = ctypes.sizeof(RuntimeInfo)
    i.magic = GR_RUNTIME_INFO_MAGIC
    return i


class Histogram(ctypes.Structure):
    _fields_ = [
        ("count", ctypes.c_uint64),
        ("sum_ns", ctypes.c_uint64),
        ("buckets", ctypes.c_uint64 * GR_HISTOGRAM_BUCKETS),
    ]


class Stats(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("magic", ctypes.c_uint32),
        ("device_count", ctypes.c_uint32),
        ("devices_lost", ctypes.c_uint32),
        ("jobs_submitted", ctypes.c_uint64),
        ("jobs_completed", ctypes.c_uint64),
        ("jobs_failed", ctypes.c_uint64),
        ("nodevice_failed", ctypes.c_uint64),
        ("nodevice_canceled", ctypes.c_uint64),
        ("device", ctypes.c_uint32),
        ("lost", ctypes.c_uint32),
        ("workers", ctypes.c_uint32),
        ("workers_retired", ctypes.c_uint32),
        ("tensors_done", ctypes.c_uint64),
        ("tensors_failed", ctypes.c_uint64),
        ("tensors_canceled", ctypes.c_uint64),
        ("iterations_done", ctypes.c_uint64),
        ("iterations_failed", ctypes.c_uint64),
        ("graph_instantiations", ctypes.c_uint64),
        ("graph_updates", ctypes.c_uint64),
        ("bytes_h2d", ctypes.c_uint64),
        ("bytes_d2h", ctypes.c_uint64),
        ("budget_bytes", ctypes.c_uint64),
        ("budget_in_use", ctypes.c_uint64),
        ("budget_peak", ctypes.c_uint64),
        ("budget_wait", Histogram),
        ("iteration", Histogram),
        ("staging_pageable", ctypes.c_uint64),
        ("units_direct", ctypes.c_uint64),
        ("units_staged", ctypes.c_uint64),
        ("units_scattered", ctypes.c_uint64),
        ("host_cache_bytes", ctypes.c_uint64),
        ("host_cache_registrations", ctypes.c_uint64),
        ("host_cache_evictions", ctypes.c_uint64),
        ("host_cache_failures", ctypes.c_uint64),
        ("host_cache_hits", ctypes.c_uint64),
        ("host_cache_register_ns", ctypes.c_uint64),
        ("units_overlapped", ctypes.c_uint64),
        ("copies_refused", ctypes.c_uint64),
        ("constants_copied", ctypes.c_uint64),
        ("constant_bytes", ctypes.c_uint64),
        ("units_streamed", ctypes.c_uint64),
    ]


def stats_init():
    """GR_STATS_INIT."""
    s = Stats()
    s.struct_size = ctypes.sizeof(Stats)
    s.magic = GR_STATS_MAGIC
    return s


class PortInfo(ctypes.Structure):
    _fields_ = [("dtype", c_enum), ("fixed_elems", ctypes.c_uint64)]


class Tensor(ctypes.Structure):
    _fields_ = [
        ("in_", ctypes.c_void_p * GR_MAX_PORTS),
        ("out", ctypes.c_void_p * GR_MAX_PORTS),
        ("elems", ctypes.c_uint64),
        ("rank", ctypes.c_uint32),
        ("shape", ctypes.c_uint64 * GR_MAX_DIMS),
    ]


class JobOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("magic", ctypes.c_uint32),
        ("deadline_ns", ctypes.c_int64),
        ("on_complete", JOB_CALLBACK),
        ("user", ctypes.c_void_p),
        ("constants", ctypes.POINTER(ctypes.c_void_p)),
        ("n_constants", ctypes.c_uint32),
        ("notify", ctypes.c_uint32),
        ("cut_elems", ctypes.c_uint64),
    ]


def job_options_init():
    """GR_JOB_OPTIONS_INIT."""
    o = JobOptions()
    o.struct_size = ctypes.sizeof(JobOptions)
    o.magic = GR_JOB_OPTIONS_MAGIC
    o.deadline_ns = GR_NO_DEADLINE
    return o


class JobProgress(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("magic", ctypes.c_uint32)] + \
        [(n, ctypes.c_uint64)
         for n in ("total", "queued", "in_flight", "done", "failed", "canceled")]


def job_progress_init():
    """GR_JOB_PROGRESS_INIT."""
    p = JobProgress()
    p.struct_size = ctypes.sizeof(JobProgress)
    p.magic = GR_JOB_PROGRESS_MAGIC
    return p


class ConstInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * (GR_NAME_MAX + 1)),
        ("dtype", c_enum),
        ("elems", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("rank", ctypes.c_uint32),
        ("shape", ctypes.c_uint64 * GR_MAX_DIMS),
    ]


class KernelInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("magic", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("n_inputs", ctypes.c_uint32),
        ("n_scalars", ctypes.c_uint32),
        ("elementwise", ctypes.c_int),
        ("doc", ctypes.c_char_p),
        ("out_dtype", c_enum),
        ("in_dtype", c_enum * GR_MAX_KERNEL_INPUTS),
    ]


def kernel_info_init():
    """GR_KERNEL_INFO_INIT."""
    k = KernelInfo()
    k.struct_size = ctypes.sizeof(KernelInfo)
    k.magic = GR_KERNEL_INFO_MAGIC
    return k


# The kernel definition and arguments: not part of the package's API, but the tests
# register a CPU kernel of their own through them (python/tests/gate.py).
class Scalar(ctypes.Union):
    _fields_ = [("f32", ctypes.c_float), ("f64", ctypes.c_double), ("i32", ctypes.c_int32),
                ("i64", ctypes.c_int64)]


class KernelArgs(ctypes.Structure):
    _fields_ = [
        ("out", ctypes.c_void_p),
        ("in_", ctypes.c_void_p * GR_MAX_KERNEL_INPUTS),
        ("n", ctypes.c_uint64),
        ("in_n", ctypes.c_uint64 * GR_MAX_KERNEL_INPUTS),
        ("s", Scalar * GR_MAX_SCALARS),
        ("shape", ctypes.c_uint64 * GR_MAX_DIMS),
        ("rank", ctypes.c_uint32),
        ("reserved_", ctypes.c_uint32),
    ]


KERNEL_CPU_FN = ctypes.CFUNCTYPE(None, ctypes.POINTER(KernelArgs), ctypes.c_void_p)
# gr_kernel_launch_fn: int fn(void *stream, const gr_kernel_args *a, void *user).
KERNEL_LAUNCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(KernelArgs),
                                    ctypes.c_void_p)

# gr_cuda_kind and gr_out_size values the package uses (Runtime.map's kernels).
GR_CUDA_NONE = 0
GR_CUDA_STREAM = 6
GR_OUT_ELEMS = 0
GR_OUT_ONE = 1


class KernelDef(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("magic", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("doc", ctypes.c_char_p),
        ("n_inputs", ctypes.c_uint32),
        ("n_scalars", ctypes.c_uint32),
        ("out_dtype", c_enum),
        ("in_dtype", c_enum * GR_MAX_KERNEL_INPUTS),
        ("scalar_dtype", c_enum * GR_MAX_SCALARS),
        ("elementwise", ctypes.c_int),
        ("cpu", KERNEL_CPU_FN),
        ("cuda_kind", c_enum),
        ("cuda", ctypes.c_void_p),
        ("cuda_block", ctypes.c_uint32),
        ("cuda_blocks_per_sm", ctypes.c_uint32),
        ("user", ctypes.c_void_p),
        ("out_size", c_enum),
        ("small_inputs", ctypes.c_uint32),
        ("cuda_max_blocks", ctypes.c_uint32),
        ("cuda_name", ctypes.c_char_p),
        # void (*destroy)(void *user): left NULL, the map kernels live for the process.
        ("destroy", ctypes.c_void_p),
    ]


GR_KERNEL_DEF_MAGIC = 0x67724B44

_P = ctypes.c_void_p
_ERR = ctypes.POINTER(ErrorInfo)
_PP = ctypes.POINTER(ctypes.c_void_p)
# name: (restype, argtypes)
_FUNCTIONS = {
    "gr_version": (ctypes.c_char_p, []),
    "gr_version_number": (ctypes.c_uint32, []),
    "gr_status_str": (ctypes.c_char_p, [c_enum]),
    "gr_now_ns": (ctypes.c_int64, []),
    "gr_backend_name": (ctypes.c_char_p, [c_enum]),
    "gr_backend_probe": (c_enum, [c_enum, ctypes.POINTER(ctypes.c_uint32),
                                  ctypes.POINTER(c_enum), _ERR]),
    "gr_log_level_name": (ctypes.c_char_p, [c_enum]),
    "gr_runtime_create": (c_enum, [ctypes.POINTER(Config), _PP, _ERR]),
    "gr_testing_set_fault_plan": (c_enum, [ctypes.POINTER(Config), ctypes.c_char_p]),
    "gr_runtime_shutdown": (None, [_P]),
    "gr_runtime_destroy": (None, [_P]),
    "gr_runtime_info_get": (c_enum, [_P, ctypes.POINTER(RuntimeInfo)]),
    "gr_runtime_device_ordinal": (c_enum, [_P, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int)]),
    "gr_runtime_stats_get": (c_enum, [_P, ctypes.c_uint32, ctypes.POINTER(Stats)]),
    "gr_runtime_stats_prometheus": (ctypes.c_size_t, [_P, ctypes.c_char_p, ctypes.c_size_t]),
    "gr_host_alloc": (c_enum, [ctypes.c_uint64, _PP]),
    "gr_host_free": (None, [_P]),
    "gr_host_forget": (c_enum, [_P, _P, ctypes.c_uint64]),
    "gr_dtype_name": (ctypes.c_char_p, [c_enum]),
    "gr_dtype_size": (ctypes.c_uint32, [c_enum]),
    "gr_graph_destroy": (None, [_P]),
    "gr_graph_error_get": (c_enum, [_P, _ERR]),
    "gr_graph_create_seed": (c_enum, [_PP]),  # graphrun_workloads.h
    "gr_graph_parse": (c_enum, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, _PP, _ERR]),
    "gr_graph_load": (c_enum, [ctypes.c_char_p, _PP, _ERR]),
    "gr_graph_input_count": (ctypes.c_uint32, [_P]),
    "gr_graph_output_count": (ctypes.c_uint32, [_P]),
    "gr_graph_port_get": (c_enum, [_P, ctypes.c_int, ctypes.c_uint32,
                                   ctypes.POINTER(PortInfo)]),
    "gr_graph_footprint": (c_enum, [_P, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)]),
    "gr_graph_const_count": (ctypes.c_uint32, [_P]),
    "gr_graph_const_get": (c_enum, [_P, ctypes.c_uint32, ctypes.POINTER(ConstInfo)]),
    "gr_kernel_count": (ctypes.c_uint32, []),
    "gr_kernel_info_get": (c_enum, [ctypes.c_uint32, ctypes.POINTER(KernelInfo)]),
    "gr_kernel_register": (c_enum, [ctypes.POINTER(KernelDef), _ERR]),
    "gr_kernel_unregister": (c_enum, [ctypes.c_char_p, _ERR]),
    "gr_job_submit": (c_enum, [_P, _P, ctypes.POINTER(Tensor), ctypes.c_uint64,
                               ctypes.POINTER(JobOptions), _PP, _ERR]),
    "gr_job_wait": (c_enum, [_P, ctypes.c_int64, ctypes.POINTER(c_enum)]),
    "gr_job_cancel": (c_enum, [_P]),
    "gr_job_progress_get": (c_enum, [_P, ctypes.POINTER(JobProgress)]),
    "gr_job_index_get": (c_enum, [_P, ctypes.c_uint64, ctypes.POINTER(c_enum),
                                  ctypes.POINTER(c_enum)]),
    "gr_job_error_get": (c_enum, [_P, _ERR]),
    "gr_job_is_complete": (ctypes.c_int, [_P]),
    "gr_job_id": (ctypes.c_uint64, [_P]),
    "gr_job_destroy": (None, [_P]),
}


def _candidates():
    env = os.environ.get("GRAPHRUN_LIBRARY")
    if env:
        return [("$GRAPHRUN_LIBRARY", env)]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    inside = os.path.join(here, SONAME)
    if os.path.exists(inside):
        out.append(("the package (a wheel's)", inside))
    # PREFIX/lib/python3/site-packages/graphrun -> PREFIX/lib
    beside = os.path.normpath(os.path.join(here, "..", "..", "..", SONAME))
    if os.path.exists(beside):
        out.append(("the install prefix", beside))
    out.append(("the dynamic loader's search path", SONAME))
    return out


def load():
    """Loads the library and declares its functions; raises ImportError saying what was
    tried when it cannot be loaded."""
    tried = []
    for where, path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({where}): {e}")
            continue
        for name, (res, args) in _FUNCTIONS.items():
            try:
                f = getattr(lib, name)
            except AttributeError:
                # Before 0.3 the library had no gr_version: an older one lacks that first.
                raise ImportError(
                    f"graphrun: the C library {path} ({where}) has no {name}: it is older "
                    "than this package; install the library of the package's version "
                    "(graphrun.__version__), or point GRAPHRUN_LIBRARY at it") from None
            f.restype = res
            f.argtypes = args
        lib.graphrun_path = path
        return lib
    raise ImportError(
        "graphrun: cannot load the C library " + SONAME + "; tried: " + "; ".join(tried) +
        ". Install the wheel that carries it (tools/wheel, then pip install "
        "graphrun-*.whl), or install it with tools/install PREFIX (and use "
        "PREFIX/lib/python3/site-packages), or set GRAPHRUN_LIBRARY to the library's path")


def check_version(library, package):
    """Raises ImportError unless the library's version (gr_version()) has the package's
    major.minor: the structs above are laid out as that version's header lays them out, and
    a library of another minor version may lay them out otherwise. Patch versions may
    differ."""
    if library.split(".")[:2] != package.split(".")[:2]:
        raise ImportError(
            f"graphrun: the C library {lib.graphrun_path} is version {library}, this package "
            f"is {package}: their major.minor must be the same. Install the library of the "
            "package's version (the wheel carries it; tools/install PREFIX installs both), "
            "or point GRAPHRUN_LIBRARY at it")


lib = load()
