/*
 * kmeans_walk.c — the rows of a K-Means fit wherever they are (host
 * memory, or a chunk store such as temporary files past the memory
 * budget): the walk every pass over the rows takes, and single rows
 * fetched by global index (kmeans_internal.h says how to use both).
 *
 * A run of chunks in host memory goes to the pass at once, so an in-memory
 * fit runs each pass as one parallel region, as it did before rows could
 * be stored.  A stored chunk goes alone, read into the reader's buffer
 * while the pass works on the chunk before.  The passes' results never
 * depend on how the tasks were cut into runs (their sums are exact or
 * follow the task order), so the bytes are the same either way.
 */
#include "kmeans_internal.h"
#include "chunk_prefetch.h"

#include <stdio.h>
#include <string.h>

/* Floats of the fetch buffer (the row count adapts to the width, at least one row). */
#define KM_FETCH_FLOATS ((size_t) 1 << 18)
#define KM_FETCH_ROWS_MAX 256

/* Rows of the fetch buffer for rows of d features. */
static int
fetch_rows_for(int d)
{
	int			rows = (int) (KM_FETCH_FLOATS / (size_t) (d > 0 ? d : 1));

	return rows > KM_FETCH_ROWS_MAX ? KM_FETCH_ROWS_MAX : rows < 1 ? 1 : rows;
}

size_t
km_walk_bytes(const km_work *w)
{
	size_t		nc = (size_t) (w->ds->n_chunks > 0 ? w->ds->n_chunks : 1);

	return nc * (sizeof(float *) + sizeof(int)) +
		(size_t) fetch_rows_for(w->d) * ((size_t) w->d * sizeof(float) + sizeof(int64_t));
}

int
km_walk_setup(km_work *w)
{
	gbml_env   *env = w->env;
	int			nc = w->ds->n_chunks;

	w->fetch_rows = fetch_rows_for(w->d);
	w->chunk_x = gbml_alloc0(env, sizeof(float *) * (size_t) (nc > 0 ? nc : 1));
	w->walk_order = gbml_alloc_array(env, (size_t) (nc > 0 ? nc : 1), sizeof(int));
	w->fetch_x = gbml_alloc_array(env, (size_t) w->fetch_rows * (size_t) w->d, sizeof(float));
	w->fetch_addr = gbml_alloc_array(env, (size_t) w->fetch_rows, sizeof(int64_t));
	if (!w->chunk_x || !w->walk_order || !w->fetch_x || !w->fetch_addr)
		return env->error_code;
	w->progress.phase = "init";
	w->progress.total = w->k;
	return GBML_OK;
}

void
km_walk_free(km_work *w)
{
	gbml_free(w->env, w->chunk_x);
	gbml_free(w->env, w->walk_order);
	gbml_free(w->env, w->fetch_x);
	gbml_free(w->env, w->fetch_addr);
}

/* The tasks of chunk c inside [t0, t1). */
static inline void
chunk_tasks(const km_work *w, int c, int t0, int t1, int *first, int *end)
{
	*first = w->chunk_task[c] > t0 ? w->chunk_task[c] : t0;
	*end = w->chunk_task[c + 1] < t1 ? w->chunk_task[c + 1] : t1;
}

/* A failed read or fetch ("reading chunk 3 (rows in temporary files): why"), naming the trainer it stopped. */
static int
read_failed(km_work *w, int rc)
{
	return gbml_error_prefix(w->env, rc, "kmeans");
}

/* Between stored chunks: a pass over a big table takes seconds, and a cancel must not wait for it. */
static int
check_cancel(km_work *w)
{
	if (gbml_progress(w->env, &w->progress))
		return gbml_error(w->env, GBML_ECANCELLED, "canceled");
	return GBML_OK;
}

/*
 * The reader hands over host chunks as they are: they join the pending run.
 * A stored chunk's buffer lasts until the next read, so the run before it
 * goes first, then the chunk alone.
 */
