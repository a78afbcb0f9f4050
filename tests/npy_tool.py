#!/usr/bin/env python3
"""npy_tool.py - NumPy's side of tests/run_test.sh: writes the inputs and checks the outputs
of `graphrun run` with NumPy itself, so the test does not trust graphrun's own .npy code.

  npy_tool.py make PATH SHAPE SEED [--dtype f4|f2|bf16|f8|i4|u1|u2|i8] [--big-endian]
                  [--range LO,HI] [--special] [--fortran] [--raw]
                                          random values (floats uniform in [LO, HI), default
                                          [0, 1); integers in [LO, HI), default the type's
                                          range); --special puts NaN, infinities, -0 and
                                          values at and past the integer types' ends first;
                                          --raw writes the bare data (this host's order)
  npy_tool.py has-ml-dtypes               exit 0 when ml_dtypes (bfloat16) imports
  npy_tool.py check-mul OUT IN S          out == mul(in, S) in in's type by graphrun's rules:
                                          float16 and bfloat16 in float32, rounded once
                                          (x.astype(f32) * f32(S)).astype(type); float32 in
                                          float32; float64 in float64
  npy_tool.py check-cast OUT IN TYPE [S]  out == cast(in) to TYPE (then times S in TYPE's
                                          arithmetic when given), by the documented rules
                                          (kernels/dtype.h): floats to integers toward zero,
                                          saturating, NaN to 0; to float16 and bfloat16
                                          rounded to nearest even, NaN to 0x7fff
  npy_tool.py check-mixed OUT A B         out == float32(a) * b (a uint8, b float32)
  npy_tool.py check-seed OUT IN           out == seed(in), same shape, float32
  npy_tool.py check-dag OUT0 OUT1 A B     out0 == seed(2a - b), out1 == 3a
  npy_tool.py check-raw-seed OUT IN SHAPE raw float32 files
  npy_tool.py write-seed OUT IN [--raw]  OUT = seed(IN) as np.save writes it (or raw float32)
  npy_tool.py check-softmax OUT IN        out == softmax over IN's last axis (float64
                                          reference, relative error under 1e-6)
  npy_tool.py check-sum OUT IN            out is one float32, IN's sum in float64, rounded
  npy_tool.py check-user OUT IN S         out == relu(S * x * x), float32 at each step
  npy_tool.py check-manifest MANIFEST [--killed]
                                          a seed run over directories, by its manifest:
                                          every tensor "done" has its output, of the size
                                          recorded, == seed(its input); every other one has
                                          no output; the output directory holds nothing
                                          else; prints the counts as "done=D failed=F
                                          not_run=N earlier=E". --killed: the run was
                                          killed, so the outputs of tensors done after the
                                          manifest was last written may be there too (the
                                          caller checks them), and graphrun's hidden
                                          temporary files

The seed reference is computed in float32 exactly as the kernels do it: ten rounds of
x = sqrt(x * 1.01 + 1.01), each operation rounded to float32 (NumPy does not fuse).

The check-* commands of other element types compare the output file byte for byte with
what np.save writes for the expected array (header included: graphrun writes the very bytes;
bfloat16 is an ml_dtypes.bfloat16 array, which np.save writes as '<V2'). bfloat16 needs
ml_dtypes; without it those commands exit 77 (the caller's SKIP).
"""
import io
import sys
import warnings

import numpy as np

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # the bfloat16 commands exit 77
    ml_dtypes = None
    BF16 = None

SKIP = 77
CODES = {"f4": "<f4", "f2": "<f2", "f8": "<f8", "i4": "<i4", "u1": "|u1", "u2": "<u2",
         "i8": "<i8", "bf16": "bf16"}
NAMES = {"float32": np.float32, "float16": np.float16, "float64": np.float64,
         "int32": np.int32, "uint8": np.uint8, "bfloat16": "bf16"}


def need_bf16():
    if BF16 is None:
        sys.exit(SKIP)
    return BF16


def dtype_of(code):
    """A type code of `make` (f4, bf16, ...) or a graphrun type name, as a NumPy dtype."""
    t = CODES.get(code, NAMES.get(code, code))
    return need_bf16() if t == "bf16" else np.dtype(t)


def load(path):
    """np.load, with bfloat16 ('<V2', '>V2' or '|V2': raw bytes to np.load, which forgets
    their order) viewed as such in the order the header gives."""
    a = np.load(path)
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        with open(path, "rb") as f:
            head = f.read(256)
        big = b"'descr': '>V2'" in head
        a = a.view(need_bf16().newbyteorder(">" if big else "<"))
    return a


def saved(a):
    f = io.BytesIO()
    np.save(f, a)
    return f.getvalue()


def same_file(path, want):
    """The file's bytes are np.save(want)'s (in this host's order), else a message."""
    want = want.astype(want.dtype.newbyteorder("="))
    with open(path, "rb") as f:
        got = f.read()
    expect = saved(want)
    if got == expect:
        return
    try:
        a = load(path)
    except Exception as e:  # noqa: BLE001 - a broken file is a failure like any other
        sys.exit(f"{path}: not what np.save writes, and np.load says {e}")
    if a.dtype != want.dtype or a.shape != want.shape:
        sys.exit(f"{path}: {a.dtype} {a.shape}, want {want.dtype} {want.shape}")
    if got[:len(expect) - want.nbytes] != expect[:len(expect) - want.nbytes]:
        sys.exit(f"{path}: header {got[:128]!r}, want {expect[:128]!r}")
    bits = np.dtype(f"u{want.dtype.itemsize}")
    bad = np.flatnonzero(a.view(bits).ravel() != want.view(bits).ravel())
    sys.exit(f"{path}: {bad.size} of {a.size} elements differ, first at {bad[0]}: "
             f"{a.ravel()[bad[0]]!r} vs {want.ravel()[bad[0]]!r}")


