/*
 * saga_device.h — the SAGA table of the CUDA backend
 * (src/core/saga_backend.h, implemented by saga_device.cu), which
 * backend.cu puts in its entry table.
 */
#ifndef GBML_CUDA_SAGA_DEVICE_H
#define GBML_CUDA_SAGA_DEVICE_H

extern "C" {
#include "saga_backend.h"
}

extern const struct gbml_backend_saga gpu_saga_backend;

#endif
