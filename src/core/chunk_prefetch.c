/*
 * chunk_prefetch.c — see chunk_prefetch.h.  Every visit is a range of
 * rows: a whole chunk (the chunk readers) or any run of rows in the
 * dataset's order (the range reader), which may span chunks.  A visit that
 * lies in one host chunk is handed over in place; any other is assembled in
 * one of two buffers, host parts copied, stored parts read from the store.
 * One helper thread per stored read ahead (about 20 µs to start, against
 * milliseconds for the read), so there is no thread to park or wake between
 * visits, and nothing outlives close.
 */
#include "chunk_prefetch.h"

#include <stdio.h>
#include <string.h>

typedef struct visit
{
	int64_t		start;			/* first row, in the dataset's order */
	int64_t		rows;
	int			index;			/* what next() reports: the chunk, or the range's number */
} visit;

struct gbml_chunk_prefetch
{
	const gbml_dataset *ds;
	gbml_env   *env;
	int64_t    *chunk_start;	/* n_chunks + 1: the dataset's first row of each chunk */
	visit	   *visits;
	int			n_visits;
	int			next;			/* the visit next() returns */
	float	   *buf[2];			/* assembled visits land here in turn */
	bool		buf_of_dataset;	/* buf is the dataset's kept pair (not ours to free) */
	int			handed;			/* buffer holding the visit last returned (-1: none) */
	/* the read in flight, if any */
	bool		running;
	pthread_t	thread;
	int			pending;		/* its visit (-1: none, read or not) */
	int			pending_buf;
	int			pending_rc;		/* the read's result, set by the helper before it exits */
	int			failed_chunk;	/* the chunk whose read failed */
};

static bool
stored(const gbml_dataset *ds, int index)
{
	return index < ds->n_chunks && ds->chunks[index]->x == NULL;
}

/* The chunk holding row `row` of the dataset's order. */
static int
chunk_of(const gbml_chunk_prefetch *p, int64_t row)
{
	return gbml_run_of(p->chunk_start, p->ds->n_chunks, row);
}

/* Whether the visit lies in one host chunk (handed over in place, no buffer). */
static bool
in_place(const gbml_chunk_prefetch *p, const visit *v)
{
	int			c = chunk_of(p, v->start);

	return !stored(p->ds, c) && v->start + v->rows <= p->chunk_start[c + 1];
}

/* Whether assembling the visit reads from the store. */
static bool
needs_store(const gbml_chunk_prefetch *p, const visit *v)
{
	for (int c = chunk_of(p, v->start); c < p->ds->n_chunks && p->chunk_start[c] < v->start + v->rows; c++)
		if (stored(p->ds, c))
			return true;
	return false;
}

/*
 * Assembles visit v into out: host parts copied, stored parts read (whole
 * chunks with read_chunk, parts with read_rows).  Touches no env, so a
 * helper thread may run it.  Returns 0 or the store's failure, with
 * *failed_chunk set.
 */
static int
assemble(const gbml_chunk_prefetch *p, const visit *v, float *out, int *failed_chunk)
{
	const gbml_dataset *ds = p->ds;
	gbml_chunk_store *s = ds->store;
	size_t		d = (size_t) ds->n_features;
	int64_t		end = v->start + v->rows;

	for (int c = chunk_of(p, v->start); c < ds->n_chunks && p->chunk_start[c] < end; c++)
	{
		int64_t		lo = v->start > p->chunk_start[c] ? v->start : p->chunk_start[c];
		int64_t		hi = end < p->chunk_start[c + 1] ? end : p->chunk_start[c + 1];
		int64_t		first = lo - p->chunk_start[c];
		float	   *dst = out + (size_t) (lo - v->start) * d;
		int			rc = 0;

		if (hi <= lo)
			continue;
		if (!stored(ds, c))
			memcpy(dst, ds->chunks[c]->x + (size_t) first * d, (size_t) (hi - lo) * d * sizeof(float));
		else if (first == 0 && hi - lo == ds->chunks[c]->n_rows)
			rc = s->read_chunk(s, c, dst);
		else if (s->read_rows)
			rc = s->read_rows(s, c, first, hi - lo, dst);
		else
			rc = -1;
		if (rc != 0)
		{
			*failed_chunk = c;
			return rc;
		}
	}
	return 0;
}

