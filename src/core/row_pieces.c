/*
 * row_pieces.c — see row_pieces.h.
 */
#include "row_pieces.h"

#include <stdio.h>

bool
gbml_row_pieces_apply(const gbml_dataset *ds)
{
	bool		stored = false;

	for (int c = 0; c < ds->n_chunks && !stored; c++)
		stored = ds->chunks[c]->x == NULL;
	return stored && ds->store != NULL && ds->store->read_any_thread && ds->store->read_rows != NULL;
}

static size_t
row_bytes_of(const gbml_dataset *ds)
{
	return (size_t) (ds->n_features > 0 ? ds->n_features : 1) * sizeof(float);
}

/* Rows a piece: as many as GBML_ROW_PIECE_BYTES holds, one at least. */
static int64_t
piece_rows_of(const gbml_dataset *ds)
{
	int64_t		rows = (int64_t) (GBML_ROW_PIECE_BYTES / row_bytes_of(ds));

	return rows > 0 ? rows : 1;
}

size_t
gbml_row_pieces_buffer_bytes(const gbml_dataset *ds, int threads)
{
	if (!gbml_row_pieces_apply(ds))
		return 0;
	return (size_t) (threads > 0 ? threads : 1) * (size_t) piece_rows_of(ds) * row_bytes_of(ds);
}

int
gbml_row_pieces_open(gbml_row_pieces *rp, const gbml_dataset *ds, gbml_env *env, int threads)
{
	rp->ds = ds;
	rp->rc = 0;
	rp->failed_chunk = -1;
	rp->piece_rows = piece_rows_of(ds);
	rp->buf = gbml_alloc_array(env, (size_t) (threads > 0 ? threads : 1) * (size_t) rp->piece_rows, row_bytes_of(ds));
	return rp->buf == NULL ? env->error_code : GBML_OK;
}

void
gbml_row_pieces_each(gbml_row_pieces *rp, int c, int64_t r0, int64_t n, int t,
					 void (*fn) (void *ctx, const float *x, int64_t r, int64_t m), void *ctx)
{
	const gbml_dataset *ds = rp->ds;
	gbml_chunk_store *s = ds->store;
	const float *host = ds->chunks[c]->x;
	float	   *buf = rp->buf + (size_t) t * (size_t) rp->piece_rows * (size_t) ds->n_features;

	if (host != NULL)
	{
		fn(ctx, host + (size_t) r0 * (size_t) ds->n_features, r0, n);
		return;
	}
	for (int64_t r = r0; r < r0 + n; r += rp->piece_rows)
	{
		int64_t		m = r0 + n - r < rp->piece_rows ? r0 + n - r : rp->piece_rows;
		int			expected = 0;

		if (__atomic_load_n(&rp->rc, __ATOMIC_RELAXED) != 0)
			return;
		if (s->read_rows(s, c, r, m, buf) != 0)
		{
			int			code = s->error_code(s) ? s->error_code(s) : GBML_EIO;

			if (__atomic_compare_exchange_n(&rp->rc, &expected, code, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
				rp->failed_chunk = c;
			return;
		}
		fn(ctx, buf, r, m);
	}
}

int
gbml_row_pieces_close(gbml_row_pieces *rp, gbml_env *env)
{
	int			rc = GBML_OK;

	gbml_free(env, rp->buf);
	rp->buf = NULL;
	if (rp->rc != 0)
	{
		char		what[64];

		snprintf(what, sizeof(what), "reading chunk %d", rp->failed_chunk + 1);
		rc = gbml_dataset_store_error(rp->ds, env, what);
	}
	return rc;
}