SPECIAL = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 255.5, 256.0, -0.7, 0.999,
           2147483647.0, 2147483648.0, -2147483649.0, 65519.0, 65520.0, 3.5, -3.5, 1e-42]


def make(argv):
    path, shape, seed_value = argv[2], shape_of(argv[3]), int(argv[4])
    rng = np.random.default_rng(seed_value)
    dtype = dtype_of(argv[argv.index("--dtype") + 1] if "--dtype" in argv else "f4")
    lo_hi = ([float(v) for v in argv[argv.index("--range") + 1].split(",")]
             if "--range" in argv else None)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = (int(lo_hi[0]), int(lo_hi[1])) if lo_hi else (int(info.min), int(info.max) + 1)
        a = rng.integers(lo, hi, size=shape, dtype=np.int64).astype(dtype)
    else:
        lo, hi = lo_hi or (0.0, 1.0)
        v = rng.random(shape, dtype=np.float64) * (hi - lo) + lo
        if "--special" in argv and v.size:
            n = min(v.size, len(SPECIAL))
            v.ravel()[:n] = SPECIAL[:n]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 1e30 overflows float16: inf, as intended
            a = v.astype(dtype)
    if "--big-endian" in argv:
        a = a.astype(a.dtype.newbyteorder(">"))
    if "--fortran" in argv:
        a = np.asfortranarray(a)
    if "--raw" in argv:
        a.tofile(path)
    else:
        np.save(path, a)


def mul(x, s):
    """mul(x, s) by graphrun's rules: float16 and bfloat16 in float32, rounded once (a NaN
    to the canonical 0x7fff, as cast rounds)."""
    t = x.dtype.newbyteorder("=")
    if t == np.float64:
        return x.astype(t) * np.float64(s)
    return cast(np.asarray(x.astype(np.float32) * np.float32(s)), t)


def cast(x, to):
    """cast(x) to `to` by kernels/dtype.h's rules, computed by NumPy (and ml_dtypes)."""
    x = x.astype(x.dtype.newbyteorder("="))
    if to.kind in "iu":
        if x.dtype.kind in "iu":  # int32 to uint8: the low 8 bits, NumPy's own astype
            return x.astype(to)
        info = np.iinfo(to)
        f = x.astype(np.float64)
        with np.errstate(invalid="ignore"):
            v = np.where(np.isnan(f), 0, np.clip(np.trunc(f), info.min, info.max))
        return v.astype(to)
    if to == np.float16 or (BF16 is not None and to == BF16):  # dtype == None: float64
        f = x.astype(np.float32) if x.dtype != np.float32 else x
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f.astype(to)
        out.view(np.uint16)[np.isnan(f)] = 0x7FFF  # the canonical NaN of the rules
        return out
    return x.astype(to)


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
        make(argv)
    elif cmd == "has-ml-dtypes":
        sys.exit(0 if BF16 is not None else 1)
    elif cmd == "check-mul":
        x = load(argv[3])
        same_file(argv[2], mul(x, float(argv[4])))
    elif cmd == "check-cast":
        x, to = load(argv[3]), dtype_of(argv[4])
        want = cast(x, to)
        if len(argv) > 5:
            want = mul(want, float(argv[5]))
        same_file(argv[2], want)
    elif cmd == "check-mixed":
        a, b = np.load(argv[3]), np.load(argv[4])
        same_file(argv[2], a.astype(np.float32) * b.astype(np.float32))
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
    elif cmd == "check-manifest":
        check_manifest(argv[2], "--killed" in argv)
    else:
        sys.exit(f"unknown command {cmd}")


def check_manifest(path, killed):
    import json
    import os
    m = json.load(open(path))
    counts = {"done": 0, "failed": 0, "not run": 0}
    expected = set()
    out_dir = m["outputs"][0]
    for f in m["files"]:
        (out,), (inp,) = f["outputs"], f["inputs"]
        counts[f["status"]] += 1
        if f["status"] != "done":
            if killed and os.path.exists(out):
                expected.add(os.path.basename(out))
            elif os.path.exists(out):
                sys.exit(f"{out} exists, but its tensor is {f['status']!r}")
            continue
        expected.add(os.path.basename(out))
        if os.path.getsize(out) != f["output_sizes"][0]:
            sys.exit(f"{out}: {os.path.getsize(out)} bytes, the manifest says "
                     f"{f['output_sizes'][0]}")
        if (os.path.getsize(inp["path"]), os.stat(inp["path"]).st_mtime_ns) != \
                (inp["size"], inp["mtime_ns"]):
            sys.exit(f"{inp['path']}: size or mtime not as the manifest records")
        same(np.load(out), seed(np.load(inp["path"])), out)
    names = set(os.listdir(out_dir))
    hidden = {n for n in names if n.startswith(".")}
    if names - hidden != expected:
        sys.exit(f"{out_dir} holds {sorted(names - hidden - expected)} besides the done "
                 f"outputs, and lacks {sorted(expected - names)}")
    if hidden and not (killed and all(".graphrun-tmp." in n for n in hidden)):
        sys.exit(f"{out_dir}: hidden files left: {sorted(hidden)}")
    earlier = sum(1 for f in m["files"] if f.get("earlier"))
    print(f"done={counts['done']} failed={counts['failed']} not_run={counts['not run']} "
          f"earlier={earlier}")


if __name__ == "__main__":
    main(sys.argv)
