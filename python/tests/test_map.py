"""Runtime.map and constants= (docs/PYTHON.md): a Python function per tensor, run by the
runtime's workers over views of graphrun's buffers, and constants a job copies to each
device once.

On the host backend fn gets NumPy arrays (views="numpy", what CI runs) or CPU torch tensors
(views="torch", skipped without PyTorch); on CUDA, CUDA torch tensors (skipped without a GPU
and PyTorch with CUDA). The promises each get a test: every index ends exactly once, cancel
and deadlines, an exception fails its index only with its traceback, fn runs on a worker
with the GIL held only while it runs, fn's device memory measured and limited.
"""
import threading
import time

import numpy as np
import pytest

import graphrun
from graphrun import _map
from helpers import make, rand, same_bits, torch


def _torch_cuda():
    return torch is not None and torch.cuda.is_available()


@pytest.fixture(params=["numpy", "torch"])
def views(request):
    if request.param == "torch" and torch is None:
        pytest.skip("PyTorch is not installed")
    return request.param


@pytest.fixture
def mrt(new_runtime, backend, views):
    """A runtime where fn gets `views`: (runtime, views). CUDA: torch views only."""
    if backend == "cuda":
        if views == "numpy":
            pytest.skip("views='numpy' is the host backend's (fn gets device memory on CUDA)")
        if not _torch_cuda():
            pytest.skip("needs PyTorch with CUDA")
    return new_runtime(backend=backend), views


@pytest.fixture
def host(new_runtime, views):
    return new_runtime(backend="host", workers=2), views


def np_of(x):
    """NumPy's view of what fn got (a CUDA tensor is copied to the host)."""
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def tagged(n, count, seed=0):
    """`count` float32 arrays of `n` elements whose first element is their index."""
    xs = [rand(n, seed=seed + i) for i in range(count)]
    for i, x in enumerate(xs):
        x[0] = i
    return xs


# ---------------------------------------------------------------------------------------
# Results and the exactly-once promise.

def test_map_every_index_once(mrt):
    rt, views = mrt
    xs = tagged(1000, 60)
    seen = []
    lock = threading.Lock()

    def fn(x):
        with lock:
            seen.append(int(np_of(x[:1])[0]))
        return x * 2 + 1

    job = rt.submit_map(fn, xs, views=views)
    ys = job.result(60)
    assert sorted(seen) == list(range(60)), "an index was called more or less than once"
    p = job.progress()
    assert (p.total, p.done, p.failed, p.canceled) == (60, 60, 0, 0)
    for x, y in zip(xs, ys):
        assert type(y) is np.ndarray and y.shape == x.shape
        assert same_bits(y, x * np.float32(2) + np.float32(1))
    assert sorted(job) == list(range(60))


def test_map_views_are_of_the_kind_asked(host):
    rt, views = host
    kinds = []
    rt.map(lambda x: kinds.append(type(x)) or x, [rand(10)], views=views)
    want = torch.Tensor if views == "torch" else np.ndarray
    assert kinds == [want]
    got = []
    rt.map(lambda x: got.append(type(x)) or x, [rand(10)])  # auto: torch when installed
    assert got == [torch.Tensor if torch is not None else np.ndarray]


def test_map_tensor_inputs_give_tensor_outputs(host):
    rt, views = host
    if torch is None:
        pytest.skip("PyTorch is not installed")
    xs = [make("torch", rand(100, seed=i)) for i in range(3)]
    ys = rt.map(lambda x: x + 1, xs, views=views)
    for x, y in zip(xs, ys):
        assert isinstance(y, torch.Tensor) and torch.equal(y, x + 1)


def test_map_elementwise_batches_small_tensors(new_runtime, views):
    rt = new_runtime(backend="host", workers=1)
    xs = [rand(100 + i, seed=i) for i in range(50)]
    calls = []

    def fn(x):
        calls.append(int(np_of(x).size))
        return x * 3

    ys = rt.map(fn, xs, views=views, elementwise=True)
    assert all(same_bits(y, x * np.float32(3)) for x, y in zip(xs, ys))
    assert sum(calls) == sum(x.size for x in xs), "an element computed more than once"
    assert len(calls) < len(xs), f"{len(calls)} calls: the small tensors were not batched"
    calls.clear()
    rt.map(fn, xs, views=views)  # whole tensors: one call each, never batched
    assert sorted(calls) == sorted(x.size for x in xs)


