"""Jobs from Python: inputs and outputs of every form, element types, shapes, and every
refusal, on each backend and with each kind of array."""
import numpy as np
import pytest

import graphrun
from helpers import (example, is_kind, make, ml_dtypes, rand, same_bits, seed_ref, to_np,
                     torch, data_ptr)


def test_seed_new_outputs_by_default(rt, kind):
    # As NumPy and PyTorch do: new arrays of the inputs' kind and shape, the inputs left
    # as they were (a graph that could write over them included).
    sizes = [1, 7, 1000, 4097, 100_003, 3_000_000]  # the last is larger than 64 MiB / 3
    xs = [make(kind, rand(n, seed=n)) for n in sizes]
    x0 = [to_np(x).copy() for x in xs]
    out = rt.run(graphrun.seed(), xs)
    assert len(out) == len(xs)
    for i, (o, x) in enumerate(zip(out, xs)):
        assert o is not x and is_kind(kind, o) and tuple(o.shape) == tuple(x.shape), i
        assert same_bits(o, seed_ref(x0[i])), f"index {i} differs from NumPy's float32 seed"
        assert same_bits(x, x0[i]), f"index {i}: the input was written"


def test_expr_graph_leaves_the_reference_data(rt, kind):
    # The case: expr(x, "...") -> y, ys = rt.run(g, xs); xs are the reference.
    g = graphrun.Graph.parse('buffer x\nbuffer y\nh2d l: in0 -> x\n'
                             'kernel e: expr(x, "x * 2 + 1") -> y\nd2h s: y -> out0\n'
                             'l -> e -> s\n')
    assert g.in_place == (frozenset({0}),)  # the graph would let y go over x
    xs = [make(kind, rand(1000, seed=i)) for i in range(4)]
    x0 = [to_np(x).copy() for x in xs]
    ys = rt.run(g, xs)
    for x, y, r in zip(xs, ys, x0):
        assert same_bits(x, r), "the inputs were overwritten"
        assert same_bits(y, r * np.float32(2) + np.float32(1))


def test_out_keyword_and_inplace_where_the_graph_allows(rt, kind):
    xs = [make(kind, rand(500, seed=i)) for i in range(3)]
    x0 = [to_np(x).copy() for x in xs]
    ys = [make(kind, np.zeros(500, np.float32)) for _ in range(3)]
    out = rt.run(graphrun.seed(), xs, out=ys)  # NumPy's spelling of outputs=
    assert all(o is y and same_bits(y, seed_ref(r)) for o, y, r in zip(out, ys, x0))
    assert all(same_bits(x, r) for x, r in zip(xs, x0))
    with pytest.raises(TypeError, match="not both"):
        rt.submit(graphrun.seed(), xs, ys, out=ys)
    # inplace=True asks, the graph decides: sum's fixed output cannot go over its input.
    g = graphrun.Graph.load(example("sum.graph"))
    out = rt.run(g, xs, inplace=True)
    assert all(o is not x and tuple(o.shape) == (1,) for o, x in zip(out, xs))
    assert all(same_bits(x, r) for x, r in zip(xs, x0))


def test_seed_in_place_zero_copy(rt, kind):
    sizes = [1, 7, 1000, 4097, 100_003, 3_000_000]  # the last is larger than 64 MiB / 3
    xs = [make(kind, rand(n, seed=n)) for n in sizes]
    want = [seed_ref(to_np(x)) for x in xs]
    ptrs = [data_ptr(x) for x in xs]
    out = rt.run(graphrun.seed(), xs, inplace=True)
    assert len(out) == len(xs)
    for i, (o, x, w) in enumerate(zip(out, xs, want)):
        assert o is x, f"index {i}: not in place"
        assert data_ptr(x) == ptrs[i]
        assert same_bits(x, w), f"index {i} differs from NumPy's float32 seed"


def test_seed_two_dimensional_keeps_shape(rt, kind):
    x = make(kind, rand(12 * 34, seed=3).reshape(12, 34))
    x0 = to_np(x).copy()
    want = seed_ref(x0)
    (y,) = rt.run(graphrun.seed(), [x])
    assert y is not x and tuple(y.shape) == (12, 34) and same_bits(x, x0)
    assert same_bits(y, want)
    (y,) = rt.run(graphrun.seed(), [x], inplace=True)
    assert y is x and tuple(y.shape) == (12, 34)
    assert same_bits(y, want)


