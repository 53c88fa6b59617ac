/*
 * chunk_store_permute.c — the file store's reorder (permute, see
 * chunk_store_file.h): the kept rows in the order asked, in chunks of the
 * sizes asked, on disk.  Rows grouped by hash (put_hashed) are rewritten in
 * place, over their own places (a segment table then says where each
 * output position is), or, where they are not in runs, fetched window by
 * window into a new file while the old one is given back as its rows are
 * read for the last time; rows in arrival order go into a new file through
 * a scatter pass and, when the output is more than one window, an ordering
 * pass.  The store's state, its reads and writes are chunk_store_file.c's
 * (chunk_store_file_internal.h); like every call that changes the file,
 * permute runs on the main thread.
 */
#include "chunk_store_file_internal.h"

#include <string.h>

/* permute's window when env has no budget to take half of */
#define PERMUTE_MAX_WINDOW ((size_t) 1 << 30)
#define SLOT_DONE UINT32_MAX

/*
 * The reorder's give-back of rows read for the last time (permute_grouped).
 * The file is cut into DISCARD_UNIT_BYTES units, each counting the kept
 * rows whose bytes touch it; gbml_cfs_fetch_rows counts a window's rows
 * down in its sorted place order, so the units that reach zero come in
 * ascending order and adjacent ones are punched out (gbml_temp_discard) in
 * one call.  The old file's pages and blocks go back while the new file is
 * written: the reorder holds about one copy of the rows, not two (page
 * cache and disk).
 * No memory for the counts (4 bytes a unit): nothing is given back.
 */
#define DISCARD_UNIT_BYTES ((uint64_t) 64 << 10)

/* The unit (gbml_chunk_store_file_test_discard_unit changes it). */
static uint64_t discard_unit_bytes = DISCARD_UNIT_BYTES;

/* The units of a row at file place p: [*u0, *u1]. */
static inline void
discard_span(const file_store *f, int64_t p, int64_t *u0, int64_t *u1)
{
	uint64_t	b = (uint64_t) p * gbml_cfs_row_bytes(f);

	*u0 = (int64_t) (b / discard_unit_bytes);
	*u1 = (int64_t) ((b + gbml_cfs_row_bytes(f) - 1) / discard_unit_bytes);
}

/* Counts the units of the kept rows src[0..n) (d->n 0: no room, nothing will be given back). */
static void
discard_init(file_store *f, const int64_t *src, int64_t n, discard_units *d)
{
	size_t		want;

	memset(d, 0, sizeof(*d));
	d->n = (int64_t) ((f->end + discard_unit_bytes - 1) / discard_unit_bytes);
	want = (size_t) (d->n > 0 ? d->n : 1) * sizeof(int32_t);
	if (d->n <= 0 || d->n >= INT32_MAX || gbml_cfs_free_budget(f) <= want + want / 8 ||
		(d->left = gbml_alloc0(f->env, want)) == NULL)
	{
		d->n = 0;
		return;
	}
	for (int64_t k = 0; k < n; k++)
	{
		int64_t		u0,
					u1;

		discard_span(f, gbml_cfs_place_of(f, src[k]), &u0, &u1);
		for (int64_t u = u0; u <= u1; u++)
			d->left[u]++;
	}
}

/* Punches out the pending run of units at zero. */
void
gbml_cfs_discard_flush(file_store *f, discard_units *d)
{
	uint64_t	from = (uint64_t) d->run_from * discard_unit_bytes,
				to = (uint64_t) d->run_to * discard_unit_bytes;

	if (d->run_to <= d->run_from)
		return;
	if (to > f->end)
		to = f->end;
	if (gbml_temp_discard(&f->file, from, to - from))
	{
		d->any = true;
		f->bytes_discarded += to - from;
	}
	d->run_from = d->run_to = 0;
}

/* A row at place p was read for the last time (places in ascending order): its units counted down. */
void
gbml_cfs_discard_row(file_store *f, discard_units *d, int64_t p)
{
	int64_t		u0,
				u1;

	discard_span(f, p, &u0, &u1);
	for (int64_t u = u0; u <= u1; u++)
		if (--d->left[u] == 0)
		{
			if (u != d->run_to)
				gbml_cfs_discard_flush(f, d);
			if (d->run_to <= d->run_from)
				d->run_from = u;
			d->run_to = u + 1;
		}
}

/* ---- permute: the rows src[0..n) in that order, into a new file ---- */

/*
 * The output layout: chunk k holds rows [start[k], start[k + 1]); windows
 * are runs of whole output chunks of at most `budget` bytes (one chunk at
 * least), window w holding chunks [win[w], win[w + 1]).
 */
