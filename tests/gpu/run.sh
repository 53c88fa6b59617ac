#!/usr/bin/env bash
# tests/gpu/run.sh — the one prepared script for a machine with an NVIDIA GPU:
# builds gbml_cuda.so and the checker, compares every CUDA kernel with its CPU
# reference on the same inputs, and prints a timings table.  Needs nvcc; no
# PostgreSQL.  Usage: tests/gpu/run.sh   (from the repository root or anywhere)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
out=${OUT:-$top/tests/gpu/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
"$NVCC" -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
  -Xcompiler -fPIC --shared -cudart static -Isrc/core -o "$out/gbml_cuda.so" cuda/*.cu
gcc -std=gnu11 -O2 -fopenmp -Isrc/core -o "$out/gpu_check" tests/gpu/gpu_check.c \
  src/core/env.c src/core/backend_loader.c -lm -ldl
"$out/gpu_check" "$out/gbml_cuda.so" | tee "$out/gpu_check.txt"
