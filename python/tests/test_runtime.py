"""Runtimes, graphs, pinned memory and the library itself, from Python."""
import gc
import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import graphrun
from graphrun import _pinned
from helpers import example, rand, same_bits, seed_ref, torch, HERE

PAGE = os.sysconf("SC_PAGESIZE")


# ---------------------------------------------------------------------------------------
# Runtimes.

def test_info_reports_the_config(new_runtime):
    rt = new_runtime(backend="host", budget="3MiB", workers=2, host_devices=3, devices=[2, 0])
    i = rt.info()
    assert (i.backend, i.device_count, i.workers_per_device, i.budget_bytes) == \
        ("host", 2, 2, 3 << 20)
    assert i.devices == (2, 0)
    assert i.backend_note
    s = rt.stats()
    assert s["device_count"] == 2 and len(s["devices"]) == 2
    assert [d["workers"] for d in s["devices"]] == [2, 2]
    assert all(d["budget_bytes"] == 3 << 20 for d in s["devices"])


def test_budget_units():
    assert graphrun.parse_size("2GiB") == 2 << 30
    assert graphrun.parse_size("2g") == 2 << 30
    assert graphrun.parse_size("1.5MiB") == 3 << 19
    assert graphrun.parse_size("64MB") == 64_000_000
    assert graphrun.parse_size(4096) == 4096
    for bad in ("2 parsecs", "-1G", "G", ""):
        with pytest.raises(ValueError):
            graphrun.parse_size(bad)
    with pytest.raises(TypeError):
        graphrun.parse_size(1.5)


@pytest.mark.parametrize("kw, words", [
    (dict(budget=0), "budget"),
    (dict(workers=0), "workers"),
    (dict(ring_capacity=3), "ring_capacity"),
    (dict(devices=[5]), "5"),
    (dict(devices=[0, 0]), "0"),
    (dict(host_devices=0), "host_devices"),
    (dict(fault_plan="nonsense:1"), "nonsense"),
])
def test_bad_config_names_the_field(kw, words):
    kw.setdefault("budget", "1MiB")
    with pytest.raises(graphrun.InvalidArgument) as e:
        graphrun.Runtime(backend="host", **kw)
    assert words in e.value.message, e.value.message


def test_bad_python_arguments():
    for kw in (dict(backend="tpu"), dict(contexts="shared"), dict(log_level="loud")):
        with pytest.raises(ValueError):
            graphrun.Runtime(budget="1MiB", **kw)


def test_cuda_backend_unavailable_here():
    p = graphrun.probe("cuda")
    if p.available:
        pytest.skip(f"a usable GPU is here ({p.devices} devices)")
    with pytest.raises(graphrun.Unavailable) as e:
        graphrun.Runtime(budget="64MiB", backend="cuda")
    assert e.value.status == graphrun.Status.UNAVAILABLE
    rt = graphrun.Runtime(budget="64MiB", backend="auto")
    try:
        i = rt.info()
        assert i.backend == "host" and i.backend_note
    finally:
        rt.close()


def test_probe():
    p = graphrun.probe("host")
    assert p == graphrun.Probe(True, "host", 1, "")
    a = graphrun.probe()
    assert a.available and a.backend in ("host", "cuda")
    c = graphrun.probe("cuda")
    assert c.available == (a.backend == "cuda")
    with pytest.raises(ValueError):
        graphrun.probe("tpu")


def test_stats_count_the_work(new_runtime, backend):
    rt = new_runtime(backend=backend)
    xs = [rand(10_000, seed=i) for i in range(6)]
    rt.run(graphrun.seed(), xs)
    s = rt.stats()
    assert s["jobs_submitted"] == 1 and s["jobs_completed"] == 1 and s["jobs_failed"] == 0
    d = s["devices"][0]
    assert d["tensors_done"] == 6
    assert d["bytes_h2d"] == d["bytes_d2h"] == 6 * 10_000 * 4
    assert d["budget_in_use"] == 0 and 0 < d["budget_peak"] <= d["budget_bytes"]
    assert d["iteration"]["count"] == d["iterations_done"] > 0
    assert d["units_direct"] + d["units_staged"] + d["units_scattered"] + \
        d["units_streamed"] == d["iterations_done"]
    assert len(d["iteration"]["buckets"]) == 28
    text = rt.prometheus()
    assert 'graphrun_jobs_completed_total 1' in text or 'graphrun_jobs_completed 1' in text, \
        text[:2000]
    assert f'backend="{backend}"' in text