static gbml_chunk_prefetch *
open_visits(const gbml_dataset *ds, gbml_env *env, int n)
{
	gbml_chunk_prefetch *p;

	if (ds->stored_addr != NULL)
	{
		/* the store's chunks are not the dataset's: its rows are reached through the map */
		gbml_error(env, GBML_EINVAL, "chunk reader: the dataset's stored rows are in the order they were written (read them with gbml_dataset_stored_view)");
		return NULL;
	}
	if ((p = gbml_alloc0(env, sizeof(gbml_chunk_prefetch))) == NULL)
		return NULL;
	p->ds = ds;
	p->env = env;
	p->handed = -1;
	p->pending = -1;
	p->n_visits = n;
	p->chunk_start = gbml_alloc_array(env, (size_t) ds->n_chunks + 1, sizeof(int64_t));
	p->visits = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(visit));
	if (p->chunk_start == NULL || p->visits == NULL)
	{
		gbml_chunk_prefetch_close(p);
		return NULL;
	}
	p->chunk_start[0] = 0;
	for (int c = 0; c < ds->n_chunks; c++)
		p->chunk_start[c + 1] = p->chunk_start[c] + ds->chunks[c]->n_rows;
	return p;
}

static inline gbml_dataset *
unconstify_dataset(const gbml_dataset *ds)
{
	union
	{
		const gbml_dataset *c;
		gbml_dataset *m;
	}			u = {.c = ds};

	return u.m;
}

size_t
gbml_chunk_prefetch_buffer_bytes(const gbml_dataset *ds)
{
	int64_t		widest = 0;

	for (int c = 0; c < ds->n_chunks; c++)
		if (stored(ds, c) && ds->chunks[c]->n_rows > widest)
			widest = ds->chunks[c]->n_rows;
	return 2 * (size_t) widest * (size_t) ds->n_features * sizeof(float);
}

/*
 * The two buffers, as big as the largest visit not handed over in place:
 * the dataset's kept pair when no other reader holds it, else our own.
 */
static int
open_buffers(gbml_chunk_prefetch *p)
{
	/* the kept pair is a cache: using it does not change the dataset's rows */
	gbml_dataset *ds = unconstify_dataset(p->ds);
	size_t		rows = 0,
				floats;

	for (int i = 0; i < p->n_visits; i++)
		if (!in_place(p, &p->visits[i]) && (size_t) p->visits[i].rows > rows)
			rows = (size_t) p->visits[i].rows;
	if (rows == 0)
		return GBML_OK;
	floats = rows * (size_t) p->ds->n_features;
	if (!ds->reader_buf_busy)
	{
		/* the dataset's pair, grown if need be: kept from pass to pass */
		if (ds->reader_buf_floats < floats)
		{
			for (int b = 0; b < 2; b++)
			{
				gbml_free(p->env, ds->reader_buf[b]);
				ds->reader_buf[b] = NULL;
			}
			ds->reader_buf_floats = 0;
			for (int b = 0; b < 2; b++)
				if ((ds->reader_buf[b] = gbml_alloc_array(p->env, floats, sizeof(float))) == NULL)
					return p->env->error_code;
			ds->reader_buf_floats = floats;
		}
		ds->reader_buf_busy = true;
		p->buf_of_dataset = true;
		p->buf[0] = ds->reader_buf[0];
		p->buf[1] = ds->reader_buf[1];
		return GBML_OK;
	}
	p->buf[0] = gbml_alloc_array(p->env, floats, sizeof(float));
	p->buf[1] = gbml_alloc_array(p->env, floats, sizeof(float));
	return p->buf[0] && p->buf[1] ? GBML_OK : p->env->error_code;
}

gbml_chunk_prefetch *
gbml_chunk_prefetch_open(const gbml_dataset *ds, gbml_env *env)
{
	return gbml_chunk_prefetch_open_order(ds, env, NULL, ds->n_chunks);
}

gbml_chunk_prefetch *
gbml_chunk_prefetch_open_order(const gbml_dataset *ds, gbml_env *env, const int *order, int n)
{
	gbml_chunk_prefetch *p = open_visits(ds, env, n);

	if (p == NULL)
		return NULL;
	for (int i = 0; i < n; i++)
	{
		int			c = order ? order[i] : i;

		if (c < 0 || c >= ds->n_chunks)
		{
			gbml_error(env, GBML_EINVAL, "chunk reader: chunk %d out of range (%d chunks)", c, ds->n_chunks);
			gbml_chunk_prefetch_close(p);
			return NULL;
		}
		p->visits[i].start = p->chunk_start[c];
		p->visits[i].rows = ds->chunks[c]->n_rows;
		p->visits[i].index = c;
	}
	if (open_buffers(p) != GBML_OK)
	{
		gbml_chunk_prefetch_close(p);
		return NULL;
	}
	return p;
}

