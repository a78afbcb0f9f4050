#!/usr/bin/env python3
"""expr_numpy.py - NumPy's side of tests/expr_numpy_test.sh: expression kernels against NumPy.

  expr_numpy.py TOOL WORKDIR

TOOL is tests/expr_eval_tool (an expression through the spec parser, the registry and the
host backend, in chunks). Each case writes its inputs with NumPy, runs the tool, and compares
its output with the same computation written in NumPy, one operation at a time in the
expression's types (float32 unless float64 is involved: docs/GRAPH_SPEC.md, "Expression
kernels"): bit for bit for the exact operations and casts (any NaN equals any NaN: payloads
are not part of the contract), within a few ulps for exp, log, tanh, sigmoid and pow, whose
NumPy versions are not the C library's. Prints one PASS or FAIL line per case, for
tools/test to count; exits 1 when any case failed.
"""
import os
import subprocess
import sys

import numpy as np

F, D = np.float32, np.float64
N = 300007  # larger than the tool's budget holds at once: the kernel runs in chunks


def spread(rng, dtype):
    """Values of every magnitude and sign, the special ones first."""
    special = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3e38,
               -3e38, 65504.0, 65520.0, 255.5, 256.0, -128.7, 2147483648.0, 1e-8]
    v = (rng.random(N) - 0.5) * 10.0 ** (np.arange(N) % 13 - 6.0)
    v[: len(special)] = special
    return v.astype(dtype)


def sat_int(v, lo, hi, dtype):
    """A float to an integer type: toward zero, saturating, NaN to 0 (kernels/dtype.h)."""
    v = v.astype(D)
    out = np.where(np.isnan(v), 0.0, np.clip(np.trunc(np.nan_to_num(v)), lo, hi))
    return out.astype(dtype)


def fmin_def(a, b):
    """min as the language defines it: a NaN operand ignored, -0 below +0."""
    tie = np.where(np.signbit(a), a, b)
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a,
                    np.where(a == b, tie, np.where(a < b, a, b))))


def fmax_def(a, b):
    tie = np.where(np.signbit(a), b, a)
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a,
                    np.where(a == b, tie, np.where(a > b, a, b))))


def seed(x):
    for _ in range(10):
        x = np.sqrt(x * F(1.01) + F(1.01))
    return x


def seed_text():
    t = "x"
    for _ in range(10):
        t = "sqrt(%s * 1.01 + 1.01)" % t
    return t


def ulps_apart(a, b):
    """Per element: 0 when equal (any NaN equal to any NaN), else the distance in ulps of
    their type (floats), or 1 (other types)."""
    if a.dtype.kind != "f":
        return (a != b).astype(np.int64)
    both_nan = np.isnan(a) & np.isnan(b)
    ints = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ia, ib = a.view(ints).astype(np.int64), b.view(ints).astype(np.int64)
    # Opposite signs are far apart unless both are zeros; a mixed sign pair is a difference.
    dist = np.where((ia < 0) == (ib < 0), np.abs(ia - ib), np.where(a == b, 1, 1 << 40))
    return np.where(both_nan, 0, dist)


