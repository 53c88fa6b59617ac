/*
 * saga_plan.c — see saga_plan.h.
 *
 * Why groups.  Slices of consecutive rows read well from a file, but rows
 * visited together are updated together, so their stored gradients are
 * stale together and the average gradient's correction cancels less.
 * Measured (CPU solver, epochs to a relative suboptimality against a
 * Newton optimum, or to tol; two to four seeds):
 *
 *                                  elastic net,     a9a, to         a9a x 8, 64
 *                                  2,500 rows,      1e-4/1e-6/1e-8  chunks, to
 *                                  to tol 1e-13                     1e-4/1e-6/1e-8
 *   before: slices of 256 of each
 *     chunk's reshuffled rows      27               7-8/100/190     7-10/70-80/150
 *   each slice's rows on their
 *     own, slices shuffled         88-96 (slices    30/100/190
 *                                  of 64: 43-46,    (cut moved each
 *                                  of 16: 30)       epoch: 11-12/90/190)
 *   groups (this plan)             27-28            6-7/90/190      5-6/50/150
 *   whole chunks one after the
 *     other (the seed's loop)                       stalls at 1e-6  stalls at 1e-4,
 *                                                   .. 3e-5         drifts to 1e-3
 *
 * A table that fits one group (8 MB of features, 65,536 rows) is shuffled
 * whole.
 */
#include "saga_plan.h"

#include <string.h>

#define SLICE_BYTES ((size_t) 1 << 20)	/* a slice: 256 rows, fewer when that is more feature bytes */
#define SLICE_MAX_ROWS 256
#define GROUP_BYTES ((size_t) 8 << 20)	/* a group: rows of about this many feature bytes, */
#define GROUP_MAX_ROWS 65536	/* and at most this many (narrow rows: their gathered state stays small) */
#define PARALLEL_MIN_ROWS 65536	/* below this the groups shuffle on one thread */

int
gbml_saga_plan_init(gbml_saga_plan *pl, const gbml_dataset *ds, gbml_env *env)
{
	size_t		row_bytes = (size_t) (ds->n_features > 0 ? ds->n_features : 1) * sizeof(float);
	size_t		max_slices;

	memset(pl, 0, sizeof(*pl));
	pl->n_rows = ds->n_rows;
	pl->n_chunks = ds->n_chunks;
	pl->slice_rows = SLICE_BYTES / row_bytes >= SLICE_MAX_ROWS ? SLICE_MAX_ROWS
		: SLICE_BYTES / row_bytes > 0 ? (int) (SLICE_BYTES / row_bytes) : 1;
	pl->group_rows = (int64_t) (GROUP_BYTES / row_bytes) > pl->slice_rows ? (int64_t) (GROUP_BYTES / row_bytes)
		: pl->slice_rows;
	if (pl->group_rows > GROUP_MAX_ROWS)
		pl->group_rows = GROUP_MAX_ROWS > pl->slice_rows ? GROUP_MAX_ROWS : pl->slice_rows;
	/* no group holds more than the table (a small table: small buffers, the same plan) */
	if (pl->group_rows > ds->n_rows)
		pl->group_rows = ds->n_rows > 0 ? ds->n_rows : 1;
	max_slices = (size_t) (ds->n_rows / pl->slice_rows) + 2;
	if ((pl->row_start = gbml_alloc_array(env, (size_t) ds->n_chunks + 1, sizeof(int64_t))) == NULL ||
		(pl->order = gbml_alloc_array(env, max_slices, sizeof(uint64_t))) == NULL ||
		(pl->group_start = gbml_alloc_array(env, max_slices + 1, sizeof(int64_t))) == NULL ||
		(pl->group_pos = gbml_alloc_array(env, max_slices + 1, sizeof(int64_t))) == NULL ||
		(pl->perm = gbml_alloc_array(env, (size_t) (ds->n_rows > 0 ? ds->n_rows : 1), sizeof(uint32_t))) == NULL)
		return env->error_code;
	pl->row_start[0] = 0;
	for (int c = 0; c < ds->n_chunks; c++)
		pl->row_start[c + 1] = pl->row_start[c] + ds->chunks[c]->n_rows;
	return GBML_OK;
}

