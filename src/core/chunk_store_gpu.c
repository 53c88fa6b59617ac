/*
 * chunk_store_gpu.c — see chunk_store_gpu.h.  Each store call is one
 * backend call; failures keep the backend's text (it names the CUDA call)
 * and say whether the GPU budget was the cause.
 */
#include "chunk_store_gpu.h"
#include "gpu_ctx.h"

#include <stdio.h>
#include <string.h>

typedef struct gpu_store
{
	gbml_chunk_store base;		/* first: a gbml_chunk_store * is a gpu_store * */
	gbml_env   *env;
	const gbml_backend *b;
	gbml_gpu_ctx *ctx;
	int			n_features;		/* of the stored rows (known from the first buffer) */
} gpu_store;

static const char *const gpu_residence = "device";

static float *
gs_buffer(gbml_chunk_store *s, int64_t rows, int n_features)
{
	gpu_store  *g = (gpu_store *) s;

	g->n_features = n_features;
	return g->b->chunk_buffer(g->ctx, rows, n_features);
}

static int
gs_put(gbml_chunk_store *s, const float *x, int64_t n_rows, int n_features)
{
	gpu_store  *g = (gpu_store *) s;

	return g->b->chunk_put(g->ctx, x, n_rows, n_features);
}

static int
gs_fetch(gbml_chunk_store *s, const int64_t *src, int64_t n, float *out)
{
	gpu_store  *g = (gpu_store *) s;

	return g->b->chunk_fetch(g->ctx, src, n, out);
}

static int
gs_read_chunk(gbml_chunk_store *s, int index, float *out)
{
	gpu_store  *g = (gpu_store *) s;

	return g->b->chunk_read(g->ctx, index, out);
}

static bool
gs_out_of_room(gbml_chunk_store *s)
{
	gpu_store  *g = (gpu_store *) s;

	return gbml_gpu_ctx_status(g->env, g->ctx) == GBML_EGPUBUDGET;
}

static int
gs_permute(gbml_chunk_store *s, const int64_t *src, int64_t n, int64_t first_rows, int64_t chunk_rows)
{
	gpu_store  *g = (gpu_store *) s;

	return g->b->chunk_permute(g->ctx, src, n, first_rows, chunk_rows);
}

static int
gs_missing(gbml_chunk_store *s, bool *out)
{
	gpu_store  *g = (gpu_store *) s;
	int			d = g->n_features;
	uint8_t    *flags = gbml_alloc_array(g->env, (size_t) (d > 0 ? d : 1), 1);
	int			rc;

	if (flags == NULL)
		return 1;
	rc = g->b->chunk_missing(g->ctx, flags);
	for (int f = 0; rc == 0 && f < d; f++)
		out[f] = flags[f] != 0;
	gbml_free(g->env, flags);
	return rc;
}

static void
gs_release(gbml_chunk_store *s)
{
	gpu_store  *g = (gpu_store *) s;

	g->b->chunk_release(g->ctx);
}

static void
gs_destroy(gbml_chunk_store *s)
{
	gpu_store  *g = (gpu_store *) s;

	gbml_gpu_ctx_close(g->env, g->ctx);
	gbml_free(g->env, g);
}

static const char *
gs_error(gbml_chunk_store *s)
{
	return ((gpu_store *) s)->b->last_error();
}

static int
gs_error_code(gbml_chunk_store *s)
{
	gpu_store  *g = (gpu_store *) s;

	return gbml_gpu_ctx_status(g->env, g->ctx);
}

gbml_chunk_store *
gbml_chunk_store_gpu_open(gbml_env *env)
{
	gpu_store  *g;

	if (env->gpu == NULL || env->gpu->chunk_put == NULL)
	{
		gbml_error(env, GBML_EDEVICE, "the GPU backend cannot store rows");
		return NULL;
	}
	if ((g = gbml_alloc0(env, sizeof(gpu_store))) == NULL)
		return NULL;
	g->env = env;
	g->b = env->gpu;
	if ((g->ctx = gbml_gpu_ctx_open(env)) == NULL)
	{
		gbml_free(env, g);
		return NULL;
	}
	g->base.residence = gpu_residence;
	g->base.where = "device memory";
	g->base.read_any_thread = false;	/* the backend's calls share one stream */
	g->base.buffer = gs_buffer;
	g->base.put = gs_put;
	g->base.fetch = gs_fetch;
	g->base.read_chunk = gs_read_chunk;
	g->base.out_of_room = gs_out_of_room;
	g->base.permute = gs_permute;
	g->base.missing = gs_missing;
	g->base.release = gs_release;
	g->base.destroy = gs_destroy;
	g->base.error = gs_error;
	g->base.error_code = gs_error_code;
	return &g->base;
}

gbml_gpu_ctx *
gbml_chunk_store_gpu_ctx(const gbml_chunk_store *s)
{
	return s && s->destroy == gs_destroy ? ((const gpu_store *) s)->ctx : NULL;
}