def main():
    tool, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20240601)
    x, y = spread(rng, F), spread(rng, F)[::-1].copy()
    xd, yd = spread(rng, D), spread(rng, D)[::-1].copy()
    # Pairs that min, max and the comparisons must get right: zeros of both signs, NaNs.
    for a, b in ((x, y), (xd, yd)):
        b[:4] = [-0.0, 0.0, np.nan, 3.0]  # against 0, -0, 1, -1
        b[8] = 5.0                          # against NaN
    h = (x * F(100)).astype(np.float16)
    u = rng.integers(0, 256, N).astype(np.uint8)
    i = rng.integers(-(2 ** 31), 2 ** 31, N, dtype=np.int64).astype(np.int32)
    i[:6] = [0, 1, -1, 2 ** 24 + 1, 2 ** 31 - 1, -(2 ** 31)]
    fx = {"x": x, "y": y}
    fd = {"x": xd, "y": yd}
    with np.errstate(all="ignore"):
        cases = [
            # float32, exact
            ("add", "x + y", F, fx, x + y, 0),
            ("sub", "x - y", F, fx, x - y, 0),
            ("mul", "x * y", F, fx, x * y, 0),
            ("div", "x / y", F, fx, x / y, 0),
            ("neg", "-x", F, fx, -x, 0),
            ("affine", "(x - 0.5) * 2.0", F, fx, (x - F(0.5)) * F(2), 0),
            ("no_fma", "x * 1.01 + 1.01", F, fx, x * F(1.01) + F(1.01), 0),
            ("precedence", "x + y * 2 - x / y", F, fx, (x + y * F(2)) - x / y, 0),
            ("folded", "x * (1/0.25)", F, fx, x * F(4), 0),
            ("sqrt", "sqrt(x)", F, fx, np.sqrt(x), 0),
            ("abs", "abs(x)", F, fx, np.abs(x), 0),
            ("floor", "floor(x)", F, fx, np.floor(x), 0),
            ("pow_half", "pow(x, 0.5)", F, fx, np.sqrt(x), 0),
            ("pow_two", "pow(x, 2)", F, fx, x * x, 0),
            ("pow_one", "pow(x, 1)", F, fx, x, 0),
            ("min", "min(x, y)", F, fx, fmin_def(x, y), 0),
            ("max", "max(x, y)", F, fx, fmax_def(x, y), 0),
            ("clamp", "clamp(x, -0.5, 0.5)", F, fx, fmin_def(fmax_def(x, F(-0.5)), F(0.5)), 0),
            ("select_lt", "select(x < y, x, y)", F, fx, np.where(x < y, x, y), 0),
            ("select_le", "select(x <= y, 1, 0)", F, fx, np.where(x <= y, F(1), F(0)), 0),
            ("select_gt", "select(x > y, y, 2)", F, fx, np.where(x > y, y, F(2)), 0),
            ("select_ge", "where(x >= y, x, -y)", F, fx, np.where(x >= y, x, -y), 0),
            ("select_eq", "where(x == y, 4, x)", F, fx, np.where(x == y, F(4), x), 0),
            ("select_ne", "select(x != y, y, 3)", F, fx, np.where(x != y, y, F(3)), 0),
            ("nested", "select(x > 0, sqrt(x), -sqrt(-x))", F, fx,
             np.where(x > 0, np.sqrt(x), -np.sqrt(-x)), 0),
            ("seed", seed_text(), F, {"x": x}, seed(x), 0),
            # float64, exact; a number meets float64 as float64
            ("f64_add", "x + y", D, fd, xd + yd, 0),
            ("f64_mul", "x * y", D, fd, xd * yd, 0),
            ("f64_div", "x / y", D, fd, xd / yd, 0),
            ("f64_sqrt", "sqrt(x)", D, fd, np.sqrt(xd), 0),
            ("f64_weak", "x * 0.1", D, fd, xd * 0.1, 0),
            # promotion
            ("f32_f64", "x + d", D, {"x": x, "d": yd}, x.astype(D) + yd, 0),
            ("f32_weak_into_f64", "x * 0.1", D, {"x": x}, (x * F(0.1)).astype(D), 0),
            ("f16", "float16(h * 0.5 + 1)", np.float16, {"h": h},
             (h.astype(F) * F(0.5) + F(1)).astype(np.float16), 0),
            ("f16_into_f32", "h * 3", F, {"h": h}, h.astype(F) * F(3), 0),
            ("u8", "u * 0.5 - 3", F, {"u": u}, u.astype(F) * F(0.5) - F(3), 0),
            ("u8_select", "uint8(select(u > 127, 255, 0))", np.uint8, {"u": u},
             np.where(u > 127, 255, 0).astype(np.uint8), 0),
            ("i32", "i + 1", F, {"i": i}, i.astype(F) + F(1), 0),
            ("i32_f64", "float64(i) * 3", D, {"i": i}, i.astype(D) * 3.0, 0),
            # casts
            ("to_i32", "int32(x * 1000)", np.int32, fx,
             sat_int(x * F(1000), -2 ** 31, 2 ** 31 - 1, np.int32), 0),
            ("to_u8", "uint8(x * 100)", np.uint8, fx, sat_int(x * F(100), 0, 255, np.uint8), 0),
            ("i32_to_u8", "uint8(i)", np.uint8, {"i": i}, (i & 0xff).astype(np.uint8), 0),
            ("to_f16", "float16(x)", np.float16, fx, x.astype(np.float16), 0),
            ("f64_to_f32", "float32(x)", F, fd, xd.astype(F), 0),
            ("i32_to_i32", "int32(float64(i) / 2)", np.int32, {"i": i},
             sat_int(i.astype(D) / 2, -2 ** 31, 2 ** 31 - 1, np.int32), 0),
            # the math libraries: NumPy's own, within a few ulps
            ("exp", "exp(x)", F, fx, np.exp(x), 4),
            ("log", "log(abs(x))", F, fx, np.log(np.abs(x)), 4),
            ("tanh", "tanh(x)", F, fx, np.tanh(x), 4),
            ("sigmoid", "sigmoid(x)", F, fx, F(1) / (F(1) + np.exp(-x)), 4),
            ("pow", "pow(abs(x), y)", F, fx, np.power(np.abs(x), y), 4),
        ]
    failed = 0
    for name, text, out_type, inputs, want, tol in cases:
        args = [tool, text, np.dtype(out_type).name, os.path.join(work, name + ".out")]
        for k, (iname, arr) in enumerate(inputs.items()):
            path = os.path.join(work, "%s.%s.in" % (name, iname))
            arr.tofile(path)
            args += [iname, arr.dtype.name, path]
        run = subprocess.run(args, capture_output=True, text=True)
        if run.returncode != 0:
            print("FAIL expr_numpy_%s: tool exit %d: %s" % (name, run.returncode,
                                                             run.stderr.strip()))
            failed += 1
            continue
        got = np.fromfile(args[3], dtype=out_type)
        want = np.asarray(want).astype(out_type)
        far = ulps_apart(got, want) if got.shape == want.shape else None
        if far is None or (far > tol).any():
            k = 0 if far is None else int(np.argmax(far > tol))
            print("FAIL expr_numpy_%s: '%s' element %d: got %r, NumPy %r (%s ulps allowed)"
                  % (name, text, k, got[k] if far is not None else got.shape,
                     want[k] if far is not None else want.shape, tol))
            failed += 1
            continue
        print("PASS expr_numpy_%s" % name)
    # A refused expression: status 2 and the message.
    run = subprocess.run([tool, "x * q", "float32", os.path.join(work, "refused.out"), "x",
                          "float32", os.path.join(work, "add.x.in")],
                         capture_output=True, text=True)
    if run.returncode == 2 and "unknown name 'q'" in run.stderr:
        print("PASS expr_numpy_refused")
    else:
        print("FAIL expr_numpy_refused: exit %d: %s" % (run.returncode, run.stderr.strip()))
        failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