def own_pages(n, seed):
    """A float32 array of n elements (n * 4 a multiple of the page size) on pages no other
    array shares, over a larger NumPy buffer."""
    buf = np.empty(n * 4 + PAGE, np.uint8)
    at = -buf.ctypes.data % PAGE
    x = buf[at:at + n * 4].view(np.float32)
    x[:] = rand(n, seed=seed)
    return x


def test_host_cache_registers_pageable_arrays_used_again(new_runtime, backend):
    """The registration cache (gr_config.host_cache_bytes): on CUDA the second job over the
    same pageable arrays finds them registered; on the host backend there is no pinned
    memory and the cache stays empty. forget unregisters, and refuses what is not an
    array."""
    rt = new_runtime(backend=backend, host_cache="256MiB")
    # Arrays on whole pages of their own, each registered alone (arrays that share a page
    # are registered together: test_host_cache_registers_arrays_sharing_a_page).
    n = 10 << 20  # 40 MiB, whole pages
    xs = [own_pages(n, seed=i) for i in range(4)]
    ref = [seed_ref(x) for x in xs]
    rt.run(graphrun.seed(), xs, inplace=True)  # the same memory in and out, each job
    if backend == "cuda":
        for _ in range(1000):  # registered between jobs, in the background
            if rt.stats()["host_cache_registrations"] == 4:
                break
            time.sleep(0.01)
    before = rt.stats()
    for i, x in enumerate(xs):  # the same memory, fresh inputs
        x[:] = rand(n, seed=i)
    rt.run(graphrun.seed(), xs, inplace=True)
    for x, r in zip(xs, ref):
        assert np.array_equal(x.view(np.uint32), r.view(np.uint32))
    s = rt.stats()
    if backend == "cuda":
        assert before["host_cache_registrations"] == 4
        assert s["host_cache_hits"] == 4
        assert s["host_cache_bytes"] == 4 * n * 4
    else:
        assert s["host_cache_registrations"] == s["host_cache_hits"] == 0
        assert s["host_cache_bytes"] == 0
    for x in xs:
        rt.forget(x)
    assert rt.stats()["host_cache_bytes"] == 0
    with pytest.raises(TypeError):
        rt.forget(object())


def test_host_cache_registers_arrays_sharing_a_page(new_runtime, backend):
    """Arrays back to back that share a page, as the heap lays them out (glibc does even for
    40 MB ones once the process has raised its mmap threshold): one registration covers
    both, and the next job copies both by DMA."""
    rt = new_runtime(backend=backend, host_cache="256MiB")
    n = 3 << 18  # 3 MiB a tensor
    buf = np.empty(2 * n * 4 + 2 * PAGE, np.uint8)
    at = -buf.ctypes.data % PAGE + 16
    xs = [buf[at:at + n * 4].view(np.float32), buf[at + n * 4 + 64:at + 2 * n * 4 + 64].view(np.float32)]
    assert (xs[0].ctypes.data + xs[0].nbytes - 1) // PAGE == xs[1].ctypes.data // PAGE
    for i, x in enumerate(xs):
        x[:] = rand(n, seed=i)
    ref = [seed_ref(seed_ref(x)) for x in xs]
    rt.run(graphrun.seed(), xs, inplace=True)
    if backend == "cuda":
        for _ in range(1000):
            if rt.stats()["host_cache_registrations"] == 1:
                break
            time.sleep(0.01)
    before = rt.stats()
    rt.run(graphrun.seed(), xs, inplace=True)
    for x, r in zip(xs, ref):
        assert np.array_equal(x.view(np.uint32), r.view(np.uint32))
    s = rt.stats()
    if backend == "cuda":
        assert s["host_cache_registrations"] == 1  # one range over both
        assert s["host_cache_hits"] == 1           # the second job's, both inside it
        # both copied by DMA
        assert s["devices"][0]["units_staged"] == before["devices"][0]["units_staged"]
        assert s["host_cache_bytes"] >= 2 * n * 4
    else:
        assert s["host_cache_registrations"] == s["host_cache_hits"] == 0
    rt.forget(xs[0])  # the registration both share goes with either
    assert rt.stats()["host_cache_bytes"] == 0