void
gbml_saga_plan_free(gbml_saga_plan *pl, gbml_env *env)
{
	gbml_free(env, pl->row_start);
	gbml_free(env, pl->order);
	gbml_free(env, pl->group_start);
	gbml_free(env, pl->group_pos);
	gbml_free(env, pl->perm);
	memset(pl, 0, sizeof(*pl));
}

void
gbml_saga_plan_pieces(const gbml_saga_plan *pl, int64_t j,
					  void (*fn) (void *ctx, int c, int64_t r, int64_t i, int64_t n), void *ctx)
{
	int64_t		i = 0;

	for (int64_t s = pl->group_start[j]; s < pl->group_start[j + 1]; s++)
	{
		int64_t		g,
					rows,
					end;

		gbml_saga_plan_slice(pl, (int64_t) pl->order[s], &g, &rows);
		for (end = g + rows; g < end;)
		{
			int			c = gbml_run_of(pl->row_start, pl->n_chunks, g);
			int64_t		e = pl->row_start[c + 1] < end ? pl->row_start[c + 1] : end;

			fn(ctx, c, g - pl->row_start[c], i, e - g);
			i += e - g;
			g = e;
		}
	}
}

/* The epoch's slices in visiting order, cut into groups of at most group_rows rows (one slice at least). */
static void
form_groups(gbml_saga_plan *pl)
{
	int64_t		rows_in = 0;

	pl->n_groups = 0;
	pl->group_pos[0] = 0;
	for (int64_t s = 0; s < pl->n_slices; s++)
	{
		int64_t		first,
					rows;

		gbml_saga_plan_slice(pl, (int64_t) pl->order[s], &first, &rows);
		if (s == 0 || rows_in + rows > pl->group_rows)
		{
			if (s > 0)
				pl->group_pos[pl->n_groups] = pl->group_pos[pl->n_groups - 1] + rows_in;
			pl->group_start[pl->n_groups++] = s;
			rows_in = 0;
		}
		rows_in += rows;
	}
	pl->group_start[pl->n_groups] = pl->n_slices;
	pl->group_pos[pl->n_groups] = pl->n_rows;
}

/* Fisher-Yates over a group's row indices 0 .. n - 1, as rng.h's shuffles. */
static void
shuffle_group(gbml_rng *r, uint32_t *a, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		a[i] = (uint32_t) i;
	gbml_rng_shuffle_u32(r, a, (uint64_t) n);
}

void
gbml_saga_plan_epoch(gbml_saga_plan *pl, gbml_rng *rng, int threads)
{
	uint64_t	seed = gbml_rng_next(rng);
	int64_t		n = pl->n_rows,
				s = pl->slice_rows;

	pl->offset = n > s ? (int64_t) gbml_rng_below(rng, (uint64_t) s) : 0;
	pl->n_slices = pl->offset > 0 ? 1 + (n - pl->offset + s - 1) / s : (n + s - 1) / s;
	for (int64_t k = 0; k < pl->n_slices; k++)
		pl->order[k] = (uint64_t) k;
	gbml_rng_shuffle_u64(rng, pl->order, (uint64_t) pl->n_slices);
	form_groups(pl);
	/* each group's rows with its own stream of the epoch's seed: on the threads, the same on any */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1 && n >= PARALLEL_MIN_ROWS)
	for (int64_t j = 0; j < pl->n_groups; j++)
	{
		gbml_rng	r;

		gbml_rng_stream(&r, seed, (uint64_t) j);
		shuffle_group(&r, pl->perm + pl->group_pos[j], pl->group_pos[j + 1] - pl->group_pos[j]);
	}
}
