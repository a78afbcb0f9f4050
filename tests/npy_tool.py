#!/usr/bin/env python3
"""npy_tool.py - NumPy's side of tests/run_test.sh: writes the inputs and checks the outputs
of `graphrun run` with NumPy itself, so the test does not trust graphrun's own .npy code.

  npy_tool.py make PATH SHAPE SEED [--dtype f4|f8|i4] [--fortran] [--raw]
  npy_tool.py check-seed OUT IN           out == seed(in), same shape, float32
  npy_tool.py check-dag OUT0 OUT1 A B     out0 == seed(2a - b), out1 == 3a
  npy_tool.py check-raw-seed OUT IN SHAPE raw float32 files
  npy_tool.py write-seed OUT IN [--raw]  OUT = seed(IN) as np.save writes it (or raw float32)
  npy_tool.py check-softmax OUT IN        out == softmax over IN's last axis (float64
                                          reference, relative error under 1e-6)
  npy_tool.py check-sum OUT IN            out is one float32, IN's sum in float64, rounded
  npy_tool.py check-user OUT IN S         out == relu(S * x * x), float32 at each step

The seed reference is computed in float32 exactly as the kernels do it: ten rounds of
x = sqrt(x * 1.01 + 1.01), each operation rounded to float32 (NumPy does not fuse).
"""
import sys

import numpy as np


def seed(x):
    x = x.astype(np.float32)
    for _ in range(10):
        x = np.sqrt(x * np.float32(1.01) + np.float32(1.01))
    return x


def shape_of(text):
    return tuple(int(d) for d in text.split(",")) if text else ()


def same(got, want, what):
    if got.dtype != np.float32:
        sys.exit(f"{what}: dtype {got.dtype}, want float32")
    if got.shape != want.shape:
        sys.exit(f"{what}: shape {got.shape}, want {want.shape}")
    if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
        bad = np.flatnonzero(got.view(np.uint32).ravel() != want.view(np.uint32).ravel())
        sys.exit(f"{what}: {bad.size} elements differ, first at {bad[0]}: "
                 f"{got.ravel()[bad[0]]!r} vs {want.ravel()[bad[0]]!r}")


def main(argv):
    cmd = argv[1]
    if cmd == "make":
        path, shape, seed_value = argv[2], shape_of(argv[3]), int(argv[4])
        rng = np.random.default_rng(seed_value)
        dtype = {"f4": np.float32, "f8": np.float64, "i4": np.int32}[
            argv[argv.index("--dtype") + 1] if "--dtype" in argv else "f4"]
        a = rng.random(shape, dtype=np.float64).astype(dtype)
        if "--fortran" in argv:
            a = np.asfortranarray(a)
        if "--raw" in argv:
            a.astype(np.float32).tofile(path)
        else:
            np.save(path, a)
    elif cmd == "check-seed":
        same(np.load(argv[2]), seed(np.load(argv[3])), argv[2])
    elif cmd == "check-dag":
        a, b = np.load(argv[4]), np.load(argv[5])
        same(np.load(argv[2]), seed(a * np.float32(2.0) + b * np.float32(-1.0)), argv[2])
        same(np.load(argv[3]), a * np.float32(3.0), argv[3])
    elif cmd == "check-raw-seed":
        shape = shape_of(argv[4])
        got = np.fromfile(argv[2], dtype=np.float32).reshape(shape)
        same(got, seed(np.fromfile(argv[3], dtype=np.float32).reshape(shape)), argv[2])
    elif cmd == "write-seed":
        if "--raw" in argv:
            seed(np.fromfile(argv[3], dtype=np.float32)).tofile(argv[2])
        else:
            with open(argv[2], "wb") as f:
                np.save(f, seed(np.load(argv[3])))
    elif cmd == "check-softmax":
        got, x = np.load(argv[2]), np.load(argv[3]).astype(np.float64)
        if got.dtype != np.float32 or got.shape != x.shape:
            sys.exit(f"{argv[2]}: {got.dtype} {got.shape}, want float32 {x.shape}")
        axis = x.ndim - 1 if x.ndim else None
        e = np.exp(x - (x.max(axis=axis, keepdims=True) if x.ndim else x))
        want = e / (e.sum(axis=axis, keepdims=True) if x.ndim else e)
        err = np.abs(got - want) / np.maximum(want, 1e-30)
        if not (err.max() < 1e-6):
            sys.exit(f"{argv[2]}: relative error {err.max()} at {np.argmax(err)}")
    elif cmd == "check-sum":
        got, x = np.load(argv[2]), np.load(argv[3])
        want = np.array([x.astype(np.float64).sum()], dtype=np.float32)
        same(got, want, argv[2])
    elif cmd == "check-user":
        x, s = np.load(argv[3]).astype(np.float32), np.float32(float(argv[4]))
        same(np.load(argv[2]), np.maximum((x * x) * s, np.float32(0)), argv[2])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