def test_log_lines_reach_python_logging(caplog):
    with caplog.at_level(logging.DEBUG, logger="graphrun"):
        rt = graphrun.Runtime(budget="1MiB", backend="host", log_level="debug")
        rt.run(graphrun.seed(), [rand(10)])
        rt.close()
    lines = [r for r in caplog.records if r.name == "graphrun"]
    assert any(r.levelno == logging.INFO and "host" in r.getMessage() for r in lines), lines
    assert any(r.levelno == logging.DEBUG for r in lines)
    assert all(r.threadName == "graphrun-callbacks" for r in lines)


def test_silent_without_log_level(caplog):
    with caplog.at_level(logging.DEBUG, logger="graphrun"):
        rt = graphrun.Runtime(budget="1MiB", backend="host")
        rt.run(graphrun.seed(), [rand(10)])
        rt.close()
    assert not [r for r in caplog.records if r.name == "graphrun"]


def test_out_of_memory_statuses():
    # Fault injection (docs/RELIABILITY.md): the first allocation fails create; an arena
    # placement fails one tensor of a job, the rest run.
    with pytest.raises(graphrun.OutOfMemory) as e:
        graphrun.Runtime(budget="1MiB", backend="host", fault_plan="alloc:1")
    assert isinstance(e.value, MemoryError)
    rt = graphrun.Runtime(budget="1MiB", backend="host", workers=1, fault_plan="arena:2",
                          batch_below=0)  # one tensor, one placement
    try:
        xs = [rand(100, seed=i) for i in range(3)]
        x0 = [x.copy() for x in xs]
        job = rt.submit(graphrun.seed(), xs, inplace=True)  # the failed index: untouched
        job.wait(10)
        e = job.error()
        assert isinstance(e, graphrun.OutOfMemory) and e.index == 1, e
        assert "injected" in e.message
        assert job.status(1) == ("failed", graphrun.Status.OUT_OF_MEMORY)
        assert same_bits(xs[1], x0[1])
        assert same_bits(xs[0], seed_ref(x0[0])) and same_bits(xs[2], seed_ref(x0[2]))
    finally:
        rt.close()


def test_unavailable_kernel_names_the_node(new_runtime):
    # A spec of NVRTC kernels (no CPU versions): refused at load without NVRTC, at submit
    # on the host backend with it; either way Unavailable, saying why.
    rt = new_runtime(backend="host")
    try:
        g = graphrun.Graph.load(example("user_kernel.graph"))
    except graphrun.Unavailable as e:
        assert "NVRTC" in e.message
        return
    with pytest.raises(graphrun.Unavailable) as e:
        rt.submit(g, [rand(10)])
    assert "scaled_square" in e.value.message or "sq" in e.value.message


def test_runtime_freed_by_the_collector():
    import weakref
    rt = graphrun.Runtime(budget="1MiB", backend="host")
    rt.run(graphrun.seed(), [rand(10)])
    r = weakref.ref(rt)
    del rt
    gc.collect()
    assert r() is None


def test_many_runtimes_at_once():
    rts = [graphrun.Runtime(budget="1MiB", backend="host", workers=1) for _ in range(4)]
    xs = [[rand(500, seed=10 * k + i) for i in range(3)] for k in range(4)]
    want = [[seed_ref(x) for x in row] for row in xs]
    jobs = [rt.submit(graphrun.seed(), row) for rt, row in zip(rts, xs)]
    for rt in rts:
        rt.close()
    assert all(j.done() and j.error() is None for j in jobs)
    assert all(same_bits(y, w) for j, wr in zip(jobs, want) for y, w in zip(j.result(), wr))


