/*
 * chunk_store.cu — dataset chunks that live on the device (the device
 * residence of src/core/dataset.h's chunk store): rows streamed in during
 * the scan through a ring of pinned host buffers, reordered on the device
 * (canonical order, the eval split), gathered back to the host when a few
 * rows are needed there (the border sample, eval rows), and quantized into
 * the boosting bins without ever coming back.
 *
 * A chunk is n_rows x n_features floats, row-major as on the host.  Rows are
 * addressed as the host addresses them: chunk << 32 | row.
 */
#include "gpu_context.h"

extern "C" {
#include "boost_histogram.h"
}

#include <stdlib.h>
#include <string.h>

/*
 * Deliberate bugs for the checker's mutation test (see boost_device.cu):
 *   GBML_PLANT == 6: a value equal to a border is binned above it (>= instead of >)
 *   GBML_PLANT == 7: a ring buffer is handed out again before its copy has run
 */
#ifndef GBML_PLANT
#define GBML_PLANT 0
#endif

#define STORE_RING 2			/* pinned chunk buffers the scan fills in turn */
#define GATHER_THREADS 256

typedef struct device_chunk
{
	float	   *x;
	int64_t		n_rows;
} device_chunk;

typedef struct gpu_chunk_state
{
	int			n_features;
	device_chunk *chunks;
	int			n_chunks;
	int			cap_chunks;
	float	   *ring[STORE_RING];
	size_t		ring_floats[STORE_RING];
	cudaEvent_t ring_done[STORE_RING];
	bool		ring_used[STORE_RING];
	int			ring_next;
	int			handed_out;		/* ring slot last returned by chunk_buffer, or -1 */
} gpu_chunk_state;

/* ---- kernels ---- */

/* out[i][f] = the row src[i] (chunk << 32 | row) of the chunk table. */
__global__ static void
gather_rows_kernel(float *const *chunks, int n_features, const int64_t *src, int64_t n, float *out)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n * n_features)
	{
		int64_t		row = i / n_features;
		int			f = (int) (i % n_features);
		int64_t		s = src[row];

		out[i] = chunks[s >> 32][(s & 0xffffffffLL) * n_features + f];
	}
}

/* What the bin kernel reads; passed by value. */
typedef struct bin_args
{
	float	   *const *chunks;
	const int64_t *src;			/* training row -> chunk << 32 | row */
	int64_t		n_rows;
	int			n_features;
	int64_t		block_rows;
	const int  *border_count;
	const int64_t *border_off;
	const float *borders;
	uint8_t    *bins;
} bin_args;

/* bin(x) = #{ j : x > borders[j] }, as gbml_boost_bin_of (NaN -> 0). */
__device__ __forceinline__ static int
bin_of(const float *borders, int count, float x)
{
	int			lo = 0,
				hi = count;

	while (lo < hi)
	{
		int			mid = (lo + hi) >> 1;

#if GBML_PLANT == 6
		if (x >= borders[mid])
#else
		if (x > borders[mid])
#endif
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* One thread per (training row, feature): the bin, in the block-local feature-major layout. */
__global__ static void
bin_rows_kernel(bin_args a)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < a.n_rows * a.n_features)
	{
		int64_t		row = i / a.n_features;
		int			f = (int) (i % a.n_features);
		int64_t		s = a.src[row];
		float		x = a.chunks[s >> 32][(s & 0xffffffffLL) * a.n_features + f];
		int64_t		b = row / a.block_rows;
		int64_t		start = b * a.block_rows;
		int64_t		len = a.n_rows - start < a.block_rows ? a.n_rows - start : a.block_rows;

		a.bins[start * a.n_features + (int64_t) f * len + (row - start)] =
			(uint8_t) bin_of(a.borders + a.border_off[f], a.border_count[f], x);
	}
}

/* ---- host side ---- */

static gpu_chunk_state *
store_of(gbml_gpu_ctx *ctx, int n_features)
{
	gpu_chunk_state *s = ctx->chunks;

	if (s == NULL)
	{
		if (n_features < 1)
		{
			gpu_fail("GPU chunk store: no chunk was stored");
			return NULL;
		}
		s = (gpu_chunk_state *) calloc(1, sizeof(gpu_chunk_state));
		if (s == NULL)
		{
			gpu_fail("out of host memory for the GPU chunk store");
			return NULL;
		}
		s->n_features = n_features;
		s->handed_out = -1;
		ctx->chunks = s;
	}
	else if (n_features > 0 && n_features != s->n_features)
	{
		gpu_fail("GPU chunk store: %d features, the stored chunks have %d", n_features, s->n_features);
		return NULL;
	}
	return s;
}

