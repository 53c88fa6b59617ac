#!/usr/bin/env python3
"""tests/gpu/torch_kmeans.py — the PyTorch K-Means peer for tests/gpu/run.sh:
seconds per Lloyd iteration (assignment by matmul + argmin, update by
index_add_) in float32 on the GPU, TF32 off (gbml's labels are exact float64
decisions; TF32 would not even be float32), on the shapes of
kmeans_fit_bench.c.  Prints one markdown table.

usage: torch_kmeans.py MAX_ROWS"""
import sys
import time

import torch


def seconds_per_iteration(n, d, k, iters):
    g = torch.Generator(device="cuda").manual_seed(11)
    centres = torch.rand(32, d, device="cuda", generator=g) * 20 - 10
    x = centres[torch.arange(n, device="cuda") % 32] + torch.rand(n, d, device="cuda", generator=g) * 4 - 2
    c = x[torch.randperm(n, device="cuda", generator=g)[:k]].clone()
    times = []
    for _ in range(iters + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dist = (c * c).sum(1)[None, :] - 2.0 * (x @ c.T)
        labels = dist.argmin(1)
        sums = torch.zeros_like(c).index_add_(0, labels, x)
        counts = torch.bincount(labels, minlength=k).clamp_min(1).to(x.dtype)
        c = sums / counts[:, None]
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return min(times[1:])  # the first pays the kernels' first launch


def main():
    max_rows = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    torch.backends.cuda.matmul.allow_tf32 = False
    grid_rows = 100_000 if max_rows >= 1_000_000 else max_rows // 20
    shapes = [(grid_rows, d, k, 8) for d in (10, 50, 100) for k in (10, 50, 100)]
    shapes.append((max_rows, 128, 1000 if max_rows >= 1_000_000 else 50, 3))
    print("\n| rows | d | k | PyTorch s/iter (matmul + argmin, fp32) | TFLOP/s (2nkd/s) |\n|---|---|---|---|---|")
    for n, d, k, iters in shapes:
        s = seconds_per_iteration(n, d, k, iters)
        print(f"| {n} | {d} | {k} | {s:.5f} | {2.0 * n * k * d / s / 1e12:.2f} |")


if __name__ == "__main__":
    main()