# ---------------------------------------------------------------------------------------
# Graphs.

def test_graph_ports():
    s = graphrun.seed()
    assert s.inputs == (graphrun.Port("float32", None),) and s.outputs == s.inputs
    assert s.in_place == (frozenset({0}),)
    p = graphrun.Graph.load(example("preprocess.graph"))
    assert p.inputs == (graphrun.Port("uint8", None), graphrun.Port("float32", 3),
                        graphrun.Port("float32", 3))
    assert p.outputs == (graphrun.Port("float32", None),)
    assert p.in_place == (frozenset(),)
    assert "uint8" in repr(p)
    assert s.footprint(1000) == 4096  # one buffer of 4000 bytes, rounded to 256
    with pytest.raises(graphrun.InvalidArgument):
        s.footprint(0)


def test_parse_errors_point_at_the_line():
    with pytest.raises(graphrun.InvalidArgument) as e:
        graphrun.Graph.parse("buffer x\nh2d load in0 -> x\n", "bad.graph")
    assert e.value.message.startswith("bad.graph:2:"), e.value.message
    with pytest.raises(graphrun.InvalidArgument) as e:
        graphrun.Graph.parse(b"buffer x\nkernel k: nosuch(x) -> x\n")
    assert "nosuch" in e.value.message
    with pytest.raises(graphrun.InvalidArgument) as e:
        graphrun.Graph.parse('cuda "x.cu"\n')
    assert "cuda" in e.value.message
    with pytest.raises(graphrun.InvalidArgument) as e:
        graphrun.Graph.load("/nonexistent/x.graph")
    assert "/nonexistent/x.graph" in e.value.message


def test_graph_closed_while_a_job_uses_it(rt):
    g = graphrun.Graph.load(example("seed_unfused.graph"))
    xs = [rand(200_000, seed=i) for i in range(4)]
    want = [seed_ref(x) for x in xs]
    job = rt.submit(g, xs)
    g.close()
    g.close()
    assert all(same_bits(y, w) for y, w in zip(job.result(30), want))


def test_kernels_listed():
    ks = graphrun.kernels()
    names = {k.name for k in ks}
    assert {"seed", "mul", "cast", "softmax", "sum", "normalize"} <= names
    muls = {(k.out_dtype, k.in_dtypes) for k in ks if k.name == "mul"}
    assert ("float16", ("float16",)) in muls and ("float32", ("float32",)) in muls


# ---------------------------------------------------------------------------------------
# Pinned memory.

def test_pinned_empty_and_freed_with_the_last_view():
    gc.collect()  # garbage of earlier tests would be freed during this one
    before = dict(_pinned.live)
    a = graphrun.pinned_empty((3, 5), "float64")
    assert a.shape == (3, 5) and a.dtype == np.float64 and a.flags.c_contiguous
    assert a.ctypes.data % 4096 == 0
    a[...] = 7
    assert _pinned.live["blocks"] == before["blocks"] + 1
    assert _pinned.live["bytes"] == before["bytes"] + 120
    v = a[1:]
    del a
    gc.collect()
    assert _pinned.live["blocks"] == before["blocks"] + 1 and np.all(v == 7)
    del v
    gc.collect()
    assert _pinned.live == before
    for t in ("float32", "float16", "int32", "uint8", np.float32, np.dtype("i4")):
        assert graphrun.pinned_empty(4, t).size == 4
    z = graphrun.pinned_empty(0, "float32")
    assert z.size == 0
    with pytest.raises(ValueError):
        graphrun.pinned_empty(4, "complex64")
    with pytest.raises(ValueError):
        graphrun.pinned_empty(4, ">f4")


