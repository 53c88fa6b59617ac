#!/usr/bin/env bash
# tests/gpu/run.sh — the one prepared script for a machine with an NVIDIA GPU
# (no PostgreSQL needed): builds gbml_cuda.so with nvcc and the checker
# (tests/gpu/gpu_check), then
#   1. every kernel and whole trainings of every loss against the CPU backend
#      (model bytes), the budget, cancels, nothing left on the device;
#   2. compute-sanitizer memcheck and racecheck of the kernels on small inputs;
#   3. the timings tables: boosting (seconds per tree at 1M and 10M x 100, and
#      Depthwise trees at 1M,
#      depth 6, 32 borders, GPU against the CPU backend on every core, the
#      level-0 histogram pass as a share of 4.8 TB/s, host-to-device GB/s);
#      K-Means (the assignment's TFLOP/s against the 67 TFLOP/s FP32 peak,
#      seconds per Lloyd iteration of CPU, GPU and hybrid on the seed's grid
#      and at 10M x 128 with k = 1000); SAGA (time to 1e-4 of the optimum on
#      a9a-like data replicated to MAX_ROWS, mini-batch SAGA at several batch
#      sizes against the CPU solver on every core);
#   4. PyTorch's K-Means on the same shapes (tests/gpu/torch_kmeans.py).
# Usage: tests/gpu/run.sh [MAX_ROWS]   (default 10000000; output also in $OUT or tests/gpu/out)
#        EMU=1 tests/gpu/run.sh 20000  a dry run of the script on the emulated backend
#                                      (g++ instead of nvcc, no compute-sanitizer)
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
max_rows=${1:-10000000}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
out=${OUT:-$top/tests/gpu/out}
mkdir -p "$out"
status=0
step() { echo; echo "== $* ($(date +%T))"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
step "build"
if [ "${EMU:-0}" = 1 ]; then
  g++ -std=c++17 -O2 -ffp-contract=off -fPIC -fvisibility=hidden -DGBML_CUDA_EMU -Icuda -Isrc/core --shared -o "$out/gbml_cuda.so" \
    -x c++ cuda/*.cu -x none cuda/emu/*.cpp -pthread || exit 1
else
  "$NVCC" -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
    -Xcompiler -fPIC,-fvisibility=hidden --shared -cudart static -Isrc/core -Icuda -o "$out/gbml_cuda.so" cuda/*.cu || exit 1
fi
# the checker: src/core + tests/gpu with gcc directly (no make needed on the GPU machine)
core=$(sed -n 's/^[[:space:]]*\(src\/core\/[a-z_]*\.c\).*/\1/p' core_sources.mk)
"${CC:-gcc}" -std=gnu11 -O2 -g -ffp-contract=off -fopenmp -Isrc/core -o tests/gpu/gpu_check tests/gpu/*.c \
  tests/unit/test_util.c $core -lm -ldl || exit 1

step "1. kernels and whole trainings against the CPU backend"
tests/gpu/gpu_check "$out/gbml_cuda.so" 2>&1 | tee "$out/check.txt" | grep -v '^ok' || true
tail -1 "$out/check.txt"
grep -q ' 0 failed$' "$out/check.txt" || status=1

step "2. compute-sanitizer memcheck and racecheck (kernels, small inputs)"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  if [ "${EMU:-0}" = 1 ]; then
    echo "$tool: skipped on the emulation"
  elif [ -x "$SAN" ]; then
    timeout 100 "$SAN" --tool $tool --error-exitcode 9 tests/gpu/gpu_check "$out/gbml_cuda.so" --kernels-only \
      > "$out/$tool.txt" 2>&1
    rc=$?
    echo "$tool: exit $rc, $(grep -c '^ok' "$out/$tool.txt") ok, $(grep -c '^not ok' "$out/$tool.txt") not ok, $(grep -E -o 'ERROR SUMMARY: [0-9]+ error|RACECHECK SUMMARY: [0-9]+ hazard' "$out/$tool.txt" | tr '\n' ' ')"
    [ $rc = 0 ] || status=1
  else
    echo "$tool: compute-sanitizer not found"; status=1
  fi
done

step "3. timings (up to $max_rows rows)"
tests/gpu/gpu_check "$out/gbml_cuda.so" --kernels-only --bench "$max_rows" 2>&1 | tee "$out/bench.txt" | grep -E '^\||^#|passed, '
grep -q ' 0 failed$' "$out/bench.txt" || status=1

step "4. the PyTorch K-Means peer on the same shapes (matmul + argmin, fp32)"
if [ "${EMU:-0}" = 1 ]; then
  echo "PyTorch: skipped on the emulation"
elif python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  timeout 120 python3 tests/gpu/torch_kmeans.py "$max_rows" 2>&1 | tee "$out/torch_kmeans.txt" | grep -E '^\||Error'
else
  echo "PyTorch with CUDA not found"
fi
step "done: status $status"
exit $status
