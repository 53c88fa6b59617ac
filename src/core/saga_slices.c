/*
 * saga_slices.c — see saga_slices.h.  One helper thread per group (about
 * 20 µs to start, against a millisecond or more to read and train ~8 MB),
 * so there is no thread to park or wake between groups, and nothing
 * outlives close.
 */
#include "saga_slices.h"
#include "saga_kernels.h"

#include <stdio.h>
#include <string.h>

/* One group's rows, read into one buffer. */
typedef struct group_buffer
{
	float	   *x;				/* group_rows x d, and the last row's padding */
	int64_t		group;			/* the group it holds (-1: none) */
	int			rc;				/* the store's failure, 0 when every read went through */
	int			failed_chunk;
} group_buffer;

struct gbml_saga_slices
{
	const gbml_dataset *ds;
	gbml_env   *env;
	const gbml_saga_plan *pl;
	size_t		row_floats;
	bool		stored;			/* some chunk is in the store: every group is read */
	bool		async;			/* the next group is read on a helper thread */
	int64_t    *addr;			/* a piece's row addresses, for a store without read_rows */
	group_buffer b[2];
	int			cur;			/* the buffer handed out last (-1: none) */
	int64_t		next;			/* the next group to hand out */
	/* the read in flight, if any */
	bool		running;
	pthread_t	thread;
	int			pending;		/* the buffer it fills (-1: none) */
};

/* Whether some chunk lives in a store: then every group is read into a buffer. */
static bool
any_stored(const gbml_dataset *ds)
{
	for (int c = 0; c < ds->n_chunks; c++)
		if (ds->chunks[c]->x == NULL)
			return true;
	return false;
}

/* One group's buffer, in floats: group_rows rows and the last row's padding. */
static size_t
group_floats(const gbml_dataset *ds, const gbml_saga_plan *pl)
{
	return (size_t) pl->group_rows * (size_t) ds->n_features + (size_t) gbml_saga_padded(ds->n_features);
}

size_t
gbml_saga_slices_buffer_bytes(const gbml_dataset *ds, const gbml_saga_plan *pl)
{
	return any_stored(ds) ? 2 * group_floats(ds, pl) * sizeof(float) : 0;
}

gbml_saga_slices *
gbml_saga_slices_open(const gbml_dataset *ds, gbml_env *env, const gbml_saga_plan *pl)
{
	gbml_saga_slices *r = gbml_alloc0(env, sizeof(gbml_saga_slices));
	size_t		floats = group_floats(ds, pl);

	if (r == NULL)
		return NULL;
	r->ds = ds;
	r->env = env;
	r->pl = pl;
	r->row_floats = (size_t) ds->n_features;
	r->cur = -1;
	r->pending = -1;
	r->stored = any_stored(ds);
	if (!r->stored)
		return r;
	r->async = ds->store->read_any_thread && ds->store->read_rows != NULL;
	for (int i = 0; i < 2; i++)
	{
		r->b[i].group = -1;
		if ((r->b[i].x = gbml_alloc0(env, floats * sizeof(float))) == NULL)
		{
			gbml_saga_slices_close(r);
			return NULL;
		}
	}
	if ((r->addr = gbml_alloc_array(env, (size_t) pl->slice_rows, sizeof(int64_t))) == NULL)
	{
		gbml_saga_slices_close(r);
		return NULL;
	}
	return r;
}

typedef struct fill_ctx
{
	gbml_saga_slices *r;
	group_buffer *b;
} fill_ctx;

/* One piece of the group: rows [first, first + n) of chunk c, its rows [i, i + n) (gbml_saga_plan_pieces). */
static void
fill_piece(void *arg, int c, int64_t first, int64_t i, int64_t n)
{
	fill_ctx   *f = arg;
	gbml_saga_slices *r = f->r;
	const gbml_chunk *ch = r->ds->chunks[c];
	gbml_chunk_store *s = r->ds->store;
	float	   *out = f->b->x + (size_t) i * r->row_floats;

	if (f->b->rc != 0)
		return;
	if (ch->x != NULL)
		memcpy(out, ch->x + (size_t) first * r->row_floats, sizeof(float) * (size_t) n * r->row_floats);
	else if (s->read_rows != NULL)
		f->b->rc = s->read_rows(s, c, first, n, out);
	else
	{
		/* a store without range reads (main thread only: never async); a piece is at most a slice */
		for (int64_t k = 0; k < n; k++)
			r->addr[k] = ((int64_t) c << 32) | (first + k);
		f->b->rc = s->fetch(s, r->addr, n, out);
	}
	if (f->b->rc != 0)
		f->b->failed_chunk = c;
}

/* Reads group j into b; any thread when async (it touches only b, the plan and the store). */
static void
fill_group(gbml_saga_slices *r, group_buffer *b, int64_t j)
{
	fill_ctx	f = {r, b};

	b->group = j;
	b->rc = 0;
	gbml_saga_plan_pieces(r->pl, j, fill_piece, &f);
}

static void *
fill_main(void *arg)
{
	gbml_saga_slices *r = arg;

	fill_group(r, &r->b[r->pending], r->b[r->pending].group);
	return NULL;
}

static void
join_fill(gbml_saga_slices *r)
{
	if (r->running)
	{
		pthread_join(r->thread, NULL);
		r->running = false;
	}
}

/*
 * Group `next` into the buffer not handed out last: the one read ahead, or
 * one read now; then starts reading the group after into the other buffer,
 * which the caller gave back by asking for this one.
 */
static int
take_group(gbml_saga_slices *r, const float **x)
{
	int			nb = r->cur == 0 ? 1 : 0;
	group_buffer *b = &r->b[nb];

	join_fill(r);
	if (r->pending != nb || b->group != r->next)
		fill_group(r, b, r->next);
	r->pending = -1;
	if (b->rc != 0)
	{
		char		what[64];

		snprintf(what, sizeof(what), "reading chunk %d", b->failed_chunk + 1);
		return gbml_dataset_store_error(r->ds, r->env, what);
	}
	r->cur = nb;
	*x = b->x;
	if (r->async && r->next + 1 < r->pl->n_groups)
	{
		r->pending = 1 - nb;
		r->b[r->pending].group = r->next + 1;
		r->running = gbml_thread_start(&r->thread, fill_main, r);
		if (!r->running)
			r->pending = -1;	/* read when asked for */
	}
	return GBML_OK;
}

void
gbml_saga_slices_start(gbml_saga_slices *r)
{
	join_fill(r);
	r->pending = -1;
	r->cur = -1;
	r->next = 0;
}

int
gbml_saga_slices_next(gbml_saga_slices *r, const float **x, int64_t *j)
{
	int			rc;

	if (r->next >= r->pl->n_groups)
		return 0;
	*j = r->next;
	*x = NULL;
	if (r->stored && (rc = take_group(r, x)) != GBML_OK)
		return rc;
	r->next++;
	return 1;
}

void
gbml_saga_slices_close(gbml_saga_slices *r)
{
	if (r == NULL)
		return;
	join_fill(r);
	for (int i = 0; i < 2; i++)
		gbml_free(r->env, r->b[i].x);
	gbml_free(r->env, r->addr);
	gbml_free(r->env, r);
}