def test_pinned_copies(rt):
    x = rand(1000, seed=3)
    p = graphrun.pinned(x)
    assert p is not x and same_bits(p, x) and p.ctypes.data % 4096 == 0
    want = seed_ref(x)
    (y,) = rt.run(graphrun.seed(), [p])  # pinned in, pinned out
    assert _pinned.is_pinned(y) and same_bits(y, want) and same_bits(p, x)
    rt.run(graphrun.seed(), [p], inplace=True)
    assert same_bits(p, want) and not same_bits(x, want)


def test_pinned_for_torch():
    if torch is None:
        pytest.skip("PyTorch is not installed")
    gc.collect()
    before = dict(_pinned.live)
    t = graphrun.pinned_empty((2, 3), torch.float32)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.shape == (2, 3)
    b = graphrun.pinned_empty(8, torch.bfloat16)
    assert b.dtype == torch.bfloat16 and b.numel() == 8
    c = graphrun.pinned(torch.arange(6, dtype=torch.int32))
    assert c.dtype == torch.int32 and c.tolist() == list(range(6))
    n = torch.from_numpy(graphrun.pinned_empty(4, "float32"))
    del t, b, c
    gc.collect()
    assert _pinned.live["blocks"] == before["blocks"] + 1, "the from_numpy tensor's memory"
    del n
    gc.collect()
    assert _pinned.live == before


# ---------------------------------------------------------------------------------------
# The library.

