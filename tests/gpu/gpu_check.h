/*
 * gpu_check.h — what the GPU checker's files share: the loaded backend, the
 * ok / not ok counter, and small helpers.  The checker (gpu_check.c: the
 * kernels; gpu_train_check.c: whole trainings, budget, faults, leaks;
 * gpu_bench.c: timings on a card) runs on the emulated library in
 * `make test` and on a real card in tests/gpu/run.sh.
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

void		gc_kernel_checks(void);
void		gc_training_checks(bool quick);
void		gc_bench(int64_t max_rows);

#endif
