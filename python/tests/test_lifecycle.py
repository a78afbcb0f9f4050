"""Jobs over time: every status a job can end with, waits, cancel, deadlines, shutdown,
callbacks, many threads at once, iteration, progress, Ctrl-C, and the memory contract.

The host backend's precise cases use the gate kernel (gate.py), which holds iterations until
the test lets them go; the same questions on CUDA use work long enough to be stopped."""
import _thread
import asyncio
import gc
import os
import select
import selectors
import signal
import threading
import time
import weakref

import numpy as np
import pytest

import graphrun
from graphrun import _pinned
from helpers import data_ptr, is_kind, make, rand, same_bits, seed_ref, to_np, torch


@pytest.fixture
def gated(new_runtime, gate):
    """A host runtime with one worker, and the gate graph: indices run one at a time, in
    order, each held in the gate."""
    import gate as g
    return new_runtime(backend="host", workers=1), g.graph(), gate


def plus_one(a):
    return (np.asarray(a, np.float32) + np.float32(1)).astype(np.float32)


def test_cancel_running_finishes_queued_end(gated):
    rt, g, gate = gated
    xs = [rand(100, seed=i) for i in range(6)]
    x0 = [x.copy() for x in xs]
    job = rt.submit(g, xs, inplace=True)  # in place: a canceled index leaves its input
    gate.wait_entered(1)
    assert job.status(0) == ("running", graphrun.Status.OK)
    assert job.status(1)[0] == "queued"
    assert not job.wait(0.05) and not job.done()
    job.cancel()
    job.cancel()  # idempotent
    gate.open()
    assert job.wait(10)
    p = job.progress()
    assert (p.total, p.done, p.canceled, p.failed, p.queued, p.in_flight) == (6, 1, 5, 0, 0, 0)
    assert same_bits(xs[0], plus_one(x0[0])), "the running index did not finish"
    for i in range(1, 6):
        assert job.status(i) == ("canceled", graphrun.Status.CANCELED)
        assert same_bits(xs[i], x0[i]), f"canceled index {i} was written"
    with pytest.raises(graphrun.Canceled) as e:
        job.result()
    assert e.value.status == graphrun.Status.CANCELED and e.value.index in range(1, 6)
    assert isinstance(job.error(), graphrun.Canceled)


def test_deadline_fails_what_has_not_started(gated):
    rt, g, gate = gated
    xs = [rand(50, seed=i) for i in range(4)]
    x0 = [x.copy() for x in xs]
    job = rt.submit(g, xs, deadline=0.2, inplace=True)
    gate.wait_entered(1)
    time.sleep(0.4)
    gate.open()
    assert job.wait(10)
    assert job.status(0) == ("done", graphrun.Status.OK)
    for i in range(1, 4):
        assert job.status(i) == ("failed", graphrun.Status.TIMEOUT)
        assert same_bits(xs[i], x0[i])
    e = job.error()
    assert isinstance(e, graphrun.Timeout) and isinstance(e, TimeoutError)
    assert e.index in (1, 2, 3)
    with pytest.raises(graphrun.Timeout):
        job.result()


def test_deadline_on_any_backend(new_runtime, backend):
    rt = new_runtime(backend=backend)
    xs = [rand(1000, seed=i) for i in range(3)]
    with pytest.raises(graphrun.Timeout):
        rt.run(graphrun.seed(), xs, deadline=-1)  # passed before it was submitted
    x = rand(1000, seed=7)
    want = seed_ref(x)
    (y,) = rt.run(graphrun.seed(), [x], deadline=60)
    assert same_bits(y, want)


def test_wait_timeout_and_result_timeout(gated):
    rt, g, gate = gated
    job = rt.submit(g, [rand(10)])
    gate.wait_entered(1)
    t = time.monotonic()
    assert job.wait(0.1) is False
    assert time.monotonic() - t >= 0.09
    assert job.wait(0) is False
    with pytest.raises(TimeoutError) as e:
        job.result(timeout=0.05)
    assert not isinstance(e.value, graphrun.Error)
    gate.open()
    assert job.wait() is True and job.done()
    assert job.result()[0] is not None