gbml_chunk_prefetch *
gbml_chunk_prefetch_open_ranges(const gbml_dataset *ds, gbml_env *env, const int64_t *start,
								const int64_t *rows, int n)
{
	gbml_chunk_prefetch *p = open_visits(ds, env, n);

	if (p == NULL)
		return NULL;
	for (int i = 0; i < n; i++)
	{
		if (start[i] < 0 || rows[i] <= 0 || start[i] + rows[i] > ds->n_rows)
		{
			gbml_error(env, GBML_EINVAL, "range reader: rows %lld..%lld out of range (%lld rows)",
					   (long long) start[i], (long long) (start[i] + rows[i]), (long long) ds->n_rows);
			gbml_chunk_prefetch_close(p);
			return NULL;
		}
		p->visits[i].start = start[i];
		p->visits[i].rows = rows[i];
		p->visits[i].index = i;
	}
	if (open_buffers(p) != GBML_OK)
	{
		gbml_chunk_prefetch_close(p);
		return NULL;
	}
	return p;
}

static void *
read_main(void *arg)
{
	gbml_chunk_prefetch *p = arg;

	p->pending_rc = assemble(p, &p->visits[p->pending], p->buf[p->pending_buf], &p->failed_chunk);
	return NULL;
}

/* Waits for the read in flight (if any); its result stays in pending / pending_rc. */
static void
join_read(gbml_chunk_prefetch *p)
{
	if (p->running)
	{
		pthread_join(p->thread, NULL);
		p->running = false;
	}
}

/*
 * Starts assembling visit i into the buffer not handed out, on a helper
 * thread, when it reads from a store that allows it; a thread that cannot
 * start only means the read happens when the visit is asked for.
 */
static void
start_read(gbml_chunk_prefetch *p, int i)
{
	p->pending = i;
	p->pending_buf = p->handed == 0 ? 1 : 0;
	p->running = gbml_thread_start(&p->thread, read_main, p);
	if (!p->running)
		p->pending = -1;
}

/* Visit i into a buffer not handed out: the read ahead, or one now. */
static int
take_assembled(gbml_chunk_prefetch *p, int i, const float **x)
{
	int			b,
				rc;

	join_read(p);
	if (p->pending == i)
	{
		b = p->pending_buf;
		rc = p->pending_rc;
	}
	else
	{
		b = p->handed == 0 ? 1 : 0;
		rc = assemble(p, &p->visits[i], p->buf[b], &p->failed_chunk);
	}
	p->pending = -1;
	if (rc != 0)
	{
		char		what[64];

		snprintf(what, sizeof(what), "reading chunk %d", p->failed_chunk + 1);
		if (p->ds->store->read_rows == NULL && rc == -1)
			return gbml_error(p->env, GBML_EUNSUPPORTED, "%s: the rows in %s can only be read by whole chunks",
							  what, p->ds->store->where);
		return gbml_dataset_store_error(p->ds, p->env, what);
	}
	p->handed = b;
	*x = p->buf[b];
	return 1;
}

int
gbml_chunk_prefetch_next(gbml_chunk_prefetch *p, const float **x, int64_t *n_rows, int *index)
{
	const gbml_dataset *ds = p->ds;
	const visit *v;
	int			i = p->next;
	int			rc = 1;

	if (i >= p->n_visits)
		return 0;
	v = &p->visits[i];
	if (in_place(p, v))
	{
		int			c = chunk_of(p, v->start);

		*x = ds->chunks[c]->x + (size_t) (v->start - p->chunk_start[c]) * (size_t) ds->n_features;
	}
	else
		rc = take_assembled(p, i, x);
	if (rc != 1)
		return rc;
	p->next = i + 1;
	*n_rows = v->rows;
	*index = v->index;
	/* the next visit that reads a store, if the thread is free and the store allows it */
	if (!p->running && ds->store && ds->store->read_any_thread)
		for (int j = i + 1; j < p->n_visits; j++)
			if (!in_place(p, &p->visits[j]))
			{
				if (needs_store(p, &p->visits[j]))
					start_read(p, j);
				break;
			}
	return 1;
}

void
gbml_chunk_prefetch_close(gbml_chunk_prefetch *p)
{
	if (p == NULL)
		return;
	join_read(p);
	if (p->buf_of_dataset)
		unconstify_dataset(p->ds)->reader_buf_busy = false;
	else
	{
		gbml_free(p->env, p->buf[0]);
		gbml_free(p->env, p->buf[1]);
	}
	gbml_free(p->env, p->chunk_start);
	gbml_free(p->env, p->visits);
	gbml_free(p->env, p);
}