typedef struct permute_plan
{
	int64_t		n;
	int			n_out;
	int64_t    *start;			/* n_out + 1 */
	int			n_windows;
	int		   *win;			/* n_windows + 1 */
	int		   *window_of;		/* output chunk -> window */
	int64_t		window_rows;	/* rows of the largest window */
	int64_t		first_rows;
	int64_t		chunk_rows;
} permute_plan;

static int64_t
out_chunk_of(const permute_plan *p, int64_t pos)
{
	return pos < p->first_rows ? 0 : 1 + (pos - p->first_rows) / p->chunk_rows;
}

static int64_t
window_start(const permute_plan *p, int w)
{
	return p->start[p->win[w]];
}

static void
plan_free(gbml_env *env, permute_plan *p)
{
	gbml_free(env, p->start);
	gbml_free(env, p->win);
	gbml_free(env, p->window_of);
}

static int
plan_layout(file_store *f, permute_plan *p, int64_t n, int64_t first_rows, int64_t chunk_rows, size_t budget)
{
	size_t		rb = gbml_cfs_row_bytes(f);
	size_t		bytes = 0;

	memset(p, 0, sizeof(*p));
	p->n = n;
	p->first_rows = first_rows;
	p->chunk_rows = chunk_rows;
	p->n_out = n == 0 ? 0 : n <= first_rows ? 1 : (int) (1 + (n - first_rows + chunk_rows - 1) / chunk_rows);
	p->start = gbml_alloc_array(f->env, (size_t) p->n_out + 1, sizeof(int64_t));
	p->win = gbml_alloc_array(f->env, (size_t) p->n_out + 1, sizeof(int));
	p->window_of = gbml_alloc_array(f->env, (size_t) p->n_out + 1, sizeof(int));
	if (p->start == NULL || p->win == NULL || p->window_of == NULL)
		return gbml_cfs_store_fail_env(f);
	p->start[0] = 0;
	for (int k = 1; k <= p->n_out; k++)
	{
		int64_t		end = k == 1 ? first_rows : p->start[k - 1] + chunk_rows;

		p->start[k] = end < n ? end : n;
	}
	for (int k = 0; k < p->n_out; k++)
	{
		size_t		cb = (size_t) (p->start[k + 1] - p->start[k]) * rb;

		if (k == 0 || bytes + cb > budget)
		{
			p->win[p->n_windows++] = k;
			bytes = 0;
		}
		bytes += cb;
		p->window_of[k] = p->n_windows - 1;
	}
	p->win[p->n_windows] = p->n_out;
	for (int w = 0; w < p->n_windows; w++)
		if (window_start(p, w + 1) - window_start(p, w) > p->window_rows)
			p->window_rows = window_start(p, w + 1) - window_start(p, w);
	if (p->window_rows >= (int64_t) SLOT_DONE)
		return gbml_cfs_store_fail(f, GBML_EINVAL, "a reorder window of %lld rows is too large", (long long) p->window_rows);
	return 0;
}

/* Everything one permute holds. */
typedef struct permute_state
{
	file_store *f;
	const int64_t *src;
	permute_plan plan;
	int64_t    *by_chunk;		/* output positions grouped by source chunk, ascending in each */
	int64_t    *group;			/* source chunk c's positions: by_chunk[group[c] .. group[c + 1]) */
	float	   *chunk;			/* one source chunk */
	float	   *window;			/* the output rows of one window */
	float	   *stage;			/* several windows: a staging buffer per window */
	int64_t		stage_rows;
	int64_t    *staged;			/* per window: rows in its staging buffer */
	int64_t    *filled;			/* per window: rows that arrived (written or staged) */
	uint32_t   *slot;			/* several windows: arrival i of window w goes to slot[start + i] */
	bool	   *missing;		/* recomputed over the kept rows */
	gbml_temp_file out;
	int64_t		steps;			/* progress */
	int64_t		total_steps;
} permute_state;

static int
permute_progress(permute_state *st)
{
	gbml_progress_info info = {.phase = "spill reorder",.iteration = ++st->steps,.total = st->total_steps};

	if (gbml_progress(st->f->env, &info))
		return gbml_cfs_store_fail(st->f, GBML_ECANCELLED, "canceled while reordering rows");
	return 0;
}

