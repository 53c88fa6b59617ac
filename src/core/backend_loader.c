/*
 * backend_loader.c — dlopen()s gbml_cuda.so (or gbml_cuda_emu.so) on first
 * use and checks its ABI version; also the CPU reference kernels the backend
 * mirrors.
 */
#include "backend.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/*
 * One entry per library path tried in this process (gbml.cuda_library may
 * name the real library or the emulated one, and a session may switch).  A
 * failed load is remembered too: dlopen() is not retried on every call.
 */
#define MAX_LIBRARIES 4

typedef struct loaded_library
{
	char		path[1024];
	const struct gbml_backend *backend;
	char		error[256];
} loaded_library;

static loaded_library libraries[MAX_LIBRARIES];
static int	n_libraries;

static void
load_library(loaded_library *l, const char *path)
{
	void	   *lib;
	gbml_backend_entry_fn entry;
	char		msg[sizeof(l->error)] = "";

	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL)
	{
		const char *e = dlerror();

		snprintf(msg, sizeof(msg), "CUDA backend not available (%s)", e ? e : path);
	}
	else if ((entry = (gbml_backend_entry_fn) dlsym(lib, GBML_BACKEND_ENTRY)) == NULL)
		snprintf(msg, sizeof(msg), "%s does not export %s", path, GBML_BACKEND_ENTRY);
	else
	{
		const struct gbml_backend *b = entry();

		if (b == NULL || b->abi_version != GBML_BACKEND_ABI_VERSION)
			snprintf(msg, sizeof(msg), "%s has ABI version %d, expected %d", path,
					 b ? b->abi_version : -1, GBML_BACKEND_ABI_VERSION);
		else
			l->backend = b;
	}
	memcpy(l->error, msg, sizeof(msg));
}

const struct gbml_backend *
gbml_backend_load(const char *path, char *errbuf, size_t errlen)
{
	loaded_library *l = NULL;

	for (int i = 0; i < n_libraries; i++)
		if (strcmp(libraries[i].path, path) == 0)
			l = &libraries[i];
	if (l == NULL)
	{
		if (n_libraries == MAX_LIBRARIES || strlen(path) >= sizeof(libraries[0].path))
		{
			if (errbuf)
				snprintf(errbuf, errlen, "too many CUDA backend libraries tried in this process");
			return NULL;
		}
		l = &libraries[n_libraries++];
		snprintf(l->path, sizeof(l->path), "%s", path);
		load_library(l, path);
	}
	if (l->backend == NULL && errbuf)
		snprintf(errbuf, errlen, "%s", l->error);
	return l->backend;
}

void
gbml_cpu_column_sums(const float *x, int64_t n, int d, double *sums)
{
	for (int64_t i = 0; i < n; i++)
		for (int j = 0; j < d; j++)
			sums[j] += x[i * d + j];
}