def test_shutdown_ends_queued_and_refuses_more(gated):
    rt, g, gate = gated
    xs = [rand(20, seed=i) for i in range(3)]
    job = rt.submit(g, xs)
    gate.wait_entered(1)
    rt.shutdown()
    with pytest.raises(graphrun.Shutdown):
        rt.submit(graphrun.seed(), [rand(5)])
    gate.open()
    assert job.wait(10)
    assert [job.status(i)[1] for i in range(3)] == \
        [graphrun.Status.OK, graphrun.Status.SHUTDOWN, graphrun.Status.SHUTDOWN]
    with pytest.raises(graphrun.Shutdown):
        job.result()


def test_closed_runtime_is_invalid_usage(new_runtime, backend):
    rt = new_runtime(backend=backend)
    rt.close()
    rt.close()  # idempotent
    with pytest.raises(graphrun.InvalidUsage) as e:
        rt.submit(graphrun.seed(), [rand(4)])
    assert e.value.status == graphrun.Status.INVALID_USAGE and "closed" in str(e.value)
    with pytest.raises(graphrun.InvalidUsage):
        rt.info()
    assert "closed" in repr(rt)


def test_close_without_waiting_ends_what_is_queued(new_runtime, gate):
    import gate as gm
    rt = new_runtime(backend="host", workers=1)
    xs = [rand(10, seed=i) for i in range(3)]
    job = rt.submit(gm.graph(), xs)
    gate.wait_entered(1)
    threading.Timer(0.2, gate.open).start()
    rt.close(wait=False)  # waits for the running iteration, stops the rest
    assert job.done()
    assert [job.status(i)[0] for i in range(3)] == ["done", "canceled", "canceled"]


def test_context_manager_waits_on_normal_exit(backend):
    xs = [rand(20000, seed=i) for i in range(8)]
    want = [seed_ref(x) for x in xs]
    with graphrun.Runtime(budget="64MiB", backend=backend) as rt:
        job = rt.submit(graphrun.seed(), xs)
    assert job.done() and job.error() is None
    assert all(same_bits(y, w) for y, w in zip(job.result(), want))
    with pytest.raises(graphrun.InvalidUsage):
        rt.info()


def test_context_manager_stops_on_an_exception(gate):
    import gate as gm
    xs = [rand(10, seed=i) for i in range(3)]
    with pytest.raises(ZeroDivisionError):
        with graphrun.Runtime(budget="1MiB", backend="host", workers=1) as rt:
            job = rt.submit(gm.graph(), xs)
            gate.wait_entered(1)
            threading.Timer(0.2, gate.open).start()
            1 / 0
    assert job.done()
    assert job.progress().canceled == 2


# ---------------------------------------------------------------------------------------
# Job.fileno: completion for event loops.

def _readable(fd, timeout):
    r, _, _ = select.select([fd], [], [], timeout)
    return bool(r)


def test_fileno_readable_only_once_done(gated):
    rt, g, gate = gated
    xs = [rand(100, seed=i) for i in range(3)]
    x0 = [x.copy() for x in xs]
    seen = []
    job = rt.submit(g, xs, on_complete=lambda j: (time.sleep(0.1),
                                                  seen.append(_readable(j.fileno(), 0))))
    fd = job.fileno()
    assert job.fileno() == fd and fd >= 0
    gate.wait_entered(1)
    assert not _readable(fd, 0.05) and not job.done()
    gate.open()
    with selectors.DefaultSelector() as sel:
        sel.register(job, selectors.EVENT_READ)  # a Job is a file object: it has fileno
        assert sel.select(10), "the job's descriptor never became readable"
        assert job.done(), "readable before the job was done here"
        sel.unregister(job)
    assert seen == [False], "readable while on_complete still ran"
    ys = job.result(timeout=0)
    for x, y in zip(x0, ys):
        assert same_bits(y, plus_one(x))