/* Groups the output positions by source chunk (a counting sort: ascending positions in each group). */
static int
group_by_chunk(permute_state *st)
{
	file_store *f = st->f;
	int64_t		n = st->plan.n;
	int64_t    *fill;

	st->group = gbml_alloc0(f->env, sizeof(int64_t) * ((size_t) f->n_chunks + 1));
	st->by_chunk = gbml_alloc_array(f->env, (size_t) (n > 0 ? n : 1), sizeof(int64_t));
	fill = gbml_alloc0(f->env, sizeof(int64_t) * ((size_t) f->n_chunks + 1));
	if (st->group == NULL || st->by_chunk == NULL || fill == NULL)
	{
		gbml_free(f->env, fill);
		return gbml_cfs_store_fail_env(f);
	}
	for (int64_t p = 0; p < n; p++)
		st->group[(st->src[p] >> 32) + 1]++;
	for (int c = 0; c < f->n_chunks; c++)
		st->group[c + 1] += st->group[c];
	for (int64_t p = 0; p < n; p++)
	{
		int64_t		c = st->src[p] >> 32;

		st->by_chunk[st->group[c] + fill[c]++] = p;
	}
	gbml_free(f->env, fill);
	return 0;
}

/* Writes window w's staged rows after the rows of w already written. */
static int
flush_stage(permute_state *st, int w)
{
	size_t		rb = gbml_cfs_row_bytes(st->f);
	int64_t		at = window_start(&st->plan, w) + st->filled[w] - st->staged[w];
	int			rc;

	if (st->staged[w] == 0)
		return 0;
	rc = gbml_cfs_write_at(st->f, &st->out, (char *) st->stage + (size_t) w * (size_t) st->stage_rows * rb,
				  (size_t) st->staged[w] * rb, (uint64_t) at * rb, "reordered rows");
	st->staged[w] = 0;
	return rc;
}

/*
 * Output position p takes the source row x.  One window: straight to its
 * place.  Several: to its window's staging buffer, in arrival order, with
 * its place in the window noted for the second pass.
 */
static int
place_row(permute_state *st, int64_t p, const float *x)
{
	size_t		rb = gbml_cfs_row_bytes(st->f);
	int			w;
	int64_t		w0;

	if (st->plan.n_windows == 1)
	{
		memcpy((char *) st->window + (size_t) p * rb, x, rb);
		return 0;
	}
	w = st->plan.window_of[out_chunk_of(&st->plan, p)];
	w0 = window_start(&st->plan, w);
	st->slot[w0 + st->filled[w]] = (uint32_t) (p - w0);
	memcpy((char *) st->stage + ((size_t) w * (size_t) st->stage_rows + (size_t) st->staged[w]) * rb, x, rb);
	st->filled[w]++;
	if (++st->staged[w] == st->stage_rows)
		return flush_stage(st, w);
	return 0;
}

/* Pass 1: every source chunk that gives a row is read once, in file order. */
static int
scatter_pass(permute_state *st)
{
	file_store *f = st->f;
	int			d = f->n_features;

	for (int c = 0; c < f->n_chunks; c++)
	{
		if (st->group[c] == st->group[c + 1])
			continue;
		if (permute_progress(st) != 0 || gbml_cfs_read_chunk(&f->base, c, st->chunk) != 0)
			return 1;
		for (int64_t k = st->group[c]; k < st->group[c + 1]; k++)
		{
			int64_t		p = st->by_chunk[k];
			const float *x = st->chunk + (size_t) (st->src[p] & 0xffffffffLL) * (size_t) d;

			gbml_missing_flags(st->missing, x, 1, d);
			if (place_row(st, p, x) != 0)
				return 1;
		}
	}
	for (int w = 0; st->plan.n_windows > 1 && w < st->plan.n_windows; w++)
		if (flush_stage(st, w) != 0)
			return 1;
	return 0;
}

/*
 * Moves row i of rows[0..m) to slot[i], following the permutation's cycles
 * (each row moves once, through one spare row); slot[] is used up.
 */
static void
apply_slots(float *rows, uint32_t *slot, int64_t m, size_t d, float *carry, float *spare)
{
	size_t		rb = d * sizeof(float);

	for (int64_t i = 0; i < m; i++)
	{
		int64_t		cur = i;

		if (slot[i] == SLOT_DONE)
			continue;
		memcpy(carry, rows + (size_t) i * d, rb);
		for (;;)
		{
			int64_t		t = slot[cur];
			float	   *swap;

			slot[cur] = SLOT_DONE;
			if (t == i)
				break;
			memcpy(spare, rows + (size_t) t * d, rb);
			memcpy(rows + (size_t) t * d, carry, rb);
			swap = carry;
			carry = spare;
			spare = swap;
			cur = t;
		}
		memcpy(rows + (size_t) i * d, carry, rb);
	}
}

/*
 * Pass 2 (several windows): each window's region is read, its rows moved to
 * their places in memory, and written back in place.  The staging buffers
 * are gone by now: the window takes their share of the budget.
 */
