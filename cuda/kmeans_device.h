/*
 * kmeans_device.h — the K-Means table of the CUDA backend
 * (src/core/kmeans_backend.h, implemented by kmeans_device.cu), which
 * backend.cu puts in its entry table.
 */
#ifndef GBML_CUDA_KMEANS_DEVICE_H
#define GBML_CUDA_KMEANS_DEVICE_H

#include "kmeans_backend.h"

extern const struct gbml_backend_kmeans gpu_kmeans_backend;

#endif