def test_fileno_of_a_done_or_canceled_job(gated):
    rt, g, gate = gated
    job = rt.submit(g, [rand(10) for _ in range(3)])
    gate.wait_entered(1)
    job.cancel()
    gate.open()
    assert _readable(job.fileno(), 10)
    assert job.done() and isinstance(job.error(), graphrun.Canceled)
    done = rt.submit(graphrun.seed(), [rand(10)])
    assert done.wait(10)
    assert _readable(done.fileno(), 0)  # asked for after the fact: readable at once


def test_fileno_closed_with_the_job(new_runtime):
    rt = new_runtime(backend="host")
    job = rt.submit(graphrun.seed(), [rand(10)])
    fd = job.fileno()
    assert job.wait(10)
    del job
    gc.collect()
    with pytest.raises(OSError):
        os.fstat(fd)


def test_fileno_with_asyncio(new_runtime):
    """Many jobs awaited on one event loop through loop.add_reader, none blocking it."""
    rt = new_runtime(backend="host")
    xs = [rand(5000, seed=i) for i in range(40)]

    async def one(x):
        loop = asyncio.get_running_loop()
        job = rt.submit(graphrun.seed(), [x])
        ready = loop.create_future()
        loop.add_reader(job, ready.set_result, None)
        try:
            await asyncio.wait_for(ready, 30)
        finally:
            loop.remove_reader(job)
        assert job.done()
        return job.result(timeout=0)[0]

    async def main():
        return await asyncio.gather(*(one(x) for x in xs))

    for x, y in zip(xs, asyncio.run(main())):
        assert same_bits(y, seed_ref(x))


# await job.

def test_await_jobs_on_one_loop(new_runtime):
    """Forty jobs awaited at once, each twice (two coroutines share one reader), the loop
    never blocked: a ticker keeps running while they are in flight."""
    rt = new_runtime(backend="host")
    xs = [rand(20000, seed=i) for i in range(40)]

    async def main():
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        t = asyncio.create_task(ticker())
        jobs = [rt.submit(graphrun.seed(), [x]) for x in xs]
        firsts = await asyncio.gather(*(asyncio.wait_for(j, 30) for j in jobs))
        seconds = await asyncio.gather(*(j for j in jobs))  # done already: at once
        stop.set()
        await t
        return firsts, seconds, ticks

    firsts, seconds, ticks = asyncio.run(main())
    assert ticks > 0
    for x, a, b in zip(xs, firsts, seconds):
        assert same_bits(a[0], seed_ref(x)) and same_bits(b[0], seed_ref(x))


def test_await_shared_by_two_coroutines_before_it_is_done(gated):
    rt, g, gate = gated
    xs = [rand(100, seed=i) for i in range(3)]
    x0 = [x.copy() for x in xs]
    job = rt.submit(g, xs)

    async def main():
        a = asyncio.ensure_future(job)
        b = asyncio.ensure_future(job)
        await asyncio.sleep(0.05)
        assert not a.done() and not b.done()
        gate.open()
        return await asyncio.wait_for(asyncio.gather(a, b), 30)

    gate.wait_entered(1)
    ra, rb = asyncio.run(main())
    for x, ya, yb in zip(x0, ra, rb):
        assert same_bits(ya, plus_one(x)) and same_bits(yb, plus_one(x))


def test_await_raises_the_jobs_failure(gated):
    rt, g, gate = gated
    job = rt.submit(g, [rand(10) for _ in range(3)])
    gate.wait_entered(1)
    job.cancel()
    gate.open()

    async def main():
        return await asyncio.wait_for(job, 30)

    with pytest.raises(graphrun.Canceled):
        asyncio.run(main())


