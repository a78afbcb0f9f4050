"""python/examples/seed_torch.py, small: graphrun beside PyTorch, outputs bit for bit."""
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