def test_map_elementwise_cuts_a_large_tensor(new_runtime, views):
    # A budget far below the tensor: it is cut into chunks, each computed once.
    rt = new_runtime(backend="host", workers=1, budget="1MiB", batch_below=0)
    x = rand(1 << 20, seed=3)  # 4 MiB
    calls = []

    def fn(x):
        calls.append(int(np_of(x).size))
        return x + 2

    (y,) = rt.map(fn, [x], views=views, elementwise=True)
    assert same_bits(y, x + np.float32(2))
    assert len(calls) > 1 and sum(calls) == x.size, calls
    with pytest.raises(graphrun.OverBudget):  # whole tensors cannot be cut
        rt.map(fn, [x], views=views)


def test_map_rows_cuts_between_rows_only(new_runtime, views):
    # rows=True: a function of whole rows (x @ W, a model over a batch of samples). A budget
    # far below the largest tensor: it is cut, but only between rows (every call gets whole
    # (k, 5, 3) rows), small tensors are batched as whole rows, and every output is NumPy's.
    rt = new_runtime(backend="host", workers=2, budget="1MiB", batch_below="1MiB")
    rng = np.random.default_rng(7)
    W = rng.standard_normal((3, 3)).astype(np.float32)
    xs = [rng.standard_normal((n, 5, 3)).astype(np.float32) for n in (40000, 3, 1, 999)]
    calls = []

    def fn(x, W):
        calls.append(tuple(x.shape))
        return x @ W

    ys = rt.map(fn, xs, constants={"W": W}, rows=True, views=views)
    for x, y in zip(xs, ys):
        y = np_of(y)
        assert y.shape == x.shape
        np.testing.assert_allclose(y, x @ W, rtol=1e-5, atol=1e-5)
    assert all(len(c) == 3 and c[1:] == (5, 3) for c in calls), calls
    assert sum(c[0] for c in calls) == sum(x.shape[0] for x in xs), calls
    assert max(c[0] for c in calls) < 40000, f"the large tensor was not cut: {calls}"
    assert 3 + 1 + 999 in [c[0] for c in calls], f"the small tensors not batched: {calls}"
    with pytest.raises(graphrun.OverBudget):  # whole tensors cannot be cut
        rt.map(fn, xs[:1], constants={"W": W}, views=views)


def test_map_rows_of_two_inputs_and_of_vectors(host):
    # Two inputs a tensor (rows of one shape), in place; and 1-D tensors, whose rows are
    # single elements (fn gets (k,) views).
    rt, views = host
    xs = [rand(40, seed=i).reshape(10, 4) for i in range(3)]
    zs = [rand(40, seed=9 + i).reshape(10, 4) for i in range(3)]
    want = [x * z for x, z in zip(xs, zs)]
    seen = []

    def fn(x, z):
        seen.append(tuple(x.shape) + tuple(z.shape))
        return x * z

    ys = rt.map(fn, [xs, zs], rows=True, views=views, inplace=True)
    assert all(same_bits(np_of(y), w) for y, w in zip(ys, want))
    assert all(len(s) == 4 and s[1] == s[3] == 4 for s in seen), seen
    vs = [rand(100 + i, seed=i) for i in range(4)]
    ys = rt.map(lambda v: v + 1, vs, rows=True, views=views)
    assert all(same_bits(np_of(y), v + np.float32(1)) for y, v in zip(ys, vs))


