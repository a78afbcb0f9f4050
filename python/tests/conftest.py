"""Fixtures of the package's tests, and the PASS/FAIL/SKIP lines tools/test counts.

Most tests run for every pair of backend (host; cuda, skipped without a usable GPU) and
array kind (numpy; torch, skipped without PyTorch): the `backend` and `kind` fixtures.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import graphrun  # noqa: E402

from helpers import torch  # noqa: E402


def _cuda_reason():
    p = graphrun.probe("cuda")
    return None if p.available else f"no usable GPU here ({p.reason})"


@pytest.fixture(params=["host", "cuda"])
def backend(request):
    if request.param == "cuda":
        why = _cuda_reason()
        if why:
            pytest.skip(why)
    return request.param


@pytest.fixture(params=["numpy", "torch"])
def kind(request):
    if request.param == "torch" and torch is None:
        pytest.skip("PyTorch is not installed")
    return request.param


@pytest.fixture
def cuda():
    why = _cuda_reason()
    if why:
        pytest.skip(why)


@pytest.fixture
def new_runtime(request):
    """new_runtime(**kwargs): a Runtime closed (without waiting) at the end of the test."""
    made = []

    def make(**kw):
        kw.setdefault("budget", "64MiB")
        rt = graphrun.Runtime(**kw)
        made.append(rt)
        return rt

    yield make
    for rt in made:
        rt.close(wait=False)


@pytest.fixture
def rt(new_runtime, backend):
    return new_runtime(backend=backend)


@pytest.fixture
def gate(new_runtime):
    """The host backend's gate kernel (helpers.Gate), opened at the end of the test before
    the runtimes close (a closed gate would hold their workers)."""
    from gate import GATE
    GATE.reset()
    yield GATE
    GATE.open()


# ---------------------------------------------------------------------------------------
# One line per test at column 0, as tools/test and tools/gpu_suite count them:
# "PASS name", "FAIL name", "SKIP name: reason".

_outcomes = {}
_TAG = os.environ.get("GRAPHRUN_TEST_TAG", "")


def pytest_runtest_logreport(report):
    name = report.nodeid.split("::", 1)[-1]
    name = os.path.basename(report.nodeid.split("::", 1)[0]).replace(".py", "") + "." + name
    if _TAG:
        name = _TAG + "." + name
    prev = _outcomes.get(name)
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
        reason = reason.replace("Skipped: ", "")
        _outcomes[name] = ("SKIP", reason)
    elif report.failed:
        _outcomes[name] = ("FAIL", report.when)
    elif report.when == "call" and prev is None:
        _outcomes[name] = ("PASS", "")


def pytest_terminal_summary(terminalreporter):
    terminalreporter.section("graphrun test lines")
    for name, (what, why) in _outcomes.items():
        if what == "PASS":
            terminalreporter.write_line(f"PASS {name}")
        elif what == "SKIP":
            terminalreporter.write_line(f"SKIP {name}: {why}")
        else:
            terminalreporter.write_line(f"FAIL {name} (in {why})")
