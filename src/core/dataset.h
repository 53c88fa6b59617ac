/*
 * dataset.h — the chunked training set every trainer reads.
 *
 * Rows (float features, label, group id, weight) are appended into chunks of
 * at most `chunk_rows` rows (65,536 by default, fewer for very wide rows so a
 * chunk stays near 64 MB).  A chunk starts small and doubles up to that size,
 * so GROUP BY over many small groups stays cheap.  There is never one
 * allocation for the whole table: no 1 GB limit, and trainers walk the data
 * chunk by chunk (the Dask SAGA design) or copy what they need.
 *
 * Features are row-major inside a chunk: x[row * n_features + j].
 * NaN features are allowed only when the dataset was created with
 * allow_missing (boosting treats them as missing); labels must be finite.
 */
#ifndef GBML_DATASET_H
#define GBML_DATASET_H

#include "env.h"
#include "strbuf.h"

#define GBML_CHUNK_ROWS 65536
#define GBML_MAX_FEATURES 1000000

typedef struct gbml_chunk
{
	int64_t		n_rows;
	int64_t		capacity;
	float	   *x;				/* capacity * n_features */
	float	   *label;
	int64_t    *group;
	float	   *weight;
} gbml_chunk;

typedef struct gbml_dataset
{
	int			n_features;		/* 0 until the first row */
	int64_t		n_rows;
	int64_t		chunk_rows;		/* maximum rows per chunk */
	int			n_chunks;
	int			chunks_cap;
	gbml_chunk **chunks;
	bool		allow_missing;	/* NaN/Inf features accepted as missing */
	bool		has_missing;	/* some feature is non-finite */
	int			group_state;	/* 0 unknown, 1 every row has a group, -1 none has */
	bool		has_weight;		/* some weight differs from 1 */
	struct gbml_prefault *prefault; /* background page-faulting of the next chunk, or NULL */
	int64_t		prefault_at;	/* start it when the last chunk holds this many rows (-1: not armed) */
} gbml_dataset;

/* Row as the glue hands it over; group_is_null / weight_is_null for SQL NULL. */
typedef struct gbml_row
{
	const float *x;
	int			n_features;
	float		label;
	bool		label_is_null;
	int64_t		group;
	bool		group_is_null;
	float		weight;
	bool		weight_is_null;
} gbml_row;

void		gbml_dataset_init(gbml_dataset *ds, bool allow_missing);
void		gbml_dataset_free(gbml_dataset *ds, gbml_env *env);

/*
 * Appends one row after validating it; the error message names the row
 * (1-based, counting rows already held).  require_label: a NULL label is an
 * error (else stored as 0).
 */
int			gbml_dataset_append(gbml_dataset *ds, gbml_env *env, const gbml_row *row,
								bool require_label);

/*
 * Appending pre-faults the next chunk on a helper thread (fresh memory is
 * zeroed by the kernel on first touch, which otherwise costs the scan as much
 * as the copy).  Call gbml_dataset_finish_appends once no more rows come (the
 * driver, merge and free do); gbml_dataset_stop_prefault only stops the
 * thread (it checks a flag every 2 MB) and waits for it, for a MemoryContext
 * reset callback that frees the memory itself.
 */
void		gbml_dataset_finish_appends(gbml_dataset *ds, gbml_env *env);
void		gbml_dataset_stop_prefault(gbml_dataset *ds);

/* Moves all chunks of src into dst (src is left empty). Feature counts must match. */
int			gbml_dataset_merge(gbml_dataset *dst, gbml_dataset *src, gbml_env *env);

/*
 * Reorders rows into a canonical order that depends only on their contents
 * (hash, then bytes), so a model never depends on scan order: a parallel plan
 * and a serial one give the same bytes.
 */
int			gbml_dataset_canonicalize(gbml_dataset *ds, gbml_env *env);

/* Flat binary form for parallel aggregates: its exact size, and writing it into a buffer of that size. */
size_t		gbml_dataset_serialized_size(const gbml_dataset *ds);
void		gbml_dataset_serialize_into(const gbml_dataset *ds, uint8_t *out);
int			gbml_dataset_deserialize(gbml_dataset *ds, gbml_env *env,
									 const void *data, size_t len);

/* Global row index -> (chunk, row) helpers for trainers that need random access. */
static inline const float *
gbml_dataset_row(const gbml_dataset *ds, int chunk, int64_t row)
{
	return ds->chunks[chunk]->x + (size_t) row * (size_t) ds->n_features;
}

/*
 * Moves a deterministic share of the rows into `eval` (initialised here):
 * whole groups when rows have group ids, single rows otherwise, chosen by a
 * seeded hash so the split is reproducible.  The training set is compacted
 * in place.  At least one row (group) stays on each side when possible.
 */
int			gbml_dataset_split_eval(gbml_dataset *ds, gbml_dataset *eval, double fraction,
									uint64_t seed, gbml_env *env);

#endif