/* The host buffer for the next chunk: a pinned ring slot whose last copy has run. */
extern "C" float *
gpu_chunk_buffer(gbml_gpu_ctx *ctx, int64_t rows, int n_features)
{
	gpu_chunk_state *s = store_of(ctx, n_features);
	size_t		floats = (size_t) rows * (size_t) n_features;
	int			slot;

	if (s == NULL)
		return NULL;
	slot = s->ring_next;
	if (s->ring_used[slot])
	{
		if (!(GBML_PLANT == 7) &&
			gpu_check(cudaEventSynchronize(s->ring_done[slot]), "cudaEventSynchronize(chunk staging)"))
			return NULL;
		s->ring_used[slot] = false;
	}
	if (s->ring[slot] != NULL && s->ring_floats[slot] < floats)
	{
		gpu_release(ctx, s->ring[slot]);
		s->ring[slot] = NULL;
	}
	if (s->ring[slot] == NULL)
	{
		if ((s->ring[slot] = (float *) gpu_alloc_pinned(ctx, floats * sizeof(float), "chunk staging")) == NULL)
			return NULL;
		s->ring_floats[slot] = floats;
		if (s->ring_done[slot] == NULL && (s->ring_done[slot] = gpu_event(ctx)) == NULL)
			return NULL;
	}
	s->handed_out = slot;
	return s->ring[slot];
}

/* Stores x (n_rows x n_features) as the next chunk; x is the buffer chunk_buffer handed out, or any host memory. */
extern "C" int
gpu_chunk_put(gbml_gpu_ctx *ctx, const float *x, int64_t n_rows, int n_features)
{
	gpu_chunk_state *s = store_of(ctx, n_features);
	size_t		bytes = (size_t) n_rows * (size_t) n_features * sizeof(float);
	float	   *d;
	int			slot;

	if (s == NULL)
		return 1;
	if (n_rows < 1 || n_rows > 0x7fffffffLL)
		return gpu_fail("GPU chunk store: a chunk of %lld rows", (long long) n_rows);
	if (s->n_chunks == s->cap_chunks)
	{
		int			cap = s->cap_chunks ? s->cap_chunks * 2 : 16;
		device_chunk *c = (device_chunk *) realloc(s->chunks, sizeof(device_chunk) * (size_t) cap);

		if (c == NULL)
			return gpu_fail("out of host memory for the GPU chunk table");
		s->chunks = c;
		s->cap_chunks = cap;
	}
	if ((d = (float *) gpu_alloc_device(ctx, bytes, "the rows")) == NULL)
		return 1;
	s->chunks[s->n_chunks].x = d;
	s->chunks[s->n_chunks].n_rows = n_rows;
	s->n_chunks++;
	slot = s->handed_out;
	if (slot >= 0 && x == s->ring[slot])
	{
		/* the scan fills the other ring slot while this copy runs */
		s->handed_out = -1;
		s->ring_next = (slot + 1) % STORE_RING;
		if (gpu_upload(ctx, d, x, bytes, "cudaMemcpyAsync(rows)") ||
			gpu_check(cudaEventRecord(s->ring_done[slot], ctx->stream), "cudaEventRecord(chunk staging)"))
			return 1;
		s->ring_used[slot] = true;
		return 0;
	}
	/* pageable memory the caller may free: copy before returning */
	if (gpu_upload(ctx, d, x, bytes, "cudaMemcpyAsync(rows)"))
		return 1;
	return gpu_sync(ctx, "cudaStreamSynchronize(rows)");
}

/* The chunk table on the device (freed by the caller with gpu_release). */
static float **
device_chunk_table(gbml_gpu_ctx *ctx, gpu_chunk_state *s)
{
	float	  **host = (float **) malloc(sizeof(float *) * (size_t) (s->n_chunks > 0 ? s->n_chunks : 1));
	float	  **d;

	if (host == NULL)
	{
		gpu_fail("out of host memory for the chunk table");
		return NULL;
	}
	for (int c = 0; c < s->n_chunks; c++)
		host[c] = s->chunks[c].x;
	d = (float **) gpu_alloc_device(ctx, sizeof(float *) * (size_t) (s->n_chunks > 0 ? s->n_chunks : 1), "the chunk table");
	if (d == NULL || gpu_upload(ctx, d, host, sizeof(float *) * (size_t) s->n_chunks, "cudaMemcpyAsync(chunk table)") ||
		gpu_sync(ctx, "cudaStreamSynchronize(chunk table)"))
	{
		free(host);
		return NULL;
	}
	free(host);
	return d;
}