static int
order_pass(permute_state *st)
{
	file_store *f = st->f;
	size_t		rb = gbml_cfs_row_bytes(f);
	float	   *carry = st->chunk,
			   *spare = st->chunk + f->n_features;	/* the source chunk's room is free now */

	gbml_free(f->env, st->stage);
	st->stage = NULL;
	if ((st->window = gbml_alloc_array(f->env, (size_t) st->plan.window_rows, rb)) == NULL)
		return gbml_cfs_store_fail_env(f);
	for (int w = 0; w < st->plan.n_windows; w++)
	{
		int64_t		w0 = window_start(&st->plan, w),
					m = window_start(&st->plan, w + 1) - w0;
		int			e;

		if (permute_progress(st) != 0)
			return 1;
		if ((e = gbml_temp_read(&st->out, st->window, (size_t) m * rb, (uint64_t) w0 * rb)) != 0)
			return gbml_cfs_store_fail(f, GBML_EIO, "could not read reordered rows back from a temporary file: %s", strerror(e));
		__atomic_fetch_add(&f->bytes_read, (uint64_t) m * rb, __ATOMIC_RELAXED);
		apply_slots(st->window, st->slot + w0, m, (size_t) f->n_features, carry, spare);
		if (gbml_cfs_write_at(f, &st->out, st->window, (size_t) m * rb, (uint64_t) w0 * rb, "reordered rows") != 0)
			return 1;
	}
	return 0;
}

static int64_t
largest_chunk_rows(const file_store *f)
{
	int64_t		m = 2;			/* order_pass borrows two rows of it */

	for (int c = 0; c < f->n_chunks; c++)
		if (f->chunks[c].n_rows > m)
			m = f->chunks[c].n_rows;
	return m;
}

/* The window budget: the caller's, or half of what env's budget has free. */
static size_t
window_budget(const file_store *f)
{
	size_t		window = PERMUTE_MAX_WINDOW;

	if (f->permute_budget > 0 && f->permute_budget < window)
		window = f->permute_budget;
	if (gbml_cfs_free_budget(f) / 2 < window)
		window = gbml_cfs_free_budget(f) / 2;
	return window;
}

/*
 * The buffers of pass 1: one window holds the whole output; several share
 * the budget as a staging buffer each (order_pass allocates its window).
 */
static int
permute_buffers(permute_state *st, size_t budget)
{
	file_store *f = st->f;
	gbml_env   *env = f->env;
	size_t		rb = gbml_cfs_row_bytes(f);
	int			k = st->plan.n_windows;

	if ((st->missing = gbml_alloc0(env, (size_t) f->n_features * sizeof(bool) + 1)) == NULL)
		return gbml_cfs_store_fail_env(f);
	if (k <= 1)
	{
		st->window = gbml_alloc_array(env, (size_t) (st->plan.n > 0 ? st->plan.n : 1), rb);
		return st->window == NULL ? gbml_cfs_store_fail_env(f) : 0;
	}
	st->stage_rows = (int64_t) (budget / ((size_t) k * rb));
	if (st->stage_rows < 1)
		st->stage_rows = 1;
	st->stage = gbml_alloc_array(env, (size_t) k * (size_t) st->stage_rows, rb);
	st->staged = gbml_alloc0(env, sizeof(int64_t) * (size_t) k);
	st->filled = gbml_alloc0(env, sizeof(int64_t) * (size_t) k);
	st->slot = gbml_alloc_array(env, (size_t) st->plan.n, sizeof(uint32_t));
	if (st->stage == NULL || st->staged == NULL || st->filled == NULL || st->slot == NULL)
		return gbml_cfs_store_fail_env(f);
	return 0;
}

static void
permute_state_free(permute_state *st)
{
	gbml_env   *env = st->f->env;

	plan_free(env, &st->plan);
	gbml_free(env, st->by_chunk);
	gbml_free(env, st->group);
	gbml_free(env, st->chunk);
	gbml_free(env, st->window);
	gbml_free(env, st->stage);
	gbml_free(env, st->staged);
	gbml_free(env, st->filled);
	gbml_free(env, st->slot);
	gbml_free(env, st->missing);
	gbml_temp_close(env, &st->out);
}

/* The output chunks of st's plan, at their offsets in a file of the rows back to back; NULL: failed. */
static file_chunk *
output_chunks(permute_state *st)
{
	file_store *f = st->f;
	size_t		rb = gbml_cfs_row_bytes(f);
	file_chunk *table = gbml_alloc_array(f->env, (size_t) (st->plan.n_out > 0 ? st->plan.n_out : 1), sizeof(file_chunk));

	if (table == NULL)
	{
		gbml_cfs_store_fail_env(f);
		return NULL;
	}
	for (int k = 0; k < st->plan.n_out; k++)
	{
		table[k].offset = (uint64_t) st->plan.start[k] * rb;
		table[k].n_rows = st->plan.start[k + 1] - st->plan.start[k];
		table[k].first_row = st->plan.start[k];
	}
	return table;
}