static int
walk_reader(km_work *w, gbml_chunk_prefetch *p, int t0, int t1, km_walk_fn fn, void *arg)
{
	const gbml_dataset *ds = w->ds;
	const float *x;
	int64_t		rows;
	int			c,
				first,
				end,
				run_first = -1,
				run_end = -1,
				rc;

	while ((rc = gbml_chunk_prefetch_next(p, &x, &rows, &c)) == 1)
	{
		chunk_tasks(w, c, t0, t1, &first, &end);
		w->chunk_x[c] = x;
		if (ds->chunks[c]->x != NULL)
		{
			if (run_first < 0)
				run_first = first;
			run_end = end;
			continue;
		}
		if (run_first >= 0 && run_first < run_end && (rc = fn(w, run_first, run_end, arg)) != GBML_OK)
			return rc;
		run_first = -1;
		if (first < end && (rc = fn(w, first, end, arg)) != GBML_OK)
			return rc;
		if (end < t1 && (rc = check_cancel(w)) != GBML_OK)
			return rc;
	}
	if (rc < 0)
		return read_failed(w, rc);
	return run_first >= 0 && run_first < run_end ? fn(w, run_first, run_end, arg) : GBML_OK;
}

int
km_walk(km_work *w, int t0, int t1, km_walk_fn fn, void *arg)
{
	gbml_chunk_prefetch *p;
	int			c0,
				nc,
				rc;

	if (t0 >= t1)
		return GBML_OK;
	c0 = w->tasks[t0].chunk;
	nc = w->tasks[t1 - 1].chunk + 1 - c0;
	for (int i = 0; i < nc; i++)
		w->walk_order[i] = c0 + i;
	if ((p = gbml_chunk_prefetch_open_order(w->ds, w->env, w->walk_order, nc)) == NULL)
		return w->env->error_code;
	rc = walk_reader(w, p, t0, t1, fn, arg);
	gbml_chunk_prefetch_close(p);
	return rc;
}

void
km_locate(const km_work *w, int64_t i, int *chunk, int64_t *row)
{
	*chunk = gbml_run_of(w->chunk_start, w->ds->n_chunks, i);
	*row = i - w->chunk_start[*chunk];
}

/*
 * Rows at the addresses w->fetch_addr[0..n) into w->fetch_x: host chunks
 * copied, each run of stored rows in one fetch (the store reads a run of
 * neighbours at once).
 */
static int
fetch_batch(km_work *w, int n)
{
	const gbml_dataset *ds = w->ds;
	size_t		d = (size_t) w->d;
	int			i = 0;

	while (i < n)
	{
		const gbml_chunk *ch = ds->chunks[w->fetch_addr[i] >> 32];
		int			j = i + 1;
		int			rc;

		if (ch->x != NULL)
		{
			memcpy(w->fetch_x + (size_t) i * d, ch->x + (size_t) (w->fetch_addr[i] & 0xffffffffLL) * d,
				   d * sizeof(float));
			i++;
			continue;
		}
		while (j < n && ds->chunks[w->fetch_addr[j] >> 32]->x == NULL)
			j++;
		if ((rc = gbml_dataset_fetch_rows(ds, w->fetch_addr + i, j - i, w->fetch_x + (size_t) i * d,
										  w->env)) != GBML_OK)
			return read_failed(w, rc);
		i = j;
	}
	return GBML_OK;
}

int
km_copy_rows(km_work *w, const int64_t *g, int n, double *out)
{
	int			d = w->d;

	for (int i0 = 0; i0 < n; i0 += w->fetch_rows)
	{
		int			m = n - i0 < w->fetch_rows ? n - i0 : w->fetch_rows;
		int			rc;

		for (int i = 0; i < m; i++)
		{
			int			c;
			int64_t		r;

			km_locate(w, km_dataset_row(w, g[i0 + i]), &c, &r);
			w->fetch_addr[i] = ((int64_t) c << 32) | r;
		}
		if ((rc = fetch_batch(w, m)) != GBML_OK)
			return rc;
		for (int i = 0; i < m; i++)
		{
			int64_t		a = w->fetch_addr[i];
			double		sc = w->spherical ? w->scale[a >> 32][a & 0xffffffffLL] : 1.0;
			const float *x = w->fetch_x + (size_t) i * d;
			double	   *c = out + (size_t) (i0 + i) * d;

			for (int j = 0; j < d; j++)
				c[j] = x[j] * sc;
		}
	}
	return GBML_OK;
}