def test_cancelling_the_awaiting_task_cancels_the_job(gated):
    rt, g, gate = gated
    job = rt.submit(g, [rand(10, seed=i) for i in range(4)])
    gate.wait_entered(1)

    async def main():
        task = asyncio.ensure_future(job)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    gate.open()
    assert job.wait(10)
    p = job.progress()
    assert (p.done, p.canceled) == (1, 3), "the queued indices were not canceled"


def test_await_from_loops_on_two_threads(new_runtime):
    rt = new_runtime(backend="host")
    x = rand(50000, seed=7)
    job = rt.submit(graphrun.seed(), [x])
    got = [None, None]

    def on_thread(k):
        got[k] = asyncio.run(asyncio.wait_for(job, 30))[0]

    ts = [threading.Thread(target=on_thread, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert all(same_bits(y, seed_ref(x)) for y in got)


# Callbacks.

def test_on_complete_runs_on_a_python_thread_before_wait_returns(rt):
    seen = []

    def cb(job):
        time.sleep(0.2)
        seen.append((threading.current_thread().name, job.done(), job.error()))

    xs = [rand(1000, seed=i) for i in range(5)]
    job = rt.submit(graphrun.seed(), xs, on_complete=cb)
    assert job.wait(10)
    assert seen == [("graphrun-callbacks", False, None)]


def test_on_complete_may_submit_and_may_raise(rt, caplog):
    follow = []
    done = threading.Event()

    def second(job):
        done.set()

    def first(job):
        y = rand(300, seed=2)
        follow.append((y, seed_ref(y), job.runtime.submit(graphrun.seed(), [y],
                                                         on_complete=second)))
        raise RuntimeError("a callback's own bug")

    with caplog.at_level("ERROR", logger="graphrun"):
        job = rt.submit(graphrun.seed(), [rand(300, seed=1)], on_complete=first)
        assert job.wait(10)
        assert done.wait(10)
    y, want, job2 = follow[0]
    assert job2.wait(10) and same_bits(job2.result()[0], want)
    assert any("on_complete raised" in r.getMessage() for r in caplog.records)
    assert job.error() is None  # the callback's exception is not the job's


def test_on_complete_sees_failures(gated):
    rt, g, gate = gated
    got = []
    job = rt.submit(g, [rand(4) for _ in range(3)], on_complete=lambda j: got.append(
        (type(j.error()), j.progress().canceled)))
    gate.wait_entered(1)
    job.cancel()
    gate.open()
    job.wait(10)
    assert got == [(graphrun.Canceled, 2)]


def test_wait_inside_a_callback_does_not_deadlock(rt):
    # The callback thread cannot wait for itself: waiting there for another job uses the
    # library's own wait and finishes that job there and then.
    other = rt.submit(graphrun.seed(), [rand(2_000_000, seed=3)])
    results = []

    def cb(job):
        results.append(other.wait(30))
        results.append(other.done())

    job = rt.submit(graphrun.seed(), [rand(10)], on_complete=cb)
    assert job.wait(30) and results == [True, True]


def test_close_from_a_callback(new_runtime, backend):
    rt = new_runtime(backend=backend)
    other = rt.submit(graphrun.seed(), [rand(500_000, seed=i) for i in range(4)])
    closed = threading.Event()

    def cb(job):
        job.runtime.close()  # waits for `other` here, on the callback thread
        closed.set()

    job = rt.submit(graphrun.seed(), [rand(10)], on_complete=cb)
    assert job.wait(60) and closed.is_set()
    assert other.done() and other.error() is None
    with pytest.raises(graphrun.InvalidUsage):
        rt.submit(graphrun.seed(), [rand(10)])


def test_many_threads_submit_at_once(new_runtime, backend, kind):
    rt = new_runtime(backend=backend, budget="32MiB")
    n_threads, jobs_each = 8, 12
    barrier = threading.Barrier(n_threads)
    errors = []

    def work(t):
        try:
            barrier.wait()
            for j in range(jobs_each):
                n = 1 + (t * 7919 + j * 104729) % 50000
                xs = [make(kind, rand(n, seed=t * 100 + j + k)) for k in range(3)]
                want = [seed_ref(to_np(x)) for x in xs]
                out = rt.run(graphrun.seed(), xs)
                for o, w in zip(out, want):
                    if not same_bits(o, w):
                        errors.append(f"thread {t} job {j}: wrong output")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {t}: {e!r}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]
    s = rt.stats()
    assert s["jobs_completed"] == n_threads * jobs_each
    assert s["jobs_failed"] == 0
    assert sum(d["tensors_done"] for d in s["devices"]) == n_threads * jobs_each * 3


def test_cancel_a_long_job(new_runtime, backend):
    # Work long enough to be stopped on either backend: what ended before the cancel is
    # right, what was canceled is untouched, every index ended exactly once.
    rt = new_runtime(backend=backend, budget="64MiB", workers=2)
    n = 1_000_000 if backend == "host" else 4_000_000
    xs = [np.full(n, i, np.float32) for i in range(64)]
    job = rt.submit(graphrun.seed(), xs, inplace=True)
    job.cancel()
    assert job.wait(60)
    p = job.progress()
    assert p.done + p.canceled + p.failed == 64 and p.failed == 0
    assert p.canceled > 0, "the job ended before the cancel: make it longer"
    want = {i: seed_ref(np.float32([i]))[0] for i in range(64)}
    for i in range(64):
        state, st = job.status(i)
        if state == "done":
            assert np.all(xs[i] == want[i])
        else:
            assert (state, st) == ("canceled", graphrun.Status.CANCELED)
            assert np.all(xs[i] == i)  # seed's chunks are each right or untouched: whole here
    assert isinstance(job.error(), graphrun.Canceled)


# ---------------------------------------------------------------------------------------
# Iteration and progress.

def test_iteration_streams_indices_as_they_finish(gated):
    rt, g, gate = gated
    xs = [rand(30, seed=i) for i in range(5)]
    x0 = [x.copy() for x in xs]
    job = rt.submit(g, xs)
    it = iter(job)
    gate.release(1)
    first = next(it)
    assert first == 0
    assert not job.done(), "the first index came only when the job was complete"
    assert same_bits(job.outputs[0], plus_one(x0[0]))
    gate.open()
    rest = list(it)
    assert [first] + rest == [0, 1, 2, 3, 4]


def test_iteration_over_a_failed_job_raises_after_the_done(gated):
    rt, g, gate = gated
    job = rt.submit(g, [rand(3) for _ in range(4)])
    gate.wait_entered(1)
    job.cancel()
    gate.open()
    got = []
    with pytest.raises(graphrun.Canceled):
        for i in job:
            got.append(i)
    assert got == [0]


def test_iteration_on_any_backend(rt, kind):
    xs = [make(kind, rand(1 + 37 * i, seed=i)) for i in range(40)]
    want = [seed_ref(to_np(x)) for x in xs]
    job = rt.submit(graphrun.seed(), xs)
    seen = []
    for i in job:
        assert same_bits(job.outputs[i], want[i])
        seen.append(i)
    assert sorted(seen) == list(range(40)) and len(seen) == 40


def test_progress_bar_text(rt, capsys):
    job = rt.submit(graphrun.seed(), [rand(100, seed=i) for i in range(7)])
    job.wait(progress="text")
    err = capsys.readouterr().err
    assert "graphrun: 7/7 tensors (0 failed, 0 canceled)" in err


def test_progress_bar_tqdm(rt, capsys):
    pytest.importorskip("tqdm")
    rt.run(graphrun.seed(), [rand(100, seed=i) for i in range(9)], progress=True)
    err = capsys.readouterr().err
    assert "graphrun" in err and "9/9" in err and "tensor" in err


# ---------------------------------------------------------------------------------------
# Ctrl-C.

def _interrupt_after(seconds):
    threading.Timer(seconds, _thread.interrupt_main).start()


@pytest.fixture
def sigint():
    """Python's own SIGINT handler, which raises KeyboardInterrupt: a process started in
    the background by a shell (as CI may start the suite) inherits SIGINT ignored, and then
    Python installs none, so that neither Ctrl-C nor interrupt_main would do anything."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_ctrl_c_in_wait_cancels_the_job(gated, sigint):
    rt, g, gate = gated
    xs = [rand(10, seed=i) for i in range(4)]
    job = rt.submit(g, xs)
    gate.wait_entered(1)
    _interrupt_after(0.2)
    threading.Timer(0.5, gate.open).start()
    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        job.wait(30)
    assert time.monotonic() - t < 10
    assert job.done(), "wait re-raised before the job had ended"
    assert job.progress().canceled == 3
    assert job.status(0)[0] == "done"


def test_ctrl_c_in_run_and_in_iteration(gated, sigint):
    rt, g, gate = gated
    _interrupt_after(0.3)
    threading.Timer(0.6, gate.open).start()
    with pytest.raises(KeyboardInterrupt):
        rt.run(g, [rand(10) for _ in range(3)])
    assert not rt._live_jobs()
    gate.reset()
    job = rt.submit(g, [rand(10) for _ in range(3)])
    _interrupt_after(0.3)
    threading.Timer(0.6, gate.open).start()
    with pytest.raises(KeyboardInterrupt):
        list(job)
    assert job.done() and job.progress().canceled == 2


# ---------------------------------------------------------------------------------------
# The memory contract: every array of a job lives until the job is complete.

class _Tracked(np.ndarray):
    """An ndarray subclass, so that a weakref can watch one array object."""


def test_arrays_live_until_the_job_completes(gated):
    rt, g, gate = gated
    refs = []

    def submit():
        xs = [rand(1000, seed=i).view(_Tracked) for i in range(3)]
        given = np.zeros(1000, np.float32).view(_Tracked)
        refs.extend(weakref.ref(x) for x in xs)
        refs.append(weakref.ref(given))
        want = [plus_one(x) for x in xs]
        job = rt.submit(g, [[xs[0], xs[1], xs[2]]],
                        [[None, given, None]], inplace=True)  # in place, given, in place
        return job, want

    job, want = submit()
    gate.wait_entered(1)
    gc.collect()
    assert not job.done()
    assert all(r() is not None for r in refs), "an array of a running job was freed"
    jid = weakref.ref(job)
    del job
    gc.collect()
    assert jid() is not None, "the job itself was freed while running"
    assert all(r() is not None for r in refs)
    gate.open()
    job = jid()
    assert job.wait(10)
    out = job.result()
    assert same_bits(out[0], want[0]) and same_bits(out[1], want[1])
    assert out[1] is refs[3]() and same_bits(out[2], want[2])
    del out, job
    gc.collect()
    assert jid() is None, "a complete job was never freed"
    assert all(r() is None for r in refs), "arrays outlived their job"


def test_new_outputs_in_memory_like_the_inputs(rt, kind):
    # Ordinary in, ordinary out; pinned in, pinned out (freed with the last view).
    gc.collect()
    g = graphrun.Graph.load(__import__("helpers").example("sum.graph"))
    before = dict(_pinned.live)
    out = rt.run(g, [make(kind, rand(100, seed=i)) for i in range(5)])
    assert all(is_kind(kind, o) for o in out)
    assert _pinned.live == before, "pinned memory for ordinary inputs"
    xs = [graphrun.pinned(rand(100, seed=i)) for i in range(5)]
    before = dict(_pinned.live)
    out = rt.run(g, xs)
    assert all(type(o) is np.ndarray and _pinned.is_pinned(o) for o in out)
    assert _pinned.live["blocks"] == before["blocks"] + 5
    views = [o[:1] for o in out]
    del out
    gc.collect()
    assert _pinned.live["blocks"] == before["blocks"] + 5, "freed while views remain"
    del views
    gc.collect()
    assert _pinned.live == before


def _block_of(o):
    """What holds a new output's memory: its block when it is a row of one, else itself."""
    if torch is not None and isinstance(o, torch.Tensor):
        return o.untyped_storage().data_ptr()
    return id(o.base if o.base is not None else o)


def test_new_outputs_of_small_tensors_share_blocks(rt, kind):
    # graphrun allocates the NumPy outputs of small tensors as rows of shared blocks, one
    # block per kind and shape for up to GROUP_BLOCK bytes (an allocation each cost more
    # than a 64 KiB tensor's copy); a larger tensor's output is an array of its own. Each
    # row is memory of its own, right, and keeps its block alive. Tensors keep a storage
    # of their own each (torch.save would write a row's whole block).
    from graphrun import _plan
    per = _plan.GROUP_BLOCK // (64 << 10)  # 64 KiB rows a block
    shapes = [(16384,), (64, 256)]  # interleaved: each shape has blocks of its own
    xs = [make(kind, rand(16384, seed=i).reshape(shapes[i % 2])) for i in range(2 * per + 6)]
    big = make(kind, rand(_plan.GROUP_TENSOR_MAX // 4 + 16, seed=999))
    x0 = [to_np(x).copy() for x in xs + [big]]
    out = rt.run(graphrun.seed(), xs + [big])
    assert all(is_kind(kind, o) for o in out)
    for o, x, x_0 in zip(out, xs + [big], x0):
        assert tuple(o.shape) == tuple(x.shape)
        assert same_bits(o, seed_ref(x_0)) and same_bits(x, x_0)
    ranges = sorted((data_ptr(o), data_ptr(o) + to_np(o).nbytes) for o in out)
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])), "outputs overlap"
    small = out[:-1]
    for s in shapes:
        rows = [o for o in small if tuple(o.shape) == s]
        blocks = {_block_of(o) for o in rows}
        want = 2 if kind == "numpy" else len(rows)
        assert len(rows) == per + 3 and len(blocks) == want, (s, len(blocks))
    assert _block_of(out[-1]) not in {_block_of(o) for o in small}
    if kind == "numpy":
        assert out[-1].base is None and all(o.base is not None for o in small)
    else:
        assert all(o._base is None and o.untyped_storage().nbytes() == to_np(o).nbytes
                   for o in out)