/*
 * A reorder's end, either way: the rows are in output order now, so no
 * places nor runs, any thread may read, the output's chunk table and its
 * missing-value flags are the store's (the old flags go with the state).
 */
static void
install_output(permute_state *st, file_chunk *table)
{
	file_store *f = st->f;
	bool	   *missing = f->missing;

	gbml_free(f->env, f->place);
	f->place = NULL;
	f->place_cap = 0;
	gbml_cfs_free_runs(f);
	f->base.read_any_thread = true;
	gbml_free(f->env, f->chunks);
	f->chunks = table;
	f->cap_chunks = st->plan.n_out > 0 ? st->plan.n_out : 1;
	f->n_chunks = st->plan.n_out;
	f->missing = st->missing;
	st->missing = missing;
}

/* The new file and chunk table replace the old ones. */
static int
permute_commit(permute_state *st)
{
	file_store *f = st->f;
	gbml_temp_file old = f->file;
	file_chunk *table = output_chunks(st);

	if (table == NULL)
		return 1;
	/* the rows are in chunk order in the new file: no segments either */
	gbml_cfs_free_segments(f);
	install_output(st, table);
	f->end = (uint64_t) st->plan.n * gbml_cfs_row_bytes(f);
	f->file = st->out;
	st->out = old;				/* closed (deleted) with the state */
	return 0;
}

/*
 * permute of rows grouped by hash, in place: no second file.  The output is
 * cut into windows (of the budget permute_grouped's would have) whose edges
 * fall where the rows' hash group changes, as far as the budget allows.
 * Each window's rows are fetched, then written back in output order over
 * the file rows they came from, taken in ascending file order: a window
 * owns its rows' places, so nothing still to be read is overwritten, and
 * the rows of the canonical order, which sorts by hash, land in the runs of
 * their group, a few long segments.  A write over pages already in the page
 * cache costs a fraction of one into new pages (issue 12:
 * tests/bench/rewrite_pages.c, and in place about 0.5 s a GB against
 * 0.6-4 s into a second file on this kind of machine), and the disk holds
 * one copy of the rows, not two.
 *
 * Returns 0 (done), 1 (failed: the store's error; if a window was written
 * the old rows are not whole any more and the store reads as damaged), or
 * -1 (nothing written: an address repeats, or the windows' rows are not in
 * runs, so the segments would average under IN_PLACE_MIN_SEGMENT_ROWS rows;
 * the caller reorders into a new file).
 */
#define IN_PLACE_MIN_SEGMENT_ROWS 16

/*
 * Each file row's hash group (-1: a plain put's run), a byte a row, from the
 * runs: a lookup a row where a search of the runs took most of the time of
 * planning an in-place reorder.  NULL with the store's error set (memory).
 */
static int8_t *
groups_by_place(file_store *f, int64_t rows)
{
	int8_t	   *g = gbml_alloc_array(f->env, (size_t) (rows > 0 ? rows : 1), sizeof(int8_t));

	if (g == NULL)
	{
		gbml_cfs_store_fail_env(f);
		return NULL;
	}
	memset(g, -1, (size_t) rows);
	/* runs are appended in file order, each up to the next one's start */
	for (int64_t k = 0; k < f->n_runs; k++)
	{
		int64_t		end = k + 1 < f->n_runs ? f->run_at[k + 1] : rows;

		memset(g + f->run_at[k], f->run_group[k], (size_t) (end - f->run_at[k]));
	}
	return g;
}

/*
 * The window starts (positions), cut at group changes where the budget
 * allows: *n_win windows, win[*n_win] = n; -1 when a row is kept twice.
 */
