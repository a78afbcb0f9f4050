"""python/examples/seed_torch.py, small: graphrun beside PyTorch, outputs bit for bit; the
rt.map examples (map_*.py) beside the same PyTorch pipeline; and tools/bench/python_overhead_bench,
small."""
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
    # tools/bench/python_overhead_bench, small: it runs on this package, and says 0 wrong.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    bench = os.path.join(REPO, "tools", "bench", "python_overhead_bench")
    r = subprocess.run([sys.executable, bench,
                        "--count", "300", "--size", "4KiB", "--passes", "1", "--kinds",
                        "numpy,pinned,iface", "--outputs", "inplace,new,given"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line for line in r.stdout.splitlines() if " us a tensor " in line]
    assert len(rows) == 9 and all(line.endswith("; 0 wrong") for line in rows), r.stdout


# The rt.map examples (python/examples/map_*.py), small: graphrun's rt.map beside the
# careful PyTorch pipeline, outputs compared with each other and with NumPy.
_MAP_EXAMPLES = {
    "map_matmul.py": (["--rows", "64", "--dim", "32"], ["--rows", "2048", "--dim", "512"]),
    "map_fft.py": (["--rows", "16", "--length", "64"], ["--rows", "1024", "--length", "1024"]),
    "map_model.py": (["--rows", "64", "--width", "32", "--row-block", "16"],
                     ["--rows", "4096", "--width", "256", "--row-block", "1024"]),
}


def _run_map_example(name, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, os.path.join(REPO, "python", "examples", name),
                        *args], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    count = args[args.index("--count") + 1]
    assert f"outputs: {count} of {count} tensors within" in r.stdout, r.stdout
    assert "of NumPy's float64 reference" in r.stdout and "NOT within" not in r.stdout
    return r.stdout


@pytest.mark.parametrize("name", sorted(_MAP_EXAMPLES))
def test_map_example_on_the_host(name):
    if torch is None:
        pytest.skip("PyTorch is not installed")
    out = _run_map_example(name, "--backend", "host", "--torch-device", "cpu", "--count",
                           "3", "--budget", "16MiB", *_MAP_EXAMPLES[name][0])
    assert "graphrun (host" in out and "PyTorch (CPU)" in out
    if name == "map_matmul.py":
        assert "constants copied in 1 time(s)" in out


@pytest.mark.parametrize("name", sorted(_MAP_EXAMPLES))
def test_map_example_on_the_gpu(cuda, name):
    if torch is None or not torch.cuda.is_available():
        pytest.skip("needs PyTorch with CUDA")
    out = _run_map_example(name, "--backend", "cuda", "--count", "4", "--budget", "256MiB",
                           *_MAP_EXAMPLES[name][1])
    assert "graphrun (cuda" in out and "PyTorch (CUDA" in out
    if name == "map_matmul.py":
        assert "constants copied in 1 time(s)" in out
