/*
 * gpu_check.h — what the GPU checker's files share: the loaded backend, the
 * ok / not ok counter, and small helpers.  The checker (gpu_check.c: the
 * kernels; gpu_train_check.c: whole trainings, budget, faults, leaks;
 * kmeans_check.c: the K-Means table; saga_check.c: SAGA on the GPU;
 * gpu_bench.c, kmeans_bench.c, saga_bench.c: timings on a card) runs on the
 * emulated library in `make test` and on a real card in tests/gpu/run.sh.
 */
#ifndef GBML_GPU_CHECK_H
#define GBML_GPU_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "env.h"

extern const gbml_backend *gc_backend;
extern void *gc_library;		/* dlopen() handle of the backend (emulation hooks) */
extern bool gc_emulated;

void		gc_check(bool ok, const char *fmt,...) __attribute__((format(printf, 2, 3)));

/* The emulation's hooks (NULL on a real card). */
typedef void (*gc_emu_fail_after_fn) (long long n);
gc_emu_fail_after_fn gc_emu_fail_after(void);

/* Every resource count of the backend is zero. */
bool		gc_no_resources(void);

/* One training under fault injection, on env e (initialised by it); frees what it made, returns the status. */
typedef int (*gc_fault_attempt) (gbml_env *e);

/*
 * CUDA failures injected at the k-th call of an attempt, for k = 1 .. dense
 * and then every step-th up to last: each failure must be an error that
 * names the CUDA call, and nothing may be held on the device afterwards
 * (gpu_train_check.c; only on the emulation).
 */
void		gc_inject_faults(const char *what, gc_fault_attempt attempt, long long dense, long long step,
							 long long last);

void		gc_kernel_checks(void);
/* The K-Means table against the CPU (kmeans_check.c). */
void		gc_kmeans_checks(bool quick);
void		gc_training_checks(bool quick);
/* Mini-batch SAGA on the GPU against the CPU solver (saga_check.c). */
void		gc_saga_checks(bool quick);
void		gc_bench(int64_t max_rows);
/* SAGA time to 1e-4 of the optimum, GPU against the CPU solver (saga_bench.c). */
void		gc_saga_bench(int64_t max_rows);
/* K-Means pass timings on a card (kmeans_bench.c). */
void		gc_kmeans_bench(int64_t max_rows);
/* kmeans_train_check.c: whole K-Means fits on the GPU and hybrid against the CPU; kmeans_fit_bench.c: their timings */
void		gc_kmeans_training_checks(bool quick);
void		gc_kmeans_fit_bench(int64_t max_rows);

#endif