def test_new_tensor_outputs_on_the_cpu_whatever_the_default_device(rt):
    # A program that sets PyTorch's default device still gets CPU tensors from graphrun.
    if torch is None:
        pytest.skip("PyTorch is not installed")
    xs = [torch.rand(16384) for _ in range(3)] + [torch.rand(10, dtype=torch.float64)]
    g = graphrun.Graph.load(__import__("helpers").example("sum.graph"))
    torch.set_default_device("meta")
    try:
        out = rt.run(graphrun.seed(), xs[:3])
        sums = rt.run(g, [x.float() if x.dtype != torch.float32 else x for x in xs[3:]])
    finally:
        torch.set_default_device(None)
    assert all(o.device.type == "cpu" for o in out + sums)
    assert all(same_bits(o, seed_ref(x.numpy())) for o, x in zip(out, xs))


def test_new_outputs_of_arrays_with_many_dimensions(rt):
    # A block adds a dimension to its rows': an array with NumPy's most has its own.
    x = rand(16).reshape((16,) + (1,) * 31)
    out = rt.run(graphrun.seed(), [x, x.copy()])
    assert all(o.shape == x.shape and same_bits(o, seed_ref(x)) for o in out)


def test_new_pinned_outputs_share_blocks_freed_with_the_last_row(rt):
    from graphrun import _plan
    gc.collect()
    n = _plan.GROUP_BLOCK // (64 << 10) + 1  # one block and a lone row
    xs = [graphrun.pinned(rand(16384, seed=i)) for i in range(n)]
    before = dict(_pinned.live)
    out = rt.run(graphrun.seed(), xs)
    assert all(_pinned.is_pinned(o) for o in out)
    assert all(same_bits(o, seed_ref(x)) for o, x in zip(out, xs))
    assert _pinned.live["blocks"] == before["blocks"] + 2, "a block, and the lone row's own"
    kept = out[0]
    del out
    gc.collect()
    assert _pinned.live["blocks"] == before["blocks"] + 1, "the kept row's block"
    del kept
    gc.collect()
    assert _pinned.live == before


