/*
 * dataset_internal.h — what dataset.c shares with dataset_stored.c (the
 * operations on datasets whose chunks' features live in a chunk store);
 * not for trainers.
 */
#ifndef GBML_DATASET_INTERNAL_H
#define GBML_DATASET_INTERNAL_H

#include "dataset.h"

typedef struct row_key
{
	uint64_t	hash;
	int32_t		chunk;
	int32_t		row;
} row_key;

void		gbml_ds_chunk_free(gbml_chunk *c, gbml_env *env);
int			gbml_ds_push_chunk(gbml_dataset *ds, gbml_env *env, gbml_chunk *c);
/* Rows of the first chunk in the serial layout (the rest have chunk_rows). */
int64_t		gbml_ds_first_chunk_limit(const gbml_dataset *ds);
/* The canonical-order hash of one row's contents. */
uint64_t	gbml_ds_hash_row(const float *x, size_t d, float label, int64_t group, float weight);
/*
 * Total order on row contents, for rows whose hashes are equal: features
 * (xa, xb: wherever they are), then label, group and weight.
 */
int			gbml_ds_compare_rows(const gbml_dataset *ds, const row_key *a, const float *xa,
								 const row_key *b, const float *xb);
/* Sorts keys by hash (tmp: room for n keys). */
void		gbml_ds_sort_keys(row_key *keys, row_key *tmp, int64_t n);
/*
 * The eval split's key of row r of chunk ch: its group id, or without
 * group ids the row's canonical-order hash (its contents: a row's side does
 * not depend on the other rows, so shards split as one server does, and
 * copies of a row never fall on both sides).  A stored chunk keeps its
 * hashes; a host chunk's row is hashed here.
 */
uint64_t	gbml_ds_eval_key(const gbml_dataset *ds, const gbml_chunk *ch, int64_t r);
/* Whether the eval split holds out the row or group with this key. */
bool		gbml_ds_held_out(uint64_t key, uint64_t seed, double fraction);

/* dataset_stored.c */
/* The first chunk is full and the dataset is to stream: the next chunk starts the store. */
bool		gbml_ds_stored_should_start(const gbml_dataset *ds);
gbml_chunk *gbml_ds_stored_writable_chunk(gbml_dataset *ds, gbml_env *env);
int			gbml_ds_stored_canonicalize(gbml_dataset *ds, gbml_env *env);
/* An empty eval set for rows split from ds (its chunk sizes). */
void		gbml_ds_split_eval_init(const gbml_dataset *ds, gbml_dataset *eval);
/* gbml_dataset_canonicalize_split for stored rows */
int			gbml_ds_stored_canonicalize_split(gbml_dataset *ds, gbml_dataset *eval, double fraction, uint64_t seed,
											  gbml_env *env);
int			gbml_ds_stored_split_eval(gbml_dataset *ds, gbml_dataset *eval, double fraction, uint64_t seed,
									  gbml_env *env);
void		gbml_ds_stored_free(gbml_dataset *ds, gbml_env *env);

#endif