/* Checks every address of src against the chunk table. */
static int
check_sources(const gpu_chunk_state *s, const int64_t *src, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		c = src[i] >> 32,
					r = src[i] & 0xffffffffLL;

		if (src[i] < 0 || c >= s->n_chunks || r >= s->chunks[c].n_rows)
			return gpu_fail("GPU chunk store: row address %lld (chunk %lld, row %lld) is not stored",
							(long long) i, (long long) c, (long long) r);
	}
	return 0;
}

/* src on the device, checked (freed by the caller with gpu_release). */
static int64_t *
device_sources(gbml_gpu_ctx *ctx, const gpu_chunk_state *s, const int64_t *src, int64_t n)
{
	int64_t    *d;

	if (check_sources(s, src, n))
		return NULL;
	d = (int64_t *) gpu_alloc_device(ctx, sizeof(int64_t) * (size_t) (n > 0 ? n : 1), "the row order");
	if (d == NULL || gpu_upload(ctx, d, src, sizeof(int64_t) * (size_t) n, "cudaMemcpyAsync(row order)"))
		return NULL;
	return d;
}

static int
launch_gather(gbml_gpu_ctx *ctx, float *const *table, int n_features, const int64_t *d_src, int64_t n, float *out)
{
	int64_t		elems = n * n_features;

	if (elems == 0)
		return 0;
	GBML_LAUNCH(gather_rows_kernel, dim3((unsigned) ((elems + GATHER_THREADS - 1) / GATHER_THREADS)),
				dim3(GATHER_THREADS), 0, ctx->stream, table, n_features, d_src, n, out);
	return gpu_check(cudaGetLastError(), "gather_rows_kernel launch");
}

/* Copies stored chunk `index` to out, straight from its device memory. */
extern "C" int
gpu_chunk_read(gbml_gpu_ctx *ctx, int index, float *out)
{
	gpu_chunk_state *s = store_of(ctx, 0);

	if (s == NULL)
		return 1;
	if (index < 0 || index >= s->n_chunks)
		return gpu_fail("GPU chunk store: chunk %d is not stored (%d are)", index, s->n_chunks);
	if (gpu_check(cudaMemcpyAsync(out, s->chunks[index].x,
								  sizeof(float) * (size_t) s->chunks[index].n_rows * (size_t) s->n_features,
								  cudaMemcpyDeviceToHost, ctx->stream), "cudaMemcpyAsync(chunk to host)"))
		return 1;
	return gpu_sync(ctx, "reading a chunk back");
}

/* Copies rows src[0..n) to out (n x n_features, host). */
extern "C" int
gpu_chunk_fetch(gbml_gpu_ctx *ctx, const int64_t *src, int64_t n, float *out)
{
	gpu_chunk_state *s = store_of(ctx, 0);
	float	  **table;
	int64_t    *d_src = NULL;
	float	   *d_out = NULL;
	int			rc = 1;

	if (s == NULL || (table = device_chunk_table(ctx, s)) == NULL)
		return 1;
	if ((d_src = device_sources(ctx, s, src, n)) != NULL &&
		(d_out = (float *) gpu_alloc_device(ctx, sizeof(float) * (size_t) (n > 0 ? n : 1) * (size_t) s->n_features,
											"fetched rows")) != NULL &&
		!launch_gather(ctx, table, s->n_features, d_src, n, d_out) &&
		!gpu_check(cudaMemcpyAsync(out, d_out, sizeof(float) * (size_t) n * (size_t) s->n_features,
								   cudaMemcpyDeviceToHost, ctx->stream), "cudaMemcpyAsync(rows to host)") &&
		!gpu_sync(ctx, "fetching rows"))
		rc = 0;
	gpu_release(ctx, d_out);
	gpu_release(ctx, d_src);
	gpu_release(ctx, table);
	return rc;
}