def test_struct_layouts_match_the_header():
    """Every struct the package declares, against the installed header, compiled here."""
    import shutil
    import tempfile
    from graphrun import _lib as c
    cc = shutil.which("cc")
    header_dir = _header_dir()
    if cc is None or header_dir is None:
        pytest.skip("needs a C compiler and graphrun.h (the installed prefix or the tree)")
    structs = {"gr_error_info": c.ErrorInfo, "gr_config": c.Config,
               "gr_runtime_info": c.RuntimeInfo, "gr_histogram": c.Histogram,
               "gr_stats": c.Stats, "gr_port_info": c.PortInfo, "gr_tensor": c.Tensor,
               "gr_job_options": c.JobOptions, "gr_job_progress": c.JobProgress,
               "gr_kernel_info": c.KernelInfo, "gr_kernel_args": c.KernelArgs,
               "gr_kernel_def": c.KernelDef, "gr_scalar": c.Scalar,
               "gr_const_info": c.ConstInfo}
    lines = ["#include <graphrun.h>", "#include <stddef.h>", "#include <stdio.h>",
             "int main(void) {"]
    for cname, py in structs.items():
        lines.append(f'printf("{cname} size %zu\\n", sizeof({cname}));')
        for f in py._fields_:
            member = "in" if f[0] == "in_" else f[0]
            lines.append(f'printf("{cname} {f[0]} %zu\\n", offsetof({cname}, {member}));')
    lines.append('printf("magic %u %u %u %u %u %u %u\\n", GR_CONFIG_MAGIC, '
                 'GR_JOB_OPTIONS_MAGIC, GR_STATS_MAGIC, GR_KERNEL_DEF_MAGIC, '
                 'GR_RUNTIME_INFO_MAGIC, GR_JOB_PROGRESS_MAGIC, GR_KERNEL_INFO_MAGIC);')
    lines.append('printf("enums %d %d %d %d %d\\n", GR_CUDA_NONE, GR_CUDA_STREAM, '
                 'GR_OUT_ELEMS, GR_OUT_ONE, GR_NAME_MAX);')
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "abi.c")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        exe = os.path.join(d, "abi")
        subprocess.run([cc, "-std=c11", "-I", header_dir, "-o", exe, src], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    want = {}
    for line in out.splitlines():
        k, v = line.rsplit(" ", 1) if not line.startswith(("magic", "enums")) else (line, "")
        want[k] = v
    import ctypes
    for cname, py in structs.items():
        assert int(want[f"{cname} size"]) == ctypes.sizeof(py), cname
        for f in py._fields_:
            assert int(want[f"{cname} {f[0]}"]) == getattr(py, f[0]).offset, (cname, f[0])
    # The gr_tensor array a job hands the library is a NumPy structured array (_plan.py).
    from graphrun import _plan
    assert _plan.TENSOR.itemsize == int(want["gr_tensor size"])
    for field, member in (("in", "in_"), ("out", "out"), ("elems", "elems"), ("rank", "rank"),
                          ("shape", "shape")):
        assert _plan.TENSOR.fields[field][1] == int(want[f"gr_tensor {member}"]), field
    magic = [line for line in out.splitlines() if line.startswith("magic")][0].split()[1:]
    assert [int(m) for m in magic] == [c.GR_CONFIG_MAGIC, c.GR_JOB_OPTIONS_MAGIC,
                                       c.GR_STATS_MAGIC, c.GR_KERNEL_DEF_MAGIC,
                                       c.GR_RUNTIME_INFO_MAGIC, c.GR_JOB_PROGRESS_MAGIC,
                                       c.GR_KERNEL_INFO_MAGIC]
    enums = [line for line in out.splitlines() if line.startswith("enums")][0].split()[1:]
    assert [int(v) for v in enums] == [c.GR_CUDA_NONE, c.GR_CUDA_STREAM, c.GR_OUT_ELEMS,
                                       c.GR_OUT_ONE, c.GR_NAME_MAX]
    # GR_CONFIG_INIT's defaults, as the package fills them.
    cfg = c.config_init()
    assert (cfg.workers_per_device, cfg.ring_capacity, cfg.staging_bytes,
            cfg.batch_below_bytes, cfg.pipeline_bytes) == (3, 4096, 64 << 20, 1 << 20,
                                                            128 << 20)


def _header_dir():
    from graphrun import _lib as c
    lib = os.path.realpath(c.lib.graphrun_path) if os.path.sep in c.lib.graphrun_path else ""
    cands = [os.path.join(os.path.dirname(os.path.dirname(lib)), "include") if lib else "",
             os.path.join(HERE, "..", "..", "runtime", "include")]
    for d in cands:
        if d and os.path.exists(os.path.join(d, "graphrun.h")):
            return d
    return None


def test_missing_library_says_what_to_do():
    env = dict(os.environ, GRAPHRUN_LIBRARY="/nonexistent/libgraphrun.so.0")
    r = subprocess.run([sys.executable, "-c", "import graphrun"], env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "GRAPHRUN_LIBRARY" in r.stderr
    assert "tools/install" in r.stderr


def test_library_version_is_the_packages():
    from graphrun import _lib as c
    v = graphrun.library_version()
    assert v == graphrun.__version__
    major, minor, patch = (int(x) for x in v.split("."))
    assert c.lib.gr_version_number() == major * 1000000 + minor * 1000 + patch


def test_a_library_of_another_minor_version_is_refused():
    from graphrun import _lib as c
    c.check_version("0.4.7", "0.4.0")  # patches may differ
    for other in ("0.3.0", "0.5.0", "1.4.0"):
        with pytest.raises(ImportError, match=f"version {other}, this package is 0.4.0"):
            c.check_version(other, "0.4.0")


def test_the_package_under_test():
    """When tools/test runs the suite it names the install it means to test."""
    want = os.environ.get("GRAPHRUN_EXPECT_PREFIX")
    if not want:
        pytest.skip("GRAPHRUN_EXPECT_PREFIX not set (python/run_tests sets it)")
    want = os.path.realpath(want)
    assert os.path.realpath(graphrun.__file__).startswith(want + os.sep), graphrun.__file__
    from graphrun import _lib as c
    assert os.path.realpath(c.lib.graphrun_path).startswith(want + os.sep)


def test_exit_with_work_running():
    # A runtime still busy at exit: the atexit hook stops it before the interpreter goes,
    # so no runtime thread calls into a finalizing interpreter.
    code = ("import graphrun, numpy as np\n"
            "rt = graphrun.Runtime(budget='8MiB', backend='host', workers=1)\n"
            "xs = [np.ones(1_000_000, np.float32) for _ in range(200)]\n"
            "job = rt.submit(graphrun.seed(), xs, on_complete=lambda j: print('callback'))\n"
            "print('submitted', flush=True)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["submitted", "callback"], r.stdout + r.stderr