def test_per_port_form_and_two_outputs(rt, kind):
    dag = graphrun.Graph.load(example("dag.graph"))
    a = [make(kind, rand(5000, seed=i)) for i in range(3)]
    b = [make(kind, rand(5000, seed=10 + i)) for i in range(3)]
    a0 = [to_np(x).copy() for x in a]
    b0 = [to_np(x).copy() for x in b]
    out0, out1 = rt.run(dag, [a, b])
    for i in range(3):
        d = np.float32(2.0) * a0[i] + np.float32(-1.0) * b0[i]
        assert same_bits(out0[i], seed_ref(d)), i
        assert same_bits(out1[i], a0[i] * np.float32(3)), i
        assert is_kind(kind, out0[i]) and is_kind(kind, out1[i])
        assert same_bits(a[i], a0[i]) and same_bits(b[i], b0[i]), "an input was written"
    out0, out1 = rt.run(dag, [a, b], inplace=True)
    for i in range(3):
        d = np.float32(2.0) * a0[i] + np.float32(-1.0) * b0[i]
        assert same_bits(out0[i], seed_ref(d)), i
        assert same_bits(out1[i], a0[i] * np.float32(3)), i
        # out0 may go over in0 (its loads come first), out1 then needs memory of its own:
        # out1 may not go over in1 (store_t does not wait for load_b).
        assert out0[i] is a[i]
        assert out1[i] is not b[i] and is_kind(kind, out1[i])
        assert same_bits(b[i], b0[i]), "input 1 was written"


def test_given_outputs_leave_inputs_alone(rt, kind):
    xs = [make(kind, rand(777, seed=i)) for i in range(4)]
    ys = [make(kind, np.zeros(777, np.float32)) for _ in range(4)]
    x0 = [to_np(x).copy() for x in xs]
    out = rt.run(graphrun.seed(), xs, ys)
    for i in range(4):
        assert out[i] is ys[i]
        assert same_bits(ys[i], seed_ref(x0[i]))
        assert same_bits(xs[i], x0[i])


def test_outputs_allocated_for_another_type(rt, kind):
    g = graphrun.Graph.load(example("preprocess.graph"))
    img = make(kind, (np.arange(4 * 5 * 3) % 251).astype(np.uint8).reshape(4, 5, 3))
    mean = make(kind, np.array([123.675, 116.28, 103.53], np.float32))
    std = make(kind, np.array([58.395, 57.12, 57.375], np.float32))
    (y,) = rt.run(g, [[img], [mean], [std]])
    assert is_kind(kind, y)
    assert tuple(y.shape) == (4, 5, 3) and to_np(y).dtype == np.float32
    want = (to_np(img).astype(np.float32) - to_np(mean)) / to_np(std)
    assert same_bits(y, want)


def test_fixed_output_port(rt, kind):
    g = graphrun.Graph.load(example("sum.graph"))
    assert g.outputs == (graphrun.Port("float32", 1),)
    xs = [make(kind, rand(n, seed=n)) for n in (10, 1000, 54321)]
    out = rt.run(g, xs)
    for x, o in zip(xs, out):
        assert tuple(o.shape) == (1,)
        want = np.float32(to_np(x).astype(np.float64).sum())
        assert abs(float(to_np(o)[0]) - float(want)) <= 1e-6 * abs(float(want))


def _softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4), (2, 1, 3, 7), (2, 3, 2, 2, 5)])
def test_shapes_reach_the_kernel(rt, kind, shape):
    # softmax is row-wise over the last dimension: it sees the shape given. Five
    # dimensions: the leading ones are merged, the last stays.
    g = graphrun.Graph.load(example("softmax.graph"))
    x0 = rand(int(np.prod(shape)), seed=5).reshape(shape) * 4
    x = make(kind, x0)
    (y,) = rt.run(g, [x])
    assert tuple(y.shape) == shape
    np.testing.assert_allclose(to_np(y), _softmax(x0), rtol=1e-6, atol=1e-7)
    flat = rt.run(g, [make(kind, x0.reshape(-1))])[0]
    assert not np.allclose(to_np(flat).reshape(shape), to_np(y)), \
        "one row and many rows gave the same: the shape did not reach the kernel"