/*
 * Replaces the stored chunks with the rows src[0..n) in that order, in
 * chunks of first_rows, then chunk_rows rows (the serial layout).  The old
 * chunks are freed at the end: the device holds both for a moment.
 */
extern "C" int
gpu_chunk_permute(gbml_gpu_ctx *ctx, const int64_t *src, int64_t n, int64_t first_rows, int64_t chunk_rows)
{
	gpu_chunk_state *s = store_of(ctx, 0);
	float	  **table;
	int64_t    *d_src;
	device_chunk *fresh = NULL;
	int			n_fresh = 0,
				old_n;
	int64_t		done = 0;
	int			rc = 1;

	if (s == NULL || first_rows < 1 || chunk_rows < 1)
		return s == NULL ? 1 : gpu_fail("GPU chunk store: bad chunk sizes");
	if ((table = device_chunk_table(ctx, s)) == NULL)
		return 1;
	if ((d_src = device_sources(ctx, s, src, n)) == NULL)
		goto done;
	fresh = (device_chunk *) calloc((size_t) (n / chunk_rows + 2), sizeof(device_chunk));
	if (fresh == NULL)
	{
		gpu_fail("out of host memory for the GPU chunk table");
		goto done;
	}
	while (done < n)
	{
		int64_t		want = n_fresh == 0 ? first_rows : chunk_rows;
		int64_t		rows = n - done < want ? n - done : want;
		float	   *d = (float *) gpu_alloc_device(ctx, sizeof(float) * (size_t) rows * (size_t) s->n_features, "the reordered rows");

		if (d == NULL)
			goto done;
		fresh[n_fresh].x = d;
		fresh[n_fresh].n_rows = rows;
		n_fresh++;
		if (launch_gather(ctx, table, s->n_features, d_src + done, rows, d))
			goto done;
		done += rows;
	}
	if (gpu_sync(ctx, "reordering rows"))
		goto done;
	/* swap the tables: the old chunks go */
	old_n = s->n_chunks;
	for (int c = 0; c < old_n; c++)
		gpu_release(ctx, s->chunks[c].x);
	free(s->chunks);
	s->chunks = fresh;
	s->n_chunks = s->cap_chunks = n_fresh;
	fresh = NULL;
	rc = 0;
done:
	if (fresh)
	{
		for (int c = 0; c < n_fresh; c++)
			gpu_release(ctx, fresh[c].x);
		free(fresh);
	}
	gpu_release(ctx, d_src);
	gpu_release(ctx, table);
	return rc;
}

/* Frees every stored chunk (after quantization the floats are not needed). */
extern "C" void
gpu_chunk_release(gbml_gpu_ctx *ctx)
{
	gpu_chunk_state *s = ctx->chunks;

	if (s == NULL)
		return;
	for (int c = 0; c < s->n_chunks; c++)
		gpu_release(ctx, s->chunks[c].x);
	s->n_chunks = 0;
	/* the scan is over: the staging buffers go too */
	for (int i = 0; i < STORE_RING; i++)
	{
		gpu_release(ctx, s->ring[i]);
		gpu_release(ctx, (void *) s->ring_done[i]);
		s->ring[i] = NULL;
		s->ring_done[i] = NULL;
		s->ring_used[i] = false;
		s->ring_floats[i] = 0;
	}
	s->handed_out = -1;
}

/* Frees the store's host-side state (the device memory goes with the context). */
extern "C" void
gpu_chunk_state_free(gbml_gpu_ctx *ctx)
{
	if (ctx->chunks)
	{
		free(ctx->chunks->chunks);
		free(ctx->chunks);
		ctx->chunks = NULL;
	}
}

