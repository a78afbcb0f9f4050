"""python/examples/seed_torch.py, small: graphrun beside PyTorch, outputs bit for bit; and
tools/python_overhead_bench, small."""
import os
import subprocess
import sys

import pytest

from helpers import REPO, torch

EXAMPLE = os.path.join(REPO, "python", "examples", "seed_torch.py")


def _run(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, EXAMPLE, *args], capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "10 of 10 tensors bit for bit equal" in r.stdout, r.stdout
    assert "equal NumPy's float32 reference" in r.stdout, r.stdout
    return r.stdout


def test_seed_torch_example_on_the_host():
    if torch is None:
        pytest.skip("PyTorch is not installed")
    out = _run("--backend", "host", "--torch-device", "cpu", "--elems", "200000",
               "--iterations", "2", "--budget", "16MiB")
    assert "graphrun (host" in out and "PyTorch (CPU)" in out


def test_seed_torch_example_on_the_gpu(cuda):
    if torch is None or not torch.cuda.is_available():
        pytest.skip("needs PyTorch with CUDA")
    out = _run("--backend", "cuda", "--elems", "4000000", "--iterations", "3",
               "--budget", "64MiB")
    assert "graphrun (cuda" in out and "PyTorch (CUDA" in out


def test_overhead_bench_checks_its_outputs():
    # tools/python_overhead_bench, small: it runs on this package, and says 0 wrong.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, os.path.join(REPO, "tools", "python_overhead_bench"),
                        "--count", "300", "--size", "4KiB", "--passes", "1", "--kinds",
                        "numpy,pinned,iface", "--outputs", "inplace,new,given"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line for line in r.stdout.splitlines() if " us a tensor " in line]
    assert len(rows) == 9 and all(line.endswith("; 0 wrong") for line in rows), r.stdout