def test_map_rows_with_out_shape_and_refusals(host):
    rt, views = host
    xs = [rand(60, seed=i).reshape(20, 3) for i in range(3)]
    # The output's rows reshaped ((k, 3) in, (k, 3, 1) out), another element type.
    def fn(x):
        y = x.double() if views == "torch" else x.astype(np.float64)
        return (y * 2).reshape(x.shape[0], 3, 1)

    ys = rt.map(fn, xs, rows=True, views=views, out_shape=lambda s: (s[0], 3, 1),
                out_dtype="float64")
    for x, y in zip(xs, ys):
        y = np_of(y)
        assert y.shape == (20, 3, 1) and y.dtype == np.float64
        assert np.array_equal(y[:, :, 0], x.astype(np.float64) * 2)
    with pytest.raises(graphrun.InvalidArgument, match="one shape"):
        rt.map(lambda x: x, [rand(6).reshape(2, 3), rand(6).reshape(3, 2)], rows=True,
               views=views)
    with pytest.raises(graphrun.InvalidArgument, match="no dimensions"):
        rt.map(lambda x: x, [np.array(1, np.float32)], rows=True, views=views)
    with pytest.raises(graphrun.InvalidArgument, match="give one"):
        rt.map(lambda x: x, xs, rows=True, elementwise=True, views=views)
    with pytest.raises(graphrun.InvalidArgument, match="element count"):
        rt.map(lambda x: x[:, :1], xs, rows=True, views=views, out_shape=lambda s: (s[0], 1))


def test_map_shape_dtype_and_several_inputs(host):
    rt, views = host
    xs = [rand(24, seed=i).reshape(2, 3, 4) for i in range(3)]
    zs = [rand(24, seed=10 + i).reshape(2, 3, 4) for i in range(3)]
    shapes = []

    def fn(x, z):
        shapes.append(tuple(x.shape))
        return x * z

    ys = rt.map(fn, [xs, zs], views=views)
    assert shapes == [(2, 3, 4)] * 3
    for x, z, y in zip(xs, zs, ys):
        assert y.shape == (2, 3, 4) and same_bits(y, x * z)

    # Another output type, the tensor's size: float32 in, float64 out.
    def wide(x):
        return x.double() if views == "torch" else x.astype(np.float64)
    ys = rt.map(wide, xs, out_dtype="float64", views=views)
    for x, y in zip(xs, ys):
        assert y.dtype == np.float64 and np.array_equal(y, x.astype(np.float64))

    # Integer and half types pass through untouched.
    for dt in (np.uint8, np.int32, np.float16):
        a = [(np.arange(50) % 7).astype(dt) for _ in range(2)]
        ys = rt.map(lambda x: x + 1, a, views=views)
        for x, y in zip(a, ys):
            assert y.dtype == dt and np.array_equal(y, x + dt(1))


