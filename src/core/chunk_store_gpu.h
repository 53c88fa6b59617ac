/*
 * chunk_store_gpu.h — the device residence of dataset chunks: a
 * gbml_chunk_store (dataset.h) over the GPU backend's chunk functions
 * (backend.h), in one device context that the boosting trainer then trains
 * in, so the rows streamed in during the scan are quantized where they are.
 */
#ifndef GBML_CHUNK_STORE_GPU_H
#define GBML_CHUNK_STORE_GPU_H

#include "backend.h"
#include "dataset.h"

/*
 * Opens a device context on env->gpu / env->gpu_id with env's GPU budget,
 * and a store over it; NULL with env's error set when the device cannot be
 * used.  The env (hooks, budget) must outlive the store.
 */
gbml_chunk_store *gbml_chunk_store_gpu_open(gbml_env *env);

/* The device context of a GPU store, NULL for any other store. */
gbml_gpu_ctx *gbml_chunk_store_gpu_ctx(const gbml_chunk_store *s);

#endif
