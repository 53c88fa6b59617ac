/*
 * saga_plan.h — the visiting order of one SAGA epoch, shared by the CPU
 * solver (saga.c) and the GPU one (saga_gpu.c).
 *
 * The rows in their canonical order (dataset.h: by content hash, so
 * already a random order) are cut into slices of slice_rows consecutive
 * positions, each epoch at a random offset (the first slice is
 * [0, offset), the others slice_rows long from there).  The slices are
 * shuffled, and consecutive slices of that order are gathered into groups
 * of at most group_rows rows; an epoch visits the groups in turn and the
 * rows of each group in a shuffled order.  A slice is the unit rows in
 * temporary files are read in (one read of ~100 KB, its rows contiguous in
 * the file; a slice may straddle two chunks), a group what is held at once
 * (saga_slices.h: two groups of at most 8 MB and 65,536 rows, the next
 * read ahead).
 *
 * The order depends only on the seed, the row count and the row width
 * (slice_rows and group_rows come from the width), never on the chunk
 * layout (chunks shrink with a small memory budget), on where the rows
 * live, nor on the thread count: a dataset in temporary files trains to
 * the model bytes of the same rows in memory.  Why groups, and not each
 * slice's rows on their own: saga_plan.c.
 */
#ifndef GBML_SAGA_PLAN_H
#define GBML_SAGA_PLAN_H

#include "dataset.h"
#include "rng.h"

typedef struct gbml_saga_plan
{
	int64_t		n_rows;
	int			slice_rows;
	int64_t		group_rows;
	int			n_chunks;
	int64_t    *row_start;		/* n_chunks + 1: the chunks' first canonical positions (lookups only) */
	/* this epoch */
	int64_t		offset;			/* the first cut (0: the slices start at 0) */
	int64_t		n_slices;
	uint64_t   *order;			/* the slices, in visiting order */
	int64_t		n_groups;
	int64_t    *group_start;	/* n_groups + 1: each group's first slice, as an index into order */
	int64_t    *group_pos;		/* n_groups + 1: each group's first position in the epoch */
	uint32_t   *perm;			/* per position: the row visited there, as an index into its group */
} gbml_saga_plan;

/* Sizes the plan for ds (row count and width); env's error set on failure (memory). */
int			gbml_saga_plan_init(gbml_saga_plan *pl, const gbml_dataset *ds, gbml_env *env);
void		gbml_saga_plan_free(gbml_saga_plan *pl, gbml_env *env);

/* Draws the next epoch from rng; the groups shuffle their rows on `threads` threads, with the same result on any. */
void		gbml_saga_plan_epoch(gbml_saga_plan *pl, gbml_rng *rng, int threads);

/* Slice k's canonical positions: [*first, *first + *rows). */
static inline void
gbml_saga_plan_slice(const gbml_saga_plan *pl, int64_t k, int64_t *first, int64_t *rows)
{
	int64_t		a = pl->offset > 0 ? (k == 0 ? 0 : pl->offset + (k - 1) * pl->slice_rows) : k * pl->slice_rows;
	int64_t		b = pl->offset > 0 && k == 0 ? pl->offset : a + pl->slice_rows;

	*first = a;
	*rows = (b < pl->n_rows ? b : pl->n_rows) - a;
}

/* The chunk holding canonical position g: gbml_run_of(pl->row_start, pl->n_chunks, g) (dataset.h). */

/*
 * Calls fn(ctx, c, r, i, n) for each piece of group j: rows [r, r + n) of
 * chunk c, which are the group's rows [i, i + n) (its slices in order, a
 * slice cut where it straddles two chunks).
 */
void		gbml_saga_plan_pieces(const gbml_saga_plan *pl, int64_t j,
								  void (*fn) (void *ctx, int c, int64_t r, int64_t i, int64_t n), void *ctx);

#endif