@pytest.mark.parametrize("out_type", ["float32", "bfloat16"])
def test_new_outputs_of_small_pinned_tensors_are_rows_of_pinned_blocks(rt, monkeypatch,
                                                                      out_type):
    # PyTorch's pin_memory() tensors (what PyTorch says is pinned; on a machine without a
    # GPU, tensors the test says are). Their new outputs of up to GROUP_TENSOR_MAX bytes
    # are row views of pinned blocks of up to GROUP_BLOCK bytes from PyTorch's allocator,
    # not one torch.empty(pin_memory=True) each (5 us and a driver allocation a tensor).
    # PyTorch's pinned allocator needs a GPU: here the blocks are CPU tensors, counted.
    if torch is None:
        pytest.skip("PyTorch is not installed")
    from graphrun import _plan
    step = 16384 * (4 if out_type == "float32" else 2)  # an output's bytes
    per = _plan.GROUP_BLOCK // step
    n = per + 1  # a block and a lone row
    g = graphrun.Graph.parse(f"buffer x float32\nbuffer y {out_type}\nh2d l: in0 -> x\n"
                             "kernel c: cast(x) -> y\nd2h s: y -> out0\nl -> c -> s\n")
    vals = [np.arange(16384, dtype=np.float32) % 128 + i for i in range(n)]
    xs = [torch.from_numpy(v.copy()) for v in vals]
    said = {x.data_ptr() for x in xs}
    blocks = []

    def pinned_block(torch_, shape, name):
        blocks.append(torch_.empty(shape, dtype=getattr(torch_, name)))
        return blocks[-1]

    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self: self.data_ptr() in said)
    monkeypatch.setattr(_plan, "_torch_pinned", pinned_block)
    out = rt.run(g, xs)
    assert all(str(o.dtype) == f"torch.{out_type}" and o.shape == (16384,) for o in out)
    wrong = [i for i, v in enumerate(vals) if not np.array_equal(out[i].float().numpy(), v)]
    assert wrong == [], "small integers are exact in both types"
    assert [tuple(b.shape) for b in blocks] == [(per, 16384), (16384,)], "a block, a lone row"
    rows = out[:-1]
    assert all(r._base is blocks[0] for r in rows) and out[-1] is blocks[1]
    assert all(b.data_ptr() - a.data_ptr() == step for a, b in zip(rows, rows[1:]))
    out[2].add_(1)  # a row of its own: written in place without touching its neighbours
    assert np.array_equal(out[1].float().numpy(), vals[1])
    assert np.array_equal(out[3].float().numpy(), vals[3])
    r = out[4].requires_grad_()  # and autograd takes it (unbind's views it refuses)
    (r.float() * 2).sum().backward()
    assert r.grad is not None and r.grad.shape == r.shape


def test_torch_tensors_live_until_the_job_completes(gated):
    if torch is None:
        pytest.skip("PyTorch is not installed")
    rt, g, gate = gated
    refs = []

    def submit():
        xs = [torch.rand(500) for _ in range(2)]
        refs.extend(weakref.ref(x) for x in xs)
        return rt.submit(g, xs, inplace=True), [plus_one(x.numpy()) for x in xs]

    job, want = submit()
    gate.wait_entered(1)
    gc.collect()
    assert all(r() is not None for r in refs), "a tensor of a running job was freed"
    gate.open()
    out = job.result()
    assert [o is r() for o, r in zip(out, refs)] == [True, True]
    assert all(same_bits(o, w) for o, w in zip(out, want))
    del out, job
    gc.collect()
    assert all(r() is None for r in refs)