static int
in_place_windows(file_store *f, const int64_t *src, int64_t n, int64_t cap_rows, int64_t **win_out, int64_t *n_win)
{
	int64_t		rows = (int64_t) (f->end / gbml_cfs_row_bytes(f));
	uint64_t   *seen = gbml_alloc0(f->env, sizeof(uint64_t) * (size_t) (rows / 64 + 1));
	int64_t    *win = gbml_alloc_array(f->env, (size_t) (n / cap_rows + 2) * 2, sizeof(int64_t));
	int8_t	   *group = seen != NULL && win != NULL ? groups_by_place(f, rows) : NULL;
	int64_t		w0 = 0,
				cut_at = -1;	/* the last group change after w0 */
	int			prev = -2,
				rc = 0;

	*n_win = 0;
	if (group == NULL)
		rc = seen != NULL && win != NULL ? 1 : gbml_cfs_store_fail_env(f);
	else
		win[0] = 0;
	for (int64_t p = 0; rc == 0 && p < n; p++)
	{
		int64_t		at;
		int			g;

		if ((p & ((1 << 16) - 1)) == 0 && p > 0)
		{
			/* tens of ns a row: a cancel is seen within a second whatever the table's size */
			gbml_progress_info info = {.phase = "spill reorder plan",.iteration = p,.total = n};

			if (gbml_progress(f->env, &info))
				rc = gbml_cfs_store_fail(f, GBML_ECANCELLED, "canceled while reordering rows");
		}
		at = gbml_cfs_place_of(f, src[p]);
		g = group[at];
		if (rc == 0 && (seen[at / 64] & ((uint64_t) 1 << (at % 64))))
			rc = -1;			/* a row kept twice: its place cannot take two rows */
		seen[at / 64] |= (uint64_t) 1 << (at % 64);
		if (p > 0 && g != prev)
			cut_at = p;
		prev = g;
		if (p - w0 == cap_rows)
		{
			/*
			 * [w0, p) is full: end it at the last group change if that keeps
			 * at least half of it (so there are at most 2 n / cap_rows + 1
			 * windows), else here
			 */
			w0 = cut_at > w0 + cap_rows / 2 ? cut_at : p;
			win[++*n_win] = w0;
			cut_at = -1;
		}
	}
	gbml_free(f->env, seen);
	gbml_free(f->env, group);
	if (rc != 0)
	{
		gbml_free(f->env, win);
		return rc;
	}
	win[++*n_win] = n;
	*win_out = win;
	return 0;
}

/* The segments of the windows' places, ascending in each window; -1 when they would be too short. */
static int
in_place_segments(file_store *f, const int64_t *src, int64_t n, const int64_t *win, int64_t n_win, int64_t cap_rows)
{
	place_slot *o = gbml_alloc_array(f->env, (size_t) cap_rows, sizeof(place_slot));
	size_t		want = (size_t) cap_rows * sizeof(place_slot) + (RADIX_BUCKETS + 1) * sizeof(int64_t);
	void	   *room = cap_rows >= RADIX_BUCKETS ? gbml_alloc(f->env, want) : NULL;
	int			rc = 0;

	if (o == NULL)
		rc = gbml_cfs_store_fail_env(f);
	for (int64_t w = 0; rc == 0 && w < n_win; w++)
	{
		int64_t		w0 = win[w],
					m = win[w + 1] - w0;

		for (int64_t i = 0; i < m; i++)
			o[i] = (place_slot) {gbml_cfs_place_of(f, src[w0 + i]), i};
		gbml_cfs_sort_places(o, room, m);
		for (int64_t i = 0; rc == 0 && i < m; i++)
			rc = gbml_cfs_push_segment(f, w0 + i, o[i].place, 1);
		if (rc == 0 && f->n_segs * IN_PLACE_MIN_SEGMENT_ROWS > n)
			rc = -1;
	}
	gbml_free(f->env, o);
	gbml_free(f->env, room);
	if (rc != 0)
		gbml_cfs_free_segments(f);
	return rc;
}

/*
 * Window by window: the rows fetched, then written over their own places
 * through the segments.  From the first write on, the places no longer
 * describe the file: a failure leaves the store damaged.
 */
static int
in_place_write(permute_state *st, const int64_t *win, int64_t n_win)
{
	file_store *f = st->f;
	size_t		rb = gbml_cfs_row_bytes(f);
	bool		wrote = false;
	int			rc = 0;

	for (int64_t w = 0; rc == 0 && w < n_win; w++)
	{
		int64_t		w0 = win[w],
					w1 = win[w + 1];

		rc = permute_progress(st);
		if (rc == 0)
			rc = gbml_cfs_fetch_rows(f, st->src + w0, w1 - w0, st->window, NULL);
		if (rc == 0)
			gbml_missing_flags(st->missing, st->window, w1 - w0, f->n_features);
		/* the segments overlapping [w0, w1): one may run on from the window before or into the next */
		for (int64_t k = gbml_cfs_segment_of(f, w0); rc == 0 && k < f->n_segs && f->seg_pos[k] < w1; k++)
		{
			int64_t		a = f->seg_pos[k] > w0 ? f->seg_pos[k] : w0,
						b = f->seg_pos[k + 1] < w1 ? f->seg_pos[k + 1] : w1;

			wrote = true;
			rc = gbml_cfs_write_at(f, &f->file, (char *) st->window + (size_t) (a - w0) * rb, (size_t) (b - a) * rb,
						  (uint64_t) (f->seg_at[k] + (a - f->seg_pos[k])) * rb, "rows reordered in place");
		}
	}
	if (rc != 0 && wrote)
		f->damaged = "a reorder rewriting some of its rows in place";
	return rc;
}