def test_map_output_of_a_fixed_size(host):
    # |rfft(x)| along the last dimension: (rows, L) -> (rows, L // 2 + 1), the same for
    # every tensor: a fixed output.
    rt, views = host
    xs = [rand(64, seed=i).reshape(4, 16) for i in range(5)]

    def mag(x):
        if views == "torch":
            return torch.fft.rfft(x).abs()
        return np.abs(np.fft.rfft(x)).astype(np.float32)

    ys = rt.map(mag, xs, out_shape=lambda s: s[:-1] + (s[-1] // 2 + 1,), views=views)
    for x, y in zip(xs, ys):
        assert y.shape == (4, 9) and y.dtype == np.float32
        assert np.allclose(y, np.abs(np.fft.rfft(x.astype(np.float64))), rtol=1e-5,
                           atol=1e-5)
    # A reduction to one element per tensor.
    ys = rt.map(lambda x: x.sum().reshape(1), xs, out_shape=(1,), views=views)
    for x, y in zip(xs, ys):
        assert y.shape == (1,) and abs(float(y[0]) - float(x.sum())) < 1e-4


def test_map_out_and_inplace(host):
    rt, views = host
    xs = [rand(100, seed=i) for i in range(4)]
    x0 = [x.copy() for x in xs]
    outs = [np.empty(100, np.float32) for _ in range(4)]
    got = rt.map(lambda x: x - 1, xs, out=outs, views=views)
    assert all(g is o for g, o in zip(got, outs))
    assert all(same_bits(o, x - np.float32(1)) for o, x in zip(outs, x0))
    assert all(same_bits(x, x_) for x, x_ in zip(xs, x0)), "an input was written"
    got = rt.map(lambda x: x - 1, xs, inplace=True, views=views)
    assert all(g is x for g, x in zip(got, xs))
    assert all(same_bits(x, x_ - np.float32(1)) for x, x_ in zip(xs, x0))


def test_map_fn_writing_its_input_in_place(host):
    # fn may work in place and return its input: the output buffer is the input's when
    # they agree in type and size, so nothing is copied and nothing is lost.
    rt, views = host
    xs = [rand(100, seed=i) for i in range(3)]

    def fn(x):
        x *= 4
        return x

    ys = rt.map(fn, xs, views=views)
    assert all(same_bits(y, x * np.float32(4)) for x, y in zip(xs, ys))
    # Returning a view of itself that overlaps the output (its transpose) is copied
    # safely: the output buffer is the input's.
    sq = [rand(64, seed=i).reshape(8, 8) for i in range(3)]
    ys = rt.map(lambda x: x.T, sq, views=views)
    assert all(same_bits(y, x.T) for x, y in zip(sq, ys))


# ---------------------------------------------------------------------------------------
# Constants.

def test_map_constants_matmul(mrt):
    rt, views = mrt
    rng = np.random.default_rng(1)
    W = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    xs = [rng.standard_normal((5, 16)).astype(np.float32) for _ in range(20)]
    before = rt.stats()["devices"][0]["constants_copied"]
    names = []

    def fn(x, **kw):
        names.append(sorted(kw))
        return x @ kw["W"] + kw["b"]

    ys = rt.map(fn, xs, constants={"W": W, "b": b}, views=views)
    assert names == [["W", "b"]] * 20
    for x, y in zip(xs, ys):
        assert np.allclose(y, x @ W + b, rtol=1e-5, atol=1e-5)
    copied = rt.stats()["devices"][0]["constants_copied"] - before
    assert copied == 1, f"the constants were copied {copied} times for one job"


def test_map_constants_of_a_tensor_and_elementwise(host):
    rt, views = host
    if torch is None:
        pytest.skip("PyTorch is not installed")
    scale = torch.tensor([2.0, 3.0], dtype=torch.float64)
    xs = [rand(100, seed=i) for i in range(3)]
    ys = rt.map(lambda x, s: x * float(s[1]), xs, constants={"s": scale}, elementwise=True,
                views=views)
    assert all(np.array_equal(y, x * np.float32(3)) for x, y in zip(xs, ys))


# ---------------------------------------------------------------------------------------
# Failures of fn.

def test_map_exception_fails_its_index_only(mrt):
    rt, views = mrt
    xs = tagged(50, 8)
    outs = [np.full(50, -7, np.float32) for _ in range(8)]

    def fn(x):
        i = int(np_of(x[:1])[0])
        if i in (3, 5):
            raise ValueError(f"no good: {i}")
        return x + 1

    job = rt.submit_map(fn, xs, out=outs, views=views)
    assert job.wait(60)
    e = job.error()
    assert isinstance(e, graphrun.FunctionError) and e.index in (3, 5)
    assert e.status == graphrun.Status.CUDA and e.node == "fn"
    assert f"ValueError: no good: {e.index}" in e.traceback
    assert 'raise ValueError(f"no good: {i}")' in e.traceback and "in fn" in e.traceback
    assert "graphrun/_map.py" not in e.traceback, "the package's frame leads the traceback"
    assert f"[index {e.index}]" in str(e) and "Traceback" in str(e)
    for i in range(8):
        if i in (3, 5):
            assert job.status(i) == ("failed", graphrun.Status.CUDA)
            f = job.error(i)
            assert isinstance(f, graphrun.FunctionError) and f.index == i
            assert f"no good: {i}" in f.traceback
            assert np.all(outs[i] == -7), f"failed index {i}'s output was written"
        else:
            assert job.status(i) == ("done", graphrun.Status.OK) and job.error(i) is None
            assert same_bits(outs[i], xs[i] + np.float32(1))
    p = job.progress()
    assert (p.done, p.failed, p.canceled) == (6, 2, 0)
    with pytest.raises(graphrun.FunctionError):
        job.result()
    assert sorted(i for i in _iter_done(job)) == [0, 1, 2, 4, 6, 7]
    with pytest.raises(graphrun.FunctionError) as r:
        rt.map(fn, xs, views=views)
    assert "no good" in str(r.value)
    # The runtime goes on.
    assert same_bits(rt.map(lambda x: x * 1, xs[:1], views=views)[0], xs[0])


def _iter_done(job):
    out = []
    try:
        for i in job:
            out.append(i)
    except graphrun.FunctionError:
        pass
    return out


def test_map_result_refused_fails_its_index(host):
    rt, views = host
    xs = tagged(20, 4)

    def fn(x):
        i = int(np_of(x[:1])[0])
        if i == 1:
            return x[:5]  # another shape
        if i == 2:
            return x.double() if views == "torch" else x.astype(np.float64)
        if i == 3:
            return [1, 2]
        return x

    job = rt.submit_map(fn, xs, views=views)
    job.wait(30)
    assert job.status(0)[0] == "done"
    assert "fn returned float32 (5,); the output is float32 (20,)" in job.error(1).message
    assert "fn returned float64 (20,)" in job.error(2).message
    assert "fn returned list" in job.error(3).message
    assert job.error(1).traceback == ""


def test_map_exception_in_elementwise_mode_is_the_jobs(host):
    rt, views = host
    xs = [rand(10, seed=i) for i in range(5)]

    def fn(x):
        raise KeyError("batch")

    job = rt.submit_map(fn, xs, elementwise=True, views=views)
    job.wait(30)
    e = job.error()
    assert isinstance(e, graphrun.FunctionError) and "KeyError: 'batch'" in e.traceback
    with pytest.raises(graphrun.FunctionError):
        job.result()


def test_map_submit_inside_fn_is_refused(host):
    rt, views = host
    with pytest.raises(graphrun.FunctionError) as e:
        rt.map(lambda x: rt.run(graphrun.seed(), [np.ones(4, np.float32)]), [rand(4)],
               views=views)
    assert "InvalidUsage" in e.value.traceback and "inside a map function" in \
        e.value.traceback


# ---------------------------------------------------------------------------------------
# Cancel, deadlines, threads and the GIL.

def test_map_cancel_and_deadline(new_runtime, gate, views):
    rt = new_runtime(backend="host", workers=1)
    xs = tagged(10, 6)
    outs = [np.zeros(10, np.float32) for _ in range(6)]

    def fn(x):
        gate._pass()
        return x + 1

    job = rt.submit_map(fn, xs, out=outs, views=views)
    gate.wait_entered(1)
    assert job.status(0)[0] == "running" and job.status(1)[0] == "queued"
    job.cancel()
    gate.open()
    assert job.wait(10)
    assert job.status(0) == ("done", graphrun.Status.OK)
    assert same_bits(outs[0], xs[0] + np.float32(1))
    for i in range(1, 6):
        assert job.status(i) == ("canceled", graphrun.Status.CANCELED)
        assert not outs[i].any()
    assert isinstance(job.error(), graphrun.Canceled)

    gate.reset()
    job = rt.submit_map(fn, xs, deadline=0.2, views=views)
    gate.wait_entered(1)
    time.sleep(0.4)
    gate.open()
    assert job.wait(10)
    assert job.status(0) == ("done", graphrun.Status.OK)
    assert all(job.status(i) == ("failed", graphrun.Status.TIMEOUT) for i in range(1, 6))
    with pytest.raises(graphrun.Timeout):
        job.result()


def test_map_runs_on_workers_at_once_without_the_gil_held(new_runtime, views):
    # Two workers, each in fn at the same time: fn waits at a barrier, which only both
    # calls together pass; so neither the library nor the package holds the GIL (or any
    # lock) across fn's call, and the waiting main thread holds nothing either.
    rt = new_runtime(backend="host", workers=2)
    barrier = threading.Barrier(2, timeout=10)
    threads = set()

    def fn(x):
        threads.add(threading.get_ident())
        barrier.wait()
        return x

    rt.map(fn, [rand(10, seed=i) for i in range(2)], views=views)
    assert len(threads) == 2 and threading.get_ident() not in threads


# ---------------------------------------------------------------------------------------
# fn's device memory.

class FakeMeter:
    """Stands for PyTorch's counters on the host backend: each call 'allocates' what its
    tensor's first element says, in MiB."""

    def __init__(self):
        self.peak = 0
        self.last = 0

    def used(self, device):
        return self.last

    def report(self):
        return {0: self.peak}


def test_map_fn_memory_limit(new_runtime, monkeypatch, views):
    meter = FakeMeter()
    monkeypatch.setattr(_map, "meter_for", lambda backend, torch, devices: meter)
    rt = new_runtime(backend="host", workers=1)
    xs = [np.full(4, m, np.float32) for m in (1, 40, 2)]

    def fn(x):
        meter.last = int(np_of(x)[0]) << 20
        meter.peak = max(meter.peak, meter.last)
        return x

    job = rt.submit_map(fn, xs, fn_memory="32MiB", views=views)
    job.wait(30)
    assert job.fn_memory == {0: 40 << 20}
    assert job.status(1) == ("failed", graphrun.Status.OVER_BUDGET)
    e = job.error()
    assert isinstance(e, graphrun.OverBudget) and e.index == 1
    assert "reached 41943040 bytes" in e.message and "fn_memory=33554432" in e.message
    assert job.status(0)[0] == job.status(2)[0] == "done"


def test_map_fn_memory_on_the_host_is_none(host):
    rt, views = host
    job = rt.submit_map(lambda x: x, [rand(4)], views=views)
    job.result(30)
    assert job.fn_memory is None


def test_map_fn_memory_measured_on_cuda(new_runtime, cuda):
    if not _torch_cuda():
        pytest.skip("needs PyTorch with CUDA")
    rt = new_runtime(backend="cuda")
    xs = [rand(1 << 20, seed=i) for i in range(3)]  # 4 MiB each

    def fn(x):
        tmp = torch.empty(8 << 20, dtype=torch.float32, device=x.device)  # 32 MiB
        tmp.fill_(1)
        return x + tmp[:x.numel()]

    job = rt.submit_map(fn, xs)
    ys = job.result(120)
    assert all(same_bits(y, x + np.float32(1)) for x, y in zip(xs, ys))
    (used,) = job.fn_memory.values()
    assert used >= 32 << 20, job.fn_memory
    job = rt.submit_map(fn, xs, fn_memory="16MiB")
    job.wait(120)
    assert isinstance(job.error(), graphrun.OverBudget)
    assert all(job.status(i) == ("failed", graphrun.Status.OVER_BUDGET) for i in range(3))


# ---------------------------------------------------------------------------------------
# Registrations and refusals.

def test_map_registers_once_per_signature(host):
    rt, views = host
    xs = [rand(8)]
    rt.map(lambda x: x, xs, views=views)  # the signature's first use may register
    n = graphrun._c.lib.gr_kernel_count()
    for k in range(5):
        rt.map(lambda x, k=k: x + k, xs, views=views)  # new functions, one signature
    assert graphrun._c.lib.gr_kernel_count() == n
    rt.map(lambda x: x.sum().reshape(1), [rand(8), rand(8)], out_shape=(1,), views=views)
    rt.map(lambda x: x.sum().reshape(1), [rand(8)], out_shape=(1,), views=views)
    assert graphrun._c.lib.gr_kernel_count() in (n, n + 1)
    assert not _map._calls, "a finished job's function is still held"


def test_map_refusals(host):
    rt, views = host
    xs = [rand(8, seed=i) for i in range(3)]
    n = graphrun._c.lib.gr_kernel_count()
    with pytest.raises(TypeError, match="fn must be callable"):
        rt.map(3, xs, views=views)
    with pytest.raises(ValueError, match="unknown views"):
        rt.map(lambda x: x, xs, views="cupy")
    cases = [
        (dict(tensors=[]), "no tensors"),
        (dict(tensors=xs, constants={"not ok": xs[0]}), "not a Python identifier"),
        (dict(tensors=xs, constants={"lambda": xs[0]}), "not a Python identifier"),
        (dict(tensors=xs, constants={"param": xs[0]}), "graph specs reserve"),
        (dict(tensors=xs, constants={"W": np.ones((1, 1, 1, 1, 2), np.float32)}),
         "at most 4"),
        (dict(tensors=[xs, xs, xs], constants={"a": xs[0]}), "reads at most 4 buffers"),
        (dict(tensors=xs, out_shape=lambda s: (s[0] + 1,)), None),  # fixed: fine
        (dict(tensors=[rand(8), rand(9)], out_shape=lambda s: (s[0] + 1,)),
         "one fixed count for every tensor"),
        (dict(tensors=xs, out_shape=(9,), elementwise=True), "elementwise=True"),
        (dict(tensors=xs, out_shape="x"), "out_shape must be a shape"),
        (dict(tensors=xs, out_dtype="complex64"), "out_dtype"),
        (dict(tensors=[xs[0], np.ones(8, np.float64)]), "holds float64"),
        (dict(tensors=[[1, 2]]), "input 0 of index 0 is a int, not an array"),
    ]
    for kw, text in cases:
        tensors = kw.pop("tensors")
        if text is None:
            rt.map(lambda x: np.concatenate([np_of(x), [0]]).astype(np.float32)
                   if views == "numpy" else torch.cat([x, x[:1]]), tensors, views=views, **kw)
            continue
        with pytest.raises(graphrun.InvalidArgument) as e:
            rt.map(lambda x: x, tensors, views=views, **kw)
        assert text in str(e.value), (kw, str(e.value))
    assert not _map._calls, "a refused job's state was kept"
    assert graphrun._c.lib.gr_kernel_count() <= n + 1


def test_map_needs_torch_with_cuda_on_cuda(new_runtime, cuda):
    rt = new_runtime(backend="cuda")
    with pytest.raises(graphrun.InvalidArgument, match="views='numpy' on the CUDA"):
        rt.map(lambda x: x, [rand(8)], views="numpy")
    if not _torch_cuda():
        with pytest.raises(graphrun.Unavailable, match="needs PyTorch with CUDA"):
            rt.map(lambda x: x, [rand(8)])


def test_map_cuda_views_are_on_the_device_and_stream(new_runtime, cuda):
    if not _torch_cuda():
        pytest.skip("needs PyTorch with CUDA")
    rt = new_runtime(backend="cuda", workers=2)
    seen = []

    def fn(x, W):
        seen.append((x.device.type, W.device.type, torch.cuda.current_stream().cuda_stream))
        return x @ W

    W = np.eye(4, dtype=np.float32) * 2
    xs = [rand(16, seed=i).reshape(4, 4) for i in range(6)]
    ys = rt.map(fn, xs, constants={"W": W})
    assert all(np.allclose(y, x @ W) for x, y in zip(xs, ys))
    assert len(seen) == 6 and all(s[:2] == ("cuda", "cuda") for s in seen), seen
    assert all(s[2] != 0 for s in seen), "fn ran on the default stream, not the worker's"


def test_map_pageable_tensors_streamed_through_staging(new_runtime, cuda):
    """A map unit is a whole tensor: on CUDA its pageable arrays (NumPy's, and the outputs
    graphrun allocates) are streamed through the worker's pinned staging buffer in pieces,
    not handed to the driver's slow path. 12 MB tensors through 8 MiB buffers: six pieces
    each way, around the buffer's four parts."""
    if not _torch_cuda():
        pytest.skip("needs PyTorch with CUDA")
    rt = new_runtime(backend="cuda", budget="256MiB", staging="8MiB")
    xs = tagged(3_000_000, 5)
    before = rt.stats()["devices"][0]
    ys = rt.map(lambda x: x * 2 + 1, xs)
    after = rt.stats()["devices"][0]
    for x, y in zip(xs, ys):
        assert type(y) is np.ndarray and y.shape == x.shape
        assert same_bits(y, x * np.float32(2) + np.float32(1))
    assert after["units_streamed"] - before["units_streamed"] == 5, (before, after)
