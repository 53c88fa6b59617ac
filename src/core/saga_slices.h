/*
 * saga_slices.h — an epoch's rows, a group of slices at a time
 * (saga_plan.h), wherever the rows live: the reader of SAGA's epochs (the
 * statistics and objective passes read whole chunks in order through
 * chunk_prefetch.h instead).
 *
 * When every chunk is in host memory nothing is read: a group's rows stay
 * in their chunks.  When some chunk lives in a store, each group is read
 * into one of two buffers, its rows in group order, one read per slice
 * (per piece of a slice that straddles two chunks); when the store reads
 * from any thread (the file store: read_rows), the next group is read on a
 * helper thread (pthread, signals blocked, no call into env or PostgreSQL)
 * while the caller works on this one.
 *
 *     gbml_saga_slices *r = gbml_saga_slices_open(ds, env, plan);
 *     each epoch: gbml_saga_plan_epoch(plan, ...); gbml_saga_slices_start(r);
 *         while ((rc = gbml_saga_slices_next(r, &x, &j)) > 0)
 *             ... group j: row i at x + i * n_features (x NULL: in its chunk) ...
 *     gbml_saga_slices_close(r);
 *
 * Close it before returning to the caller of the engine, on every path
 * (the helper writes into buffers the dataset's memory context frees).
 * Main thread only.
 */
#ifndef GBML_SAGA_SLICES_H
#define GBML_SAGA_SLICES_H

#include "saga_plan.h"

typedef struct gbml_saga_slices gbml_saga_slices;

/* The bytes a reader's group buffers take: two groups when some chunk is in a store, else none. */
size_t		gbml_saga_slices_buffer_bytes(const gbml_dataset *ds, const gbml_saga_plan *pl);

/* A reader of pl's epochs over ds; NULL with env's error set (memory). */
gbml_saga_slices *gbml_saga_slices_open(const gbml_dataset *ds, gbml_env *env, const gbml_saga_plan *pl);

/* Starts an epoch: the plan's groups, in order (after gbml_saga_plan_epoch). */
void		gbml_saga_slices_start(gbml_saga_slices *r);

/*
 * The next group: returns 1 with *j (its index in the plan) and *x: NULL
 * when every chunk is in host memory, else the group's rows in group
 * order, row i at x + i * n_features, readable up to
 * gbml_saga_padded(n_features) floats past each row's start (valid until
 * the next call); 0 after the last group; a GBML_* code (< 0) with env's
 * error set when a read failed.
 */
int			gbml_saga_slices_next(gbml_saga_slices *r, const float **x, int64_t *j);

/* Waits for a read in flight and frees the reader (NULL is fine). */
void		gbml_saga_slices_close(gbml_saga_slices *r);

#endif
