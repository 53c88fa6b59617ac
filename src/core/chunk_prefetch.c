/*
 * chunk_prefetch.c — see chunk_prefetch.h.  One helper thread per chunk
 * read (about 20 µs to start, against milliseconds for the read), so there
 * is no thread to park or wake between chunks, and nothing outlives close.
 */
#include "chunk_prefetch.h"

#include <stdio.h>

struct gbml_chunk_prefetch
{
	const gbml_dataset *ds;
	gbml_env   *env;
	float	   *buf[2];			/* stored chunks land here in turn */
	bool		identity;		/* the chunks 0, 1, ... in order */
	int		   *order;			/* else the chunks in the order to visit them */
	int			order_cap;		/* room in order */
	int			n_visit;		/* how many chunks to visit */
	int			next;			/* position in the visit order of the chunk next() returns */
	int			handed;			/* buffer holding the chunk last returned (-1: none) */
	/* the read in flight, if any */
	bool		running;
	pthread_t	thread;
	int			pending;		/* its chunk (-1: none, read or not) */
	int			pending_buf;
	int			pending_rc;		/* read_chunk's result, set by the helper before it exits */
};

static bool
stored(const gbml_dataset *ds, int index)
{
	return index < ds->n_chunks && ds->chunks[index]->x == NULL;
}

/* The largest stored chunk's features, in floats (0: every chunk is in host memory). */
static size_t
largest_stored(const gbml_dataset *ds)
{
	size_t		m = 0;

	for (int i = 0; i < ds->n_chunks; i++)
		if (stored(ds, i) && (size_t) ds->chunks[i]->n_rows > m)
			m = (size_t) ds->chunks[i]->n_rows;
	return m * (size_t) ds->n_features;
}

gbml_chunk_prefetch *
gbml_chunk_prefetch_open(const gbml_dataset *ds, gbml_env *env)
{
	return gbml_chunk_prefetch_open_order(ds, env, NULL, ds->n_chunks);
}

gbml_chunk_prefetch *
gbml_chunk_prefetch_open_order(const gbml_dataset *ds, gbml_env *env, const int *order, int n)
{
	gbml_chunk_prefetch *p = gbml_alloc0(env, sizeof(gbml_chunk_prefetch));
	size_t		floats = largest_stored(ds);

	if (p == NULL)
		return NULL;
	p->ds = ds;
	p->env = env;
	p->handed = -1;
	p->pending = -1;
	if (floats > 0)
	{
		p->buf[0] = gbml_alloc_array(env, floats, sizeof(float));
		p->buf[1] = gbml_alloc_array(env, floats, sizeof(float));
		if (p->buf[0] == NULL || p->buf[1] == NULL)
		{
			gbml_chunk_prefetch_close(p);
			return NULL;
		}
	}
	if (gbml_chunk_prefetch_restart(p, order, n) != GBML_OK)
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
	gbml_chunk_store *s = p->ds->store;

	p->pending_rc = s->read_chunk(s, p->pending, p->buf[p->pending_buf]);
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

int
gbml_chunk_prefetch_restart(gbml_chunk_prefetch *p, const int *order, int n)
{
	join_read(p);
	p->pending = -1;
	p->handed = -1;
	p->next = 0;
	p->n_visit = 0;
	p->identity = order == NULL;
	if (order == NULL)
	{
		if (n > p->ds->n_chunks)
			return gbml_error(p->env, GBML_EINVAL, "chunk reader: %d chunks asked of %d", n, p->ds->n_chunks);
		p->n_visit = n;
		return GBML_OK;
	}
	if (n > p->order_cap)
	{
		gbml_free(p->env, p->order);
		p->order_cap = 0;
		if ((p->order = gbml_alloc_array(p->env, (size_t) n, sizeof(int))) == NULL)
			return p->env->error_code;
		p->order_cap = n;
	}
	for (int i = 0; i < n; i++)
	{
		if (order[i] < 0 || order[i] >= p->ds->n_chunks)
			return gbml_error(p->env, GBML_EINVAL, "chunk reader: chunk %d out of range (%d chunks)", order[i],
							  p->ds->n_chunks);
		p->order[i] = order[i];
	}
	p->n_visit = n;
	return GBML_OK;
}

/*
 * Starts reading chunk `index` into the buffer not handed out, on a helper
 * thread when the store allows it; a thread that cannot start only means
 * the read happens when the chunk is asked for.
 */
static void
start_read(gbml_chunk_prefetch *p, int index)
{
	if (!stored(p->ds, index) || !p->ds->store->read_any_thread)
		return;
	p->pending = index;
	p->pending_buf = p->handed == 0 ? 1 : 0;
	p->running = gbml_thread_start(&p->thread, read_main, p);
	if (!p->running)
		p->pending = -1;
}

/* Chunk `index` from the store into a buffer not handed out: the prefetched read, or one now. */
static int
take_stored(gbml_chunk_prefetch *p, int index, const float **x)
{
	gbml_chunk_store *s = p->ds->store;
	int			b,
				rc;

	join_read(p);
	if (p->pending == index)
	{
		b = p->pending_buf;
		rc = p->pending_rc;
	}
	else
	{
		b = p->handed == 0 ? 1 : 0;
		rc = s->read_chunk(s, index, p->buf[b]);
	}
	p->pending = -1;
	if (rc != 0)
	{
		char		what[64];

		snprintf(what, sizeof(what), "reading chunk %d", index + 1);
		return gbml_dataset_store_error(p->ds, p->env, what);
	}
	p->handed = b;
	*x = p->buf[b];
	return 1;
}

/* The chunk at position pos of the visit order. */
static inline int
visit(const gbml_chunk_prefetch *p, int pos)
{
	return p->identity ? pos : p->order[pos];
}

int
gbml_chunk_prefetch_next(gbml_chunk_prefetch *p, const float **x, int64_t *n_rows, int *index)
{
	const gbml_dataset *ds = p->ds;
	int			i;
	int			rc = 1;

	if (p->next >= p->n_visit)
		return 0;
	i = visit(p, p->next);
	if (stored(ds, i))
		rc = take_stored(p, i, x);
	else
		*x = ds->chunks[i]->x;
	if (rc != 1)
		return rc;
	p->next++;
	*n_rows = ds->chunks[i]->n_rows;
	*index = i;
	/* the next stored chunk, if the thread is free (a host chunk between needs no read) */
	if (!p->running)
		for (int pos = p->next; pos < p->n_visit; pos++)
			if (stored(ds, visit(p, pos)))
			{
				start_read(p, visit(p, pos));
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
	gbml_free(p->env, p->buf[0]);
	gbml_free(p->env, p->buf[1]);
	gbml_free(p->env, p->order);
	gbml_free(p->env, p);
}