/* bin_rows: the boosting bins of the training rows src[] straight from the stored chunks. */
extern "C" int
gpu_chunk_bin_rows(gbml_gpu_ctx *ctx, uint8_t *d_bins, const int64_t *src, int64_t n, int64_t block_rows,
				   const int *border_count, const int64_t *border_off, const float *border_values)
{
	gpu_chunk_state *s = store_of(ctx, 0);
	float	  **table;
	int64_t    *d_src = NULL;
	int		   *d_count = NULL;
	int64_t    *d_off = NULL;
	float	   *d_borders = NULL;
	bin_args	a;
	int			d;
	int64_t		elems;
	int			rc = 1;

	if (s == NULL || (table = device_chunk_table(ctx, s)) == NULL)
		return 1;
	d = s->n_features;
	elems = n * d;
	if ((d_src = device_sources(ctx, s, src, n)) == NULL ||
		(d_count = (int *) gpu_alloc_device(ctx, sizeof(int) * (size_t) d, "the border counts")) == NULL ||
		(d_off = (int64_t *) gpu_alloc_device(ctx, sizeof(int64_t) * ((size_t) d + 1), "the border offsets")) == NULL ||
		(d_borders = (float *) gpu_alloc_device(ctx, sizeof(float) * (size_t) (border_off[d] > 0 ? border_off[d] : 1),
												"the borders")) == NULL ||
		gpu_upload(ctx, d_count, border_count, sizeof(int) * (size_t) d, "cudaMemcpyAsync(border counts)") ||
		gpu_upload(ctx, d_off, border_off, sizeof(int64_t) * ((size_t) d + 1), "cudaMemcpyAsync(border offsets)") ||
		gpu_upload(ctx, d_borders, border_values, sizeof(float) * (size_t) border_off[d], "cudaMemcpyAsync(borders)"))
		goto done;
	memset(&a, 0, sizeof(a));
	a.chunks = table;
	a.src = d_src;
	a.n_rows = n;
	a.n_features = d;
	a.block_rows = block_rows;
	a.border_count = d_count;
	a.border_off = d_off;
	a.borders = d_borders;
	a.bins = d_bins;
	if (elems > 0)
	{
		GBML_LAUNCH(bin_rows_kernel, dim3((unsigned) ((elems + GATHER_THREADS - 1) / GATHER_THREADS)),
					dim3(GATHER_THREADS), 0, ctx->stream, a);
		if (gpu_check(cudaGetLastError(), "bin_rows_kernel launch"))
			goto done;
	}
	if (gpu_sync(ctx, "quantizing rows"))
		goto done;
	rc = 0;
done:
	gpu_release(ctx, d_borders);
	gpu_release(ctx, d_off);
	gpu_release(ctx, d_count);
	gpu_release(ctx, d_src);
	gpu_release(ctx, table);
	return rc;
}

/* flags[f] = 1 when some row of the chunk has NaN or -Infinity in feature f (as boost_quantize's scan). */
__global__ static void
missing_kernel(const float *x, int64_t n_rows, int n_features, unsigned int *flags)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n_rows * n_features)
	{
		float		v = x[i];

		if (isnan(v) || (isinf(v) && v < 0))
			atomicOr(&flags[i % n_features], 1u);
	}
}

extern "C" int
gpu_chunk_missing(gbml_gpu_ctx *ctx, uint8_t *out)
{
	gpu_chunk_state *s = store_of(ctx, 0);
	unsigned int *d_flags,
			   *flags;
	int			rc = 1;

	if (s == NULL)
		return 1;
	flags = (unsigned int *) calloc((size_t) s->n_features, sizeof(unsigned int));
	if (flags == NULL)
		return gpu_fail("out of host memory for the missing-value flags");
	d_flags = (unsigned int *) gpu_alloc_device(ctx, sizeof(unsigned int) * (size_t) s->n_features, "the missing-value flags");
	if (d_flags == NULL ||
		gpu_check(cudaMemsetAsync(d_flags, 0, sizeof(unsigned int) * (size_t) s->n_features, ctx->stream),
				  "cudaMemsetAsync(missing-value flags)"))
		goto done;
	for (int c = 0; c < s->n_chunks; c++)
	{
		int64_t		elems = s->chunks[c].n_rows * s->n_features;

		GBML_LAUNCH(missing_kernel, dim3((unsigned) ((elems + GATHER_THREADS - 1) / GATHER_THREADS)),
					dim3(GATHER_THREADS), 0, ctx->stream, s->chunks[c].x, s->chunks[c].n_rows, s->n_features, d_flags);
		if (gpu_check(cudaGetLastError(), "missing_kernel launch"))
			goto done;
	}
	if (gpu_check(cudaMemcpyAsync(flags, d_flags, sizeof(unsigned int) * (size_t) s->n_features,
								  cudaMemcpyDeviceToHost, ctx->stream), "cudaMemcpyAsync(missing-value flags)") ||
		gpu_sync(ctx, "scanning for missing values"))
		goto done;
	for (int f = 0; f < s->n_features; f++)
		out[f] = flags[f] != 0;
	rc = 0;
done:
	gpu_release(ctx, d_flags);
	free(flags);
	return rc;
}
