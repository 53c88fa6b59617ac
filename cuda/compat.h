/*
 * compat.h — what every .cu file of cuda/ includes instead of
 * <cuda_runtime.h>: the real CUDA runtime under nvcc, or the project's CPU
 * emulation of it (cuda/emu/cuda_emu.h) when the same sources are compiled
 * by the host C++ compiler with -DGBML_CUDA_EMU into gbml_cuda_emu.so.
 *
 * The one construct the host compiler cannot parse is the triple-chevron
 * launch, so kernels are launched with GBML_LAUNCH; dynamic shared memory
 * is declared with GBML_DYNAMIC_SHARED.  Everything else (__global__,
 * __shared__, threadIdx, __syncthreads, atomics, warp shuffles, streams,
 * events) is written as in CUDA.
 */
#ifndef GBML_CUDA_COMPAT_H
#define GBML_CUDA_COMPAT_H

#ifdef GBML_CUDA_EMU
#include "emu/cuda_emu.h"
#else
#include <cuda_runtime.h>

/* kernel<<<grid, block, shared_bytes, stream>>>(args...) */
#define GBML_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
	kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__)

/* `type *name` pointing at the block's dynamic shared memory. */
#define GBML_DYNAMIC_SHARED(type, name) extern __shared__ type name[]

#define GBML_CUDA_EMULATED 0
#endif

#endif
