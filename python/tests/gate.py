"""A CPU kernel of the tests' own, `py_gate`, that holds each iteration until the test lets
it go: what makes "running", "queued", a deadline passing and Ctrl-C during a wait happen
exactly when a test wants, on the host backend. out = x + 1 (float32), whole tensors only
(not elementwise, so each tensor is one iteration: never cut, never batched).

Registered once per process through gr_kernel_register from ctypes: the kernel is Python
called by a runtime worker, which takes the GIL for it and gives it back while it waits.
"""
import ctypes
import threading

import numpy as np

import graphrun
from graphrun import _lib as c


class Gate:
    def __init__(self):
        self.cond = threading.Condition()
        self.reset()

    def reset(self):
        with self.cond:
            self.is_open = False
            self.tokens = 0      # iterations allowed through while closed
            self.entered = 0     # iterations that reached the kernel
            self.left = 0        # iterations that finished it

    def open(self):
        with self.cond:
            self.is_open = True
            self.cond.notify_all()

    def release(self, n=1):
        """Lets `n` more iterations through a closed gate."""
        with self.cond:
            self.tokens += n
            self.cond.notify_all()

    def wait_entered(self, n, timeout=10):
        with self.cond:
            if not self.cond.wait_for(lambda: self.entered >= n, timeout):
                raise AssertionError(f"only {self.entered} iterations entered the gate, "
                                     f"expected {n}")

    def wait_left(self, n, timeout=10):
        with self.cond:
            if not self.cond.wait_for(lambda: self.left >= n, timeout):
                raise AssertionError(f"only {self.left} iterations left the gate, "
                                     f"expected {n}")

    def _pass(self):
        with self.cond:
            self.entered += 1
            self.cond.notify_all()
            # Bounded, so that a test that forgets the gate fails instead of hanging.
            ok = self.cond.wait_for(lambda: self.is_open or self.tokens > 0, 60)
            if ok and not self.is_open:
                self.tokens -= 1

    def _left(self):
        with self.cond:
            self.left += 1
            self.cond.notify_all()


GATE = Gate()


@c.KERNEL_CPU_FN
def _gate_cpu(args, user):
    a = args.contents
    n = int(a.n)
    GATE._pass()
    x = np.ctypeslib.as_array((ctypes.c_float * n).from_address(a.in_[0]))
    y = np.ctypeslib.as_array((ctypes.c_float * n).from_address(a.out))
    np.add(x, np.float32(1), out=y)
    GATE._left()


def _register():
    d = c.KernelDef()
    d.struct_size = ctypes.sizeof(c.KernelDef)
    d.magic = c.GR_KERNEL_DEF_MAGIC
    d.name = b"py_gate"
    d.doc = b"tests: x + 1, held by python/tests/gate.py"
    d.n_inputs = 1
    d.elementwise = 0
    d.cpu = _gate_cpu
    err = c.ErrorInfo()
    st = c.lib.gr_kernel_register(ctypes.byref(d), ctypes.byref(err))
    if st != 0:
        raise RuntimeError(f"py_gate: {err.message.decode()}")


_register()

SPEC = """
buffer x
buffer y
h2d load: in0 -> x
kernel g: py_gate(x) -> y
d2h store: y -> out0
load -> g -> store
"""


def graph():
    return graphrun.Graph.parse(SPEC, "gate.graph")
