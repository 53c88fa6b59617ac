/*
 * backend.h — the compute backend interface that the CUDA library
 * (cuda/, built into gbml_cuda.so when nvcc exists) implements, and the
 * loader that finds it at run time.
 *
 * The CPU code paths live in src/core; a backend provides device discovery
 * and, kernel by kernel, GPU versions of the same plain-C entry points.  A
 * NULL kernel pointer means "not on this backend", and the caller uses the
 * CPU kernel.  gbml.so never links against CUDA: the library is dlopen()ed
 * on first use in a backend process (never in the postmaster), so a machine
 * without CUDA loads and runs gbml unchanged.
 */
#ifndef GBML_BACKEND_H
#define GBML_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#define GBML_BACKEND_ABI_VERSION 1

typedef struct gbml_device_info
{
	char		name[128];
	size_t		total_memory;
	int			compute_major;
	int			compute_minor;
	int			multiprocessors;
} gbml_device_info;

struct gbml_backend
{
	int			abi_version;	/* GBML_BACKEND_ABI_VERSION */
	const char *name;			/* "cuda" */

	/* Number of usable devices (0 when the driver or the device is absent). */
	int			(*device_count) (void);
	/* Fills info for device id; returns 0 on success. */
	int			(*device_info) (int id, gbml_device_info *info);
	/* Last error text of the backend (static storage). */
	const char *(*last_error) (void);

	/*
	 * Kernels.  Each mirrors a CPU function of src/core with the same
	 * arguments plus the device id, returns 0 on success, nonzero on a device
	 * error (the caller then reports last_error()).
	 */

	/* Column sums of a row-major block x[n][d] (float) added into sums[d] (double). */
	int			(*column_sums) (int device, const float *x, int64_t n, int d, double *sums);
};

/* The entry point gbml_cuda.so exports. */
typedef const struct gbml_backend *(*gbml_backend_entry_fn) (void);
#define GBML_BACKEND_ENTRY "gbml_cuda_backend"

/*
 * Loads the backend library at `path` once per process; returns NULL (with
 * a reason in errbuf) when it is absent or unusable.  Not thread-safe: call
 * from the backend's main thread only.
 */
const struct gbml_backend *gbml_backend_load(const char *path, char *errbuf, size_t errlen);

/* CPU reference of column_sums, shared by the mean model and the GPU checks. */
void		gbml_cpu_column_sums(const float *x, int64_t n, int d, double *sums);

#endif
