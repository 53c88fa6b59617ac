/*
 * dataset_renumber.c — categorical ids renumbered after the rows came
 * (gbml_dataset_renumber_categories, dataset.h): the training aggregates
 * number a categorical column's values as first seen and know their sorted
 * ids only once every row is in, by which time rows past the budget are in
 * a store.  Host rows are rewritten in place; stored rows keep their bytes
 * and the store renumbers them as they are read, and their canonical-order
 * hashes, taken from the first-seen ids as they were written, are taken
 * again from the new ids, the chunks read back through the chunk reader.
 */
#include "dataset_internal.h"
#include "chunk_prefetch.h"

#include <math.h>
#include <stdio.h>

int
gbml_renumber_column(float *x, int64_t n, int d, int j, const int32_t *ids, int32_t n_ids, float *bad)
{
	for (int64_t r = 0; r < n; r++)
	{
		float	   *v = &x[(size_t) r * (size_t) d + (size_t) j];

		if (isnan(*v))
			continue;
		if (!(*v >= 0 && *v < (float) n_ids))
		{
			*bad = *v;
			return -1;
		}
		*v = (float) ids[(int32_t) *v];
	}
	return 0;
}

/* A host chunk's rows rewritten in place. */
static int
renumber_host_chunk(const gbml_dataset *ds, gbml_chunk *c, gbml_env *env, const int32_t *const *ids,
					const int32_t *n_ids)
{
	float		bad;

	for (int j = 0; j < ds->n_features; j++)
		if (ids[j] != NULL && gbml_renumber_column(c->x, c->n_rows, ds->n_features, j, ids[j], n_ids[j], &bad) != 0)
			return gbml_error(env, GBML_EINVAL, "feature %d: category id %g is not renumbered (internal)",
							  j + 1, (double) bad);
	return GBML_OK;
}

/*
 * The store renumbers from now on; each stored chunk's hashes are taken
 * again from its rows as the store now reads them, through the chunk
 * reader (the next chunk read while this one is hashed), whose buffers go
 * afterwards: the steps that follow size themselves by what is free.
 */
static int
renumber_stored(gbml_dataset *ds, gbml_env *env, const int32_t *const *ids, const int32_t *n_ids)
{
	size_t		d = (size_t) ds->n_features;
	gbml_chunk_prefetch *rd;
	const float *x;
	int64_t		rows;
	int			c,
				rc;

	if (ds->spill_by_hash || ds->store->renumber_on_read == NULL)
		return gbml_error(env, GBML_EUNSUPPORTED, "categories renumbered over rows in %s%s (internal)",
						  ds->store->where, ds->spill_by_hash ? " grouped by hash" : "");
	if (ds->store->renumber_on_read(ds->store, ids, n_ids) != 0)
		return gbml_dataset_store_error(ds, env, "renumbering categories");
	if ((rc = gbml_budget_check(env, gbml_chunk_prefetch_buffer_bytes(ds),
								"two chunks of rows read back from %s to renumber their categories",
								ds->store->where)) != GBML_OK)
		return rc;
	if ((rd = gbml_chunk_prefetch_open(ds, env)) == NULL)
		return env->error_code;
	while ((rc = gbml_chunk_prefetch_next(rd, &x, &rows, &c)) > 0)
	{
		gbml_chunk *ch = ds->chunks[c];
		gbml_progress_info info = {.phase = "renumbering categories",.iteration = c + 1,.total = ds->n_chunks};

		if (ch->x != NULL)
			continue;			/* a host chunk: renumbered in place, hashed with the host rows */
		for (int64_t r = 0; r < rows; r++)
			ch->hash[r] = gbml_ds_hash_row(x + (size_t) r * d, d, ch->label[r], ch->group[r], ch->weight[r]);
		if (gbml_progress(env, &info))
		{
			rc = gbml_error(env, GBML_ECANCELLED, "canceled while renumbering categories");
			break;
		}
	}
	gbml_chunk_prefetch_close(rd);
	gbml_dataset_release_reader_buffers(ds, env);
	return rc < 0 ? rc : GBML_OK;
}

int
gbml_dataset_renumber_categories(gbml_dataset *ds, gbml_env *env, const int32_t *const *ids, const int32_t *n_ids)
{
	int			rc = gbml_dataset_seal(ds, env);
	bool		any = false;

	/* rows without a categorical feature have nothing to renumber (their store may group them by hash) */
	for (int f = 0; f < ds->n_features; f++)
		any = any || ids[f] != NULL;
	if (!any)
		return rc;
	for (int c = 0; rc == GBML_OK && c < ds->n_chunks; c++)
		if (ds->chunks[c]->x != NULL)
			rc = renumber_host_chunk(ds, ds->chunks[c], env, ids, n_ids);
	if (rc == GBML_OK && ds->store != NULL)
		rc = renumber_stored(ds, env, ids, n_ids);
	return rc;
}