/* The rows are where the segments say: the output chunks' table, no places nor runs, any thread may read. */
static int
in_place_commit(permute_state *st, int64_t first_rows, int64_t chunk_rows)
{
	file_store *f = st->f;
	file_chunk *table;

	/* a budget of 0: a window per output chunk, so no window is too large to plan */
	if (plan_layout(f, &st->plan, st->plan.n, first_rows, chunk_rows, 0) != 0 || (table = output_chunks(st)) == NULL)
		return 1;
	install_output(st, table);	/* the segments just made stay: they say where the positions are */
	f->reorders_in_place++;
	return 0;
}

static int
permute_in_place(permute_state *st, int64_t first_rows, int64_t chunk_rows)
{
	file_store *f = st->f;
	size_t		rb = gbml_cfs_row_bytes(f),
				budget = window_budget(f);
	int64_t		n = st->plan.n,
				cap_rows,
				n_win = 0;
	int64_t    *win = NULL;
	int			rc;

	if (f->n_runs == 0 || n == 0)
		return -1;
	/* permute_grouped's window: the rows, and fetch's places and their sort */
	budget = budget > gbml_cfs_fetch_span_bytes(f) ? budget - gbml_cfs_fetch_span_bytes(f) : 0;
	cap_rows = (int64_t) (budget / (rb + 2 * sizeof(place_slot)));
	cap_rows = cap_rows < 1 ? 1 : cap_rows > n ? n : cap_rows;	/* no window larger than the rows */
	rc = in_place_windows(f, st->src, n, cap_rows, &win, &n_win);
	if (rc == 0)
		rc = in_place_segments(f, st->src, n, win, n_win, cap_rows);
	if (rc == 0)
	{
		st->window = gbml_alloc_array(f->env, (size_t) cap_rows, rb);
		st->missing = gbml_alloc0(f->env, (size_t) f->n_features * sizeof(bool) + 1);
		if (st->window == NULL || st->missing == NULL)
			rc = gbml_cfs_store_fail_env(f);
	}
	st->total_steps = n_win;
	if (rc == 0)
		rc = in_place_write(st, win, n_win);
	if (rc == 0 && (rc = in_place_commit(st, first_rows, chunk_rows)) != 0)
		f->damaged = "a reorder rewriting some of its rows in place";	/* written, but the table not replaced */
	if (rc != 0)
		gbml_cfs_free_segments(f);
	gbml_free(f->env, win);
	return rc;
}

/*
 * permute of rows grouped by hash (put_hashed): window by window, the
 * window's rows are fetched straight into place (their places sorted,
 * nearby rows read in one span: a window of the canonical order lies in a
 * few groups' runs) and the window is written once.  The window shares the
 * budget with fetch's 32 bytes a row (places and their sort) and its span.
 */
static int
permute_grouped(permute_state *st, int64_t first_rows, int64_t chunk_rows)
{
	file_store *f = st->f;
	size_t		rb = gbml_cfs_row_bytes(f),
				budget = window_budget(f);
	int64_t		n = st->plan.n;
	int			rc;
	discard_units gone = {0};

	budget = budget > gbml_cfs_fetch_span_bytes(f) ? budget - gbml_cfs_fetch_span_bytes(f) : 0;
	budget = budget / (rb + 2 * sizeof(place_slot)) * rb;	/* fetch's places, and its sort's room */
	if ((rc = plan_layout(f, &st->plan, n, first_rows, chunk_rows, budget)) != 0)
		return rc;
	st->total_steps = st->plan.n_windows;
	st->window = gbml_alloc_array(f->env, (size_t) (st->plan.window_rows > 0 ? st->plan.window_rows : 1), rb);
	st->missing = gbml_alloc0(f->env, (size_t) f->n_features * sizeof(bool) + 1);
	if (st->window == NULL || st->missing == NULL)
		rc = gbml_cfs_store_fail_env(f);
	if (rc == 0 && gbml_temp_create(f->env, &st->out) != GBML_OK)
		rc = gbml_cfs_store_fail_env(f);
	if (rc == 0)
		discard_init(f, st->src, n, &gone);
	for (int w = 0; rc == 0 && w < st->plan.n_windows; w++)
	{
		int64_t		w0 = window_start(&st->plan, w),
					m = window_start(&st->plan, w + 1) - w0;

		rc = permute_progress(st);
		if (rc == 0)
			rc = gbml_cfs_fetch_rows(f, st->src + w0, m, st->window, &gone);
		if (rc == 0)
		{
			gbml_missing_flags(st->missing, st->window, m, f->n_features);
			rc = gbml_cfs_write_at(f, &st->out, st->window, (size_t) m * rb, (uint64_t) w0 * rb, "reordered rows");
		}
	}
	if (rc == 0)
		rc = permute_commit(st);
	/* the old file, given back in part, cannot stand in for the rows any more */
	if (rc != 0 && gone.any)
		f->damaged = "a reorder giving back some of its rows";
	gbml_free(f->env, gone.left);
	return rc;
}

