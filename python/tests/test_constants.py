"""constants= (docs/PYTHON.md, Constants): a job's constants from Python, checked against
the graph's declarations (Graph.constants), copied to each device once per job, and held
until the job is complete, as every array of a job is."""
import gc
import weakref

import numpy as np
import pytest

import graphrun
from helpers import make, rand, same_bits, to_np

NORM = ("const mean float32 [3]\nconst sd float32 [1, 3]\nbuffer x\nbuffer y\n"
        "h2d l: in0 -> x\nkernel k: normalize(x, mean, sd) -> y\nd2h s: y -> out0\n")


def test_submit_constants_of_a_spec(new_runtime, backend, kind):
    rt = new_runtime(backend=backend)
    g = graphrun.Graph.parse(NORM, "norm.graph")
    assert g.constants == (graphrun.Constant("mean", "float32", (3,)),
                           graphrun.Constant("sd", "float32", (1, 3)))
    mean = make(kind, np.array([1, 2, 3], np.float32))
    sd = make(kind, np.array([[2, 4, 8]], np.float32))
    xs = [make(kind, rand(30, seed=i).reshape(10, 3)) for i in range(4)]
    before = rt.stats()["devices"][0]["constants_copied"]
    ys = rt.run(g, xs, constants={"mean": mean, "sd": sd})
    for x, y in zip(xs, ys):
        want = (to_np(x) - to_np(mean)) / to_np(sd)
        assert np.allclose(to_np(y), want, rtol=1e-6)
    assert rt.stats()["devices"][0]["constants_copied"] - before == 1
    assert "const mean float32 [3], const sd float32 [1, 3]" in repr(g)


def test_submit_constants_refused_clearly(new_runtime):
    rt = new_runtime(backend="host")
    g = graphrun.Graph.parse("const W float32 [2, 2]\nbuffer x\nbuffer y\n"
                             "h2d l: in0 -> x\nkernel k: normalize(x, W, W) -> y\n"
                             "d2h s: y -> out0\n", "w.graph")
    xs = [rand(4)]
    ok = np.ones((2, 2), np.float32)
    cases = [
        (None, "declares 'W' (float32 [2, 2]), not given"),
        ({}, "not given"),
        ({"W": ok, "V": ok}, "has no constant 'V'"),
        ({"W": ok.astype(np.float64)}, "holds float64 but w.graph declares it float32"),
        ({"W": np.ones(5, np.float32)}, "has 5 elements"),
        ({"W": np.ones((4, 4), np.float32)[::2, ::2]}, "not C-contiguous"),
        ({"W": [1.0, 2.0, 3.0, 4.0]}, "is a list, not an array"),
        ([ok], "constants must be a dict"),
    ]
    for given, text in cases:
        with pytest.raises(graphrun.InvalidArgument) as e:
            rt.submit(g, xs, constants=given)
        assert text in str(e.value), (given, str(e.value))
    # Of another shape but the declared size, and non-contiguous with copy=True: taken.
    y1 = rt.run(g, xs, constants={"W": np.full(4, 2, np.float32)})
    y2 = rt.run(g, xs, constants={"W": np.full((4, 4), 2, np.float32)[::2, ::2]}, copy=True)
    assert same_bits(y1[0], y2[0])
    with pytest.raises(graphrun.InvalidArgument, match="has no constant 'W'"):
        rt.submit(graphrun.seed(), xs, constants={"W": ok})


def test_constants_held_until_the_job_is_complete(new_runtime, gate):
    # The gate kernel holds the job's one iteration: the caller's constant, dropped
    # meanwhile, stays alive (the runtime still reads it), and goes once the job is
    # complete.
    __import__("gate")  # registers py_gate
    rt = new_runtime(backend="host", workers=1)
    g = graphrun.Graph.parse("const mean [1]\nconst sd [1]\nbuffer x\nbuffer y\n"
                             "h2d l: in0 -> x\nkernel n: normalize(x, mean, sd) -> y\n"
                             "kernel g: py_gate(y) -> x\nd2h s: x -> out0\n", "held.graph")
    mean, sd = np.full(1, 2, np.float32), np.full(1, 4, np.float32)
    refs = weakref.ref(mean), weakref.ref(sd)
    x = rand(10)
    job = rt.submit(g, [x], constants={"mean": mean, "sd": sd})
    del mean, sd
    gate.wait_entered(1)
    gc.collect()
    assert all(r() is not None for r in refs), "a constant was freed while its job ran"
    gate.open()
    (y,) = job.result(10)
    assert np.allclose(y, (x - 2) / 4 + 1, rtol=1e-6)
    del job
    gc.collect()
    assert all(r() is None for r in refs), "a constant still held after its job completed"
