/*
 * backend_loader.c — dlopen()s gbml_cuda.so on first use and checks its ABI
 * version; also the CPU reference kernels the backend mirrors.
 */
#include "backend.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const struct gbml_backend *loaded_backend;
static bool load_attempted;
static char load_error[256];

const struct gbml_backend *
gbml_backend_load(const char *path, char *errbuf, size_t errlen)
{
	if (!load_attempted)
	{
		void	   *lib;
		gbml_backend_entry_fn entry;

		load_attempted = true;
		lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (lib == NULL)
		{
			const char *e = dlerror();

			snprintf(load_error, sizeof(load_error), "CUDA backend not available (%s)", e ? e : path);
		}
		else if ((entry = (gbml_backend_entry_fn) dlsym(lib, GBML_BACKEND_ENTRY)) == NULL)
			snprintf(load_error, sizeof(load_error), "%s does not export %s", path, GBML_BACKEND_ENTRY);
		else
		{
			const struct gbml_backend *b = entry();

			if (b == NULL || b->abi_version != GBML_BACKEND_ABI_VERSION)
				snprintf(load_error, sizeof(load_error), "%s has ABI version %d, expected %d", path,
						 b ? b->abi_version : -1, GBML_BACKEND_ABI_VERSION);
			else
				loaded_backend = b;
		}
	}
	if (loaded_backend == NULL && errbuf)
		snprintf(errbuf, errlen, "%s", load_error);
	return loaded_backend;
}

void
gbml_cpu_column_sums(const float *x, int64_t n, int d, double *sums)
{
	for (int64_t i = 0; i < n; i++)
		for (int j = 0; j < d; j++)
			sums[j] += x[i * d + j];
}