class _Iface:
    """An object that is only an __array_interface__ over a NumPy array's memory."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__


class _Sub(np.ndarray):
    """An ndarray subclass: not a plain ndarray, so the general path reads it."""


def test_one_job_mixing_every_path(rt, kind):
    # Plain arrays (the fast path) between objects the general path reads, a read-only
    # input, a non-contiguous one copied, and a different shape at every index (five
    # dimensions too): softmax is row-wise, so a wrong shape for any index shows.
    g = graphrun.Graph.load(example("softmax.graph"))
    shapes = [(7,), (3, 4), (2, 3, 4), (1, 2, 3, 4), (2, 1, 2, 3, 2), (3, 4), (5, 2)]
    base = [rand(int(np.prod(s)), seed=40 + i).reshape(s) * 4 for i, s in enumerate(shapes)]
    ro = base[3].copy()
    ro.flags.writeable = False
    wide = np.zeros((5, 4), np.float32)
    wide[:, ::2] = base[6]
    xs = [make(kind, base[0]), _Iface(base[1].copy()), base[2].copy().view(_Sub), ro,
          make(kind, base[4]), make(kind, base[5]), wide[:, ::2]]
    out = rt.run(g, [xs], copy=True)
    for i, (o, b) in enumerate(zip(out, base)):
        assert tuple(np.shape(to_np(o) if not isinstance(o, _Iface) else o.a)) == shapes[i]
        got = o.a if isinstance(o, _Iface) else to_np(o)
        np.testing.assert_allclose(got, _softmax(b), rtol=1e-6, atol=1e-7, err_msg=str(i))
    assert out[3] is not ro and np.array_equal(ro, base[3]), "a read-only input was written"


def test_refusal_names_the_index_in_a_long_job(rt, kind):
    xs = [make(kind, rand(64, seed=i)) for i in range(300)]
    x0 = [to_np(x).copy() for x in xs]
    xs[217] = make(kind, rand(64, seed=217).astype(np.float64))
    e = _refused(rt, graphrun.seed(), xs, index=217)
    assert "input 0 of index 217 holds float64" in e.message
    ys = [make(kind, np.zeros(64, np.float32)) for _ in range(200)]
    ys[5] = make(kind, np.zeros(65, np.float32))
    e = _refused(rt, graphrun.seed(), xs[:200], ys, index=5)
    assert "output 0 of index 5 has 65 elements; it needs 64" in e.message
    big = np.zeros(64, ">f4")  # not native: the fast path must not take it
    e = _refused(rt, graphrun.seed(), xs[:3] + [big], index=3)
    assert ">f4" in e.message
    assert all(same_bits(x, w) for x, w in zip(xs[:217], x0[:217])), "a refused job wrote"


# Every element type, in and out, through `cast` (exact for these small integers).
TYPES = ["float32", "float16", "bfloat16", "float64", "int32", "uint8"]


def _typed(kind, name, values):
    """`values` (integers) as an array of graphrun type `name`, and how to read it back."""
    if name == "bfloat16":
        if kind == "torch":
            return torch.tensor(values, dtype=torch.float32).to(torch.bfloat16)
        if ml_dtypes is not None:
            return np.array(values, dtype=ml_dtypes.bfloat16)
        bits = (np.array(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)
        return graphrun.reinterpret(bits, "bfloat16")
    return make(kind, np.array(values, dtype=name))


def _values(x):
    if isinstance(x, graphrun._arrays.Reinterpreted):
        x = x.array
    a = to_np(x)
    if a.dtype == np.uint16 or a.dtype.name == "bfloat16":
        return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


@pytest.mark.parametrize("t", TYPES)
def test_each_type_in(rt, kind, t):
    g = graphrun.Graph.parse(f"buffer x {t}\nbuffer y float64\nh2d l: in0 -> x\n"
                             "kernel c: cast(x) -> y\nd2h s: y -> out0\nl -> c -> s\n")
    assert g.inputs == (graphrun.Port(t, None),)
    vals = list(range(0, 250, 7))
    x = _typed(kind, t, vals)
    (y,) = rt.run(g, [x])
    assert to_np(y).dtype == np.float64
    assert np.array_equal(to_np(y), np.array(vals, np.float64))


@pytest.mark.parametrize("t", TYPES)
def test_each_type_out(rt, kind, t):
    g = graphrun.Graph.parse(f"buffer x float64\nbuffer y {t}\nh2d l: in0 -> x\n"
                             "kernel c: cast(x) -> y\nd2h s: y -> out0\nl -> c -> s\n")
    vals = list(range(0, 250, 9))
    (y,) = rt.run(g, [make(kind, np.array(vals, np.float64))])
    assert is_kind(kind, y)
    if kind == "torch":
        assert str(y.dtype) == f"torch.{t}"
    elif t == "bfloat16":
        assert to_np(y).dtype == (np.dtype(ml_dtypes.bfloat16) if ml_dtypes else np.uint16)
    else:
        assert to_np(y).dtype == np.dtype(t)
    assert np.array_equal(_values(y), np.array(vals, np.float64))


def bf16_bits(f32):
    """float32 to bfloat16 bit patterns, rounding to nearest even (no NaNs here)."""
    b = np.asarray(f32, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_float(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def _bf16_array(kind, bits):
    if kind == "torch":
        return torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16)
    if ml_dtypes is not None:
        return bits.copy().view(ml_dtypes.bfloat16)
    return graphrun.reinterpret(bits.copy(), "bfloat16")


@pytest.mark.parametrize("t", ["float16", "bfloat16", "float64"])
def test_typed_arithmetic_matches_numpy(rt, kind, t):
    # float16 and bfloat16 compute in float32 and round once per kernel, on the store.
    g = graphrun.Graph.parse(f"buffer x {t}\nh2d l: in0 -> x\nkernel m: mul(x, 1.5) -> x\n"
                             "kernel a: add(x, 0.25) -> x\nd2h s: x -> out0\n"
                             "l -> m -> a -> s\n")
    base = rand(3000, seed=9) * 8 - 4
    f15, f025 = np.float32(1.5), np.float32(0.25)
    if t == "bfloat16":
        bits = bf16_bits(base)
        x = _bf16_array(kind, bits)
        want = bf16_bits(bf16_float(bf16_bits(bf16_float(bits) * f15)) + f025)
    elif t == "float16":
        x = make(kind, base.astype(np.float16))
        h = to_np(x).astype(np.float32)
        want = ((h * f15).astype(np.float16).astype(np.float32) + f025).astype(np.float16)
    else:
        x = make(kind, base.astype(np.float64))
        want = to_np(x) * 1.5 + 0.25
    (y,) = rt.run(g, [x])
    y = y.array if isinstance(y, graphrun._arrays.Reinterpreted) else y
    assert same_bits(to_np(y), want)


# ---------------------------------------------------------------------------------------
# Refusals: raised before anything runs, naming the index; nothing written.

def _refused(rt, graph, inputs, outputs=None, match=None, exc=graphrun.InvalidArgument,
             index=None, **kw):
    with pytest.raises(exc) as e:
        rt.submit(graph, inputs, outputs, **kw)
    if match is not None:
        assert match in str(e.value), str(e.value)
    if index is not None:
        assert e.value.index == index, str(e.value)
    return e.value


def test_type_mismatch_names_both(rt, kind):
    good = make(kind, rand(100, seed=1))
    g0 = to_np(good).copy()
    bad = make(kind, rand(100, seed=2).astype(np.float64))
    e = _refused(rt, graphrun.seed(), [good, bad], index=1)
    assert "float64" in e.message and "float32" in e.message
    assert e.status == graphrun.Status.INVALID_ARGUMENT
    assert same_bits(good, g0), "a refused job wrote an output"


def test_bfloat16_bits_need_reinterpret(rt):
    g = graphrun.Graph.parse("buffer x bfloat16\nh2d l: in0 -> x\nkernel m: mul(x, 2) -> x\n"
                             "d2h s: x -> out0\nl -> m -> s\n")
    bits = np.full(8, 0x3F80, np.uint16)  # 1.0
    e = _refused(rt, g, [bits], index=0)
    assert "uint16" in e.message and "reinterpret" in e.message
    (y,) = rt.run(g, [graphrun.reinterpret(bits, "bfloat16")])
    assert y is not bits and np.all(y.view(np.uint16) == 0x4000)  # 2.0
    assert np.all(bits == 0x3F80)
    (y,) = rt.run(g, [graphrun.reinterpret(bits, "bfloat16")], inplace=True)
    assert y is bits and np.all(bits == 0x4000)
    with pytest.raises(graphrun.InvalidArgument, match="cannot be read as bfloat16"):
        rt.submit(g, [graphrun.reinterpret(np.zeros(4, np.float32), "bfloat16")])


def test_non_contiguous_refused_or_copied(rt, kind):
    base = make(kind, rand(2000, seed=4))
    b0 = to_np(base).copy()
    view = base[::2]
    e = _refused(rt, graphrun.seed(), [view], index=0, match="not C-contiguous")
    assert "copy=True" in e.message
    assert same_bits(base, b0)
    (y,) = rt.run(graphrun.seed(), [view], copy=True)
    assert y is not view and same_bits(y, seed_ref(b0[::2])) and same_bits(base, b0)
    (y,) = rt.run(graphrun.seed(), [view], copy=True, inplace=True)
    assert y is view
    assert same_bits(to_np(base)[::2], seed_ref(b0[::2]))
    assert same_bits(to_np(base)[1::2], b0[1::2]), "copy=True wrote between the elements"


def test_non_contiguous_output_copied_back(rt, kind):
    x = make(kind, rand(500, seed=6))
    out_base = make(kind, np.full(1000, -1, np.float32))
    y = out_base[1::2]
    rt.run(graphrun.seed(), [x], [y], copy=True)
    assert same_bits(to_np(out_base)[1::2], seed_ref(to_np(x)))
    assert np.all(to_np(out_base)[0::2] == -1)


def test_read_only_input_gets_a_new_output(rt):
    x = rand(300, seed=7)
    x.flags.writeable = False
    (y,) = rt.run(graphrun.seed(), [x])
    assert y is not x and same_bits(y, seed_ref(x))
    e = _refused(rt, graphrun.seed(), [rand(300)], [x], index=0, match="read-only")
    assert "output 0" in e.message


def test_wrong_sizes_refused(rt, kind):
    x = make(kind, rand(100))
    y = make(kind, np.zeros(99, np.float32))
    e = _refused(rt, graphrun.seed(), [x], [y], index=0)
    assert "99" in e.message and "100" in e.message
    g = graphrun.Graph.load(example("preprocess.graph"))
    img = make(kind, np.zeros(12, np.uint8))
    e = _refused(rt, g, [[img], [make(kind, np.zeros(4, np.float32))],
                         [make(kind, np.ones(3, np.float32))]], index=0, match="fixed")
    assert "4 elements" in e.message and "3" in e.message


def test_inputs_forms_refused(rt, kind):
    x = make(kind, rand(10))
    dag = graphrun.Graph.load(example("dag.graph"))
    _refused(rt, dag, [x, x], match="one sequence of arrays per port")
    _refused(rt, dag, [[x]], match="1 sequences for the 2")
    _refused(rt, dag, [[x, x], [x]], match="port 1 has 1")
    _refused(rt, graphrun.seed(), x, match="must be a list")
    _refused(rt, graphrun.seed(), [x], [[x], [x]], match="2 sequences for the 1")
    _refused(rt, graphrun.seed(), [[1.0, 2.0]], match="not an array", index=0)
    _refused(rt, graphrun.seed(), ["abc"], index=0)
    with pytest.raises(TypeError):
        rt.submit("seed", [x])


def test_empty_and_zero_sized_refused_by_the_library(rt, kind):
    e = _refused(rt, graphrun.seed(), [])
    assert e.status == graphrun.Status.INVALID_ARGUMENT
    e = _refused(rt, graphrun.seed(), [make(kind, rand(5)), make(kind, np.zeros(0, np.float32))],
                 index=1)


def test_outputs_overlapping_refused_by_the_library(rt, kind):
    x = make(kind, rand(100, seed=1))
    y = make(kind, rand(100, seed=2))
    x0, y0 = to_np(x).copy(), to_np(y).copy()
    out = make(kind, np.zeros(100, np.float32))
    e = _refused(rt, graphrun.seed(), [x, y], [out, out], match="overlaps")
    assert e.index is not None
    assert same_bits(x, x0) and same_bits(y, y0) and np.all(to_np(out) == 0)


def test_over_budget_names_the_index(new_runtime, backend, kind):
    rt = new_runtime(backend=backend, budget="4MiB" if backend == "cuda" else "1MiB")
    g = graphrun.Graph.load(example("softmax.graph"))  # not splittable: whole tensors only
    budget = rt.info().budget_bytes
    small = make(kind, rand(1000, seed=1))
    s0 = to_np(small).copy()
    n = budget // 4
    assert g.footprint(n) > budget
    big = make(kind, rand(n, seed=2))
    e = _refused(rt, g, [small, big], exc=graphrun.OverBudget, index=1)
    assert e.status == graphrun.Status.OVER_BUDGET
    assert same_bits(small, s0)
    # The seed graph is splittable: the same tensor runs in chunks.
    x = make(kind, rand(n * 3, seed=3))
    want = seed_ref(to_np(x))
    (y,) = rt.run(graphrun.seed(), [x])
    assert same_bits(y, want)


def test_objects_other_than_arrays(rt):
    class Iface:  # __array_interface__ only
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__

    class Dl:  # DLPack only
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, *args, **kw):
            return self.a.__dlpack__(*args, **kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    for wrap in (Iface, Dl):
        a = rand(321, seed=11)
        a0 = a.copy()
        want = seed_ref(a)
        (y,) = rt.run(graphrun.seed(), [wrap(a)])  # a new NumPy array
        assert type(y) is np.ndarray and same_bits(y, want) and same_bits(a, a0)
        (y,) = rt.run(graphrun.seed(), [wrap(a)], inplace=True)
        # NumPy before 2 reads every DLPack capsule as read-only: then the output is new.
        if wrap is Iface or np.from_dlpack(Dl(a)).flags.writeable:
            assert isinstance(y, wrap)
            assert same_bits(a, want), wrap.__name__ + ": not written in place"
        else:
            assert isinstance(y, np.ndarray) and same_bits(y, want)
            assert same_bits(a, a0), "a read-only DLPack view was written"
    buf = bytearray(rand(64, seed=12).tobytes())
    want = seed_ref(np.frombuffer(bytes(buf), np.float32))
    e = _refused(rt, graphrun.seed(), [buf], index=0)  # bytes are uint8
    assert "uint8" in e.message
    (y,) = rt.run(graphrun.seed(), [memoryview(buf).cast("f")])  # the buffer protocol
    assert same_bits(y, want)
    rt.run(graphrun.seed(), [memoryview(buf).cast("f")], inplace=True)
    assert same_bits(np.frombuffer(buf, np.float32), want)
    ro = memoryview(rand(16).tobytes()).cast("f")  # bytes: read-only, so the output is new
    (y,) = rt.run(graphrun.seed(), [ro])
    assert same_bits(y, seed_ref(np.frombuffer(ro, np.float32)))


def test_torch_device_tensor_refused(rt, cuda):
    if torch is None or not torch.cuda.is_available():
        pytest.skip("needs PyTorch with CUDA")
    x = torch.rand(10, device="cuda")
    e = _refused(rt, graphrun.seed(), [x], index=0, match="cuda")
    assert "host" in e.message


def test_in_place_agrees_with_the_library(rt):
    """The package's reading of which outputs may alias which inputs (the library does not
    tell it) against the library's own check, for every pair of ports of these graphs."""
    specs = [graphrun.Graph.load(example(n)) for n in
             ("seed.graph", "dag.graph", "softmax.graph", "seed_unfused.graph",
              "seed_expr.graph")]
    # No dependency lines: the data flow orders the nodes (GRAPH_SPEC.md's example).
    specs.append(graphrun.Graph.parse(
        "buffer x\nbuffer y\nh2d load: in0 -> x\nkernel a: mul(x, 2) -> y\n"
        "d2h out: y -> out0\nkernel b: add(x, 1) -> x\nd2h keep: x -> out1\n"))
    flow = graphrun.Graph.parse(  # out1 reads b, loaded after a's store: not over in1
        "param two = 2\nbuffer a\nbuffer b\nbuffer c\nh2d la: in0 -> a\n"
        "kernel k: mul(a, two * 1) -> c\nd2h s0: c -> out0\nh2d lb: in1 -> b\n"
        "kernel e: expr(a, b, \"a - b\") -> b\nd2h s1: b -> out1\n")
    specs.append(flow)
    specs.append(graphrun.Graph.parse(
        "buffer a\nbuffer b\nbuffer c\nh2d la: in0 -> a\nh2d lb: in1 -> b\n"
        "kernel k: add2(a, b) -> c\nd2h s0: c -> out0\nd2h s1: a -> out1\n"
        "la -> k -> s0\nlb -> k\nla -> s1\n"))
    specs.append(graphrun.Graph.parse(  # two H2D of one port: both must come first
        "buffer a\nbuffer b\nh2d l1: in0 -> a\nh2d l2: in0 -> b\n"
        "kernel k: mul(a, 2) -> a\nd2h s: a -> out0\nd2h t: b -> out1\n"
        "l1 -> k -> s\nl2 -> t  # comment -> x\n"))
    checked = 0
    for g in specs:
        for p in range(len(g.outputs)):
            for q in range(len(g.inputs)):
                ins = [[rand(64, seed=j)] for j in range(len(g.inputs))]
                outs = [[np.zeros(64, np.float32)] for _ in g.outputs]
                outs[p] = [ins[q][0]]
                try:
                    rt.run(g, ins, outs)
                    accepted = True
                except graphrun.InvalidArgument as e:
                    assert "overlaps" in e.message
                    accepted = False
                assert accepted == (q in g.in_place[p]), (g.name, p, q)
                checked += 1
    assert checked == 20
    assert graphrun.Graph.load(example("dag.graph")).in_place == \
        (frozenset({0, 1}), frozenset({0}))
    assert flow.in_place == (frozenset({0}), frozenset({0, 1}))


