#!/usr/bin/env python3
"""matmul_memory.py - where does device memory go when x @ W runs on new threads and streams,
as rt.map's workers call fn? Outside graphrun: a 64 MiB W and a 400 MB x (25,600 x 4,096
float32, TF32), fn multiplying in blocks of 4,096 rows in place (python/examples/
map_matmul.py's), then step by step: fn on the main thread, on another shape, on three new
threads each with its own stream, three calls on one more, and after empty_cache. Each step
prints the device's used memory (cudaMemGetInfo) and PyTorch's reserved memory above the
start, and their difference: what lies outside PyTorch's caching allocator (cuBLAS's
handles and kernels, the context's per-thread state). A measuring aid: no check of its own.

    /opt/torch/.venv/bin/python tools/bench/probes/matmul_memory.py
"""
import os
import threading

import torch

DIM = 4096
torch.backends.cuda.matmul.allow_tf32 = True


def used():
    free, total = torch.cuda.mem_get_info(0)
    return total - free


def fn(x, W, rb=4096):
    for i in range(0, x.shape[0], rb):
        x[i:i + rb] = x[i:i + rb] @ W
    return x


def main():
    torch.cuda.init()
    u0, r0 = used(), torch.cuda.memory_reserved()
    W = torch.randn(DIM, DIM, device="cuda")
    x = torch.randn(25600, DIM, device="cuda")

    def rep(what):
        torch.cuda.synchronize()
        du, dr = (used() - u0) / 2**20, (torch.cuda.memory_reserved() - r0) / 2**20
        print(f"{what:48s} device +{du:8.1f} MiB  reserved +{dr:8.1f}  outside PyTorch's "
              f"cache {du - dr:7.1f}", flush=True)

    rep("W and x allocated")
    fn(x.clone(), W)
    rep("fn once, main thread, default stream")
    fn(x[:1000].clone(), W)
    rep("fn on 1000 rows (another shape)")

    def on_new_stream(calls):
        s = torch.cuda.Stream()
        for _ in range(calls):
            with torch.cuda.stream(s):
                y = x.clone()
                fn(y, W)
                del y
        s.synchronize()

    for n in range(1, 4):
        t = threading.Thread(target=on_new_stream, args=(1,))
        t.start()
        t.join()
        rep(f"fn on new thread {n} with its own stream")
    t = threading.Thread(target=on_new_stream, args=(3,))
    t.start()
    t.join()
    rep("one more thread, 3 calls on one stream")
    torch.cuda.empty_cache()
    rep("after empty_cache")
    print("CUBLAS_WORKSPACE_CONFIG", os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
          "torch", torch.__version__)


if __name__ == "__main__":
    main()