/*
 * Keeps the rows src[0..n) in that order, in chunks of first_rows, then
 * chunk_rows rows, in a new temporary file (the old one is deleted when the
 * new one is complete; on failure the store is as it was).
 *
 * The output is cut into windows of whole output chunks that fit the
 * budget.  If one window holds it all: each source chunk that gives a row
 * is read once and its rows copied to their places in memory, then written
 * once (read the file, write the output).  Otherwise, two passes: pass 1
 * reads each source chunk once and appends each row to its window's
 * staging buffer (budget / windows bytes each), writing full buffers to
 * that window's region of the new file, in arrival order; pass 2 reads
 * each window's region (budget bytes), moves the rows to their places in
 * memory, and writes the region back.  Either way the I/O does not grow
 * with the number of windows: at most one read of the source, two writes
 * and one read of the output, all in large sequential pieces, where
 * windowed passes over the source would read it once per window.
 * Memory: the budget, one source chunk, 12 bytes per kept row (positions
 * grouped by source chunk, and the slots) and a few bytes per chunk.
 */
int
gbml_cfs_permute(gbml_chunk_store *s, const int64_t *src, int64_t n, int64_t first_rows, int64_t chunk_rows)
{
	file_store *f = (file_store *) s;
	permute_state st;
	int			rc;

	memset(&st, 0, sizeof(st));
	st.f = f;
	st.src = src;
	st.out.fd = -1;
	if (first_rows < 1 || chunk_rows < 1 || n < 0)
		return gbml_cfs_store_fail(f, GBML_EINVAL, "bad chunk sizes for reordering rows");
	if (gbml_cfs_check_addresses(f, src, n) != 0 || gbml_cfs_settle(f) != 0)
		return 1;
	st.plan.n = n;
	if (f->place != NULL)
	{
		rc = permute_in_place(&st, first_rows, chunk_rows);
		if (rc < 0)
		{
			permute_state_free(&st);
			memset(&st, 0, sizeof(st));
			st.f = f;
			st.src = src;
			st.out.fd = -1;
			st.plan.n = n;
			rc = permute_grouped(&st, first_rows, chunk_rows);
		}
		permute_state_free(&st);
		return rc;
	}
	rc = group_by_chunk(&st);
	if (rc == 0 && (st.chunk = gbml_alloc_array(f->env, (size_t) largest_chunk_rows(f), gbml_cfs_row_bytes(f) ? gbml_cfs_row_bytes(f) : 1)) == NULL)
		rc = gbml_cfs_store_fail_env(f);
	if (rc == 0)
	{
		/* the windows' share leaves room for permute_buffers' slot of every row */
		size_t		budget = window_budget(f),
					slots = (size_t) n * sizeof(uint32_t);

		budget = budget > 2 * slots ? budget - slots : budget / 2;
		rc = plan_layout(f, &st.plan, n, first_rows, chunk_rows, budget);
		if (rc == 0)
			rc = permute_buffers(&st, budget);
	}
	st.total_steps = (int64_t) f->n_chunks + (st.plan.n_windows > 1 ? st.plan.n_windows : 0);
	if (rc == 0 && gbml_temp_create(f->env, &st.out) != GBML_OK)
		rc = gbml_cfs_store_fail_env(f);
	if (rc == 0)
		rc = scatter_pass(&st);
	if (rc == 0 && st.plan.n_windows == 1)
		rc = gbml_cfs_write_at(f, &st.out, st.window, (size_t) n * gbml_cfs_row_bytes(f), 0, "reordered rows");
	if (rc == 0 && st.plan.n_windows > 1)
		rc = order_pass(&st);
	if (rc == 0)
		rc = permute_commit(&st);
	permute_state_free(&st);
	return rc;
}

size_t
gbml_chunk_store_file_test_discard_unit(size_t bytes)
{
	size_t		was = (size_t) discard_unit_bytes;

	discard_unit_bytes = bytes > 0 ? (uint64_t) bytes : DISCARD_UNIT_BYTES;
	return was;
}