def test_an_alias_the_library_refuses_is_allocated_instead(rt):
    # Should the package's reading of a spec ever allow an alias the library does not, the
    # job is submitted again with its outputs allocated: here a wrong reading, forced.
    g = graphrun.Graph.load(example("dag.graph"))
    g.in_place = (frozenset({0}), frozenset({1}))  # out1 over in1: the library refuses it
    a, b = rand(100, seed=1), rand(100, seed=2)
    a0, b0 = a.copy(), b.copy()
    out0, out1 = rt.run(g, [[a], [b]])
    assert out0[0] is not a and out1[0] is not b
    assert same_bits(out1[0], a0 * np.float32(3)) and same_bits(b, b0) and same_bits(a, a0)
    assert same_bits(out0[0], seed_ref(np.float32(2) * a0 + np.float32(-1) * b0))


def test_bfloat16_without_ml_dtypes(rt, monkeypatch):
    # Where ml_dtypes is not installed: bfloat16 outputs graphrun allocates are uint16 bit
    # patterns, and pinned bfloat16 arrays too (forced here, whether it is installed or not).
    monkeypatch.setattr(graphrun._arrays, "_ml_dtypes", None)
    g = graphrun.Graph.parse("buffer x float64\nbuffer y bfloat16\nh2d l: in0 -> x\n"
                             "kernel c: cast(x) -> y\nd2h s: y -> out0\nl -> c -> s\n")
    vals = np.array([0.0, 1.0, -2.5, 3.140625], np.float64)
    (y,) = rt.run(g, [vals])
    assert y.dtype == np.uint16
    assert np.array_equal(y, bf16_bits(vals.astype(np.float32)))
    assert graphrun.pinned_empty(3, "bfloat16").dtype == np.uint16
