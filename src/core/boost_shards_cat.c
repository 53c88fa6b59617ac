/*
 * boost_shards_cat.c — categorical inputs when the rows are on other
 * servers, the coordinator's side (boost_shard_cat.c is the shard's).
 *
 * A categorical input becomes derived features (boost_ctr.h): one-hot
 * columns, counters, and ordered target statistics, whose value for a row
 * depends on every row before it in a permutation of the union's training
 * order.  No shard can compute those alone, so the coordinator gathers
 * what they read — every training row's category ids and label, 4 bytes
 * each, placed at the row's position in the union's training order
 * (without query ids its canonical order, from the merge that drew the
 * border sample; with them by query id, then canonical: from the queries'
 * sizes when every query is whole on a shard, else from the grouped merge)
 * — and runs the one-server code on them: the same permutation, sums and
 * borders, so the same bytes.  Back go the model's section and the derived
 * borders (each shard bins its eval rows with the final statistics) and
 * every training row's derived bins, one byte a row a derived feature.
 *
 * Cost: the gathered ids and labels and the derived bins in the
 * coordinator's memory (through the env: its budget), and (inputs + 1) x 4
 * bytes up and (derived features) bytes down a row, once per training.
 */
#include "boost_shard_msg.h"
#include "boost_shards_internal.h"

#include <string.h>

/* A page's rows: at most about 64 MB of a message (the unit tests': 4 kB, so that they take many). */
#ifdef GBML_UNIT_TEST
#define CAT_PAGE_BYTES ((int64_t) 4096)
#else
#define CAT_PAGE_BYTES ((int64_t) 64 << 20)
#endif

int
boost_shards_alloc_positions(trainer *T)
{
	boost_shards *B = T->shards;
	gbml_shard_channel *ch = &B->ch;

	if ((B->global_of = gbml_alloc0(T->env, sizeof(int64_t *) * (size_t) ch->n_shards)) == NULL)
		return T->env->error_code;
	for (int s = 0; s < ch->n_shards; s++)
		if ((B->global_of[s] = gbml_alloc_array(T->env, (size_t) (ch->n_rows[s] > 0 ? ch->n_rows[s] : 1),
												sizeof(int64_t))) == NULL)
			return T->env->error_code;
	return GBML_OK;
}

void
boost_shards_free_positions(trainer *T)
{
	boost_shards *B = T->shards;

	for (int s = 0; B->global_of && s < B->ch.n_shards; s++)
		gbml_free(T->env, B->global_of[s]);
	gbml_free(T->env, B->global_of);
	B->global_of = NULL;
}

/*
 * With query ids: the union's query offsets (group_off, n_groups_global +
 * 1) from each shard's query sizes (a query on several shards: the sum of
 * its parts), and, when every query is whole on a shard, every row's
 * global position (its query's offset, then its place in the query as its
 * shard holds it); else the grouped merge placed the rows.
 */
static int
query_offsets(trainer *T, boost_shards *B, int64_t *group_off)
{
	gbml_env   *env = T->env;
	gbml_shard_channel *ch = &B->ch;
	int64_t		G = T->n_groups_global;
	int			rc;

	memset(group_off, 0, sizeof(int64_t) * (size_t) (G + 1));
	gbml_shard_request(ch, BS_OP_CAT_GROUP_SIZES);
	if ((rc = gbml_shard_send(ch)) != GBML_OK)
		return rc;
	/* each query's size at its union index + 1, then the running sum */
	for (int s = 0; s < ch->n_shards; s++)
	{
		gbml_msg_reader r;
		int64_t		rows = 0;

		if (!gbml_shard_reply(ch, s, &r))
			continue;
		r.bad |= gbml_msg_get_i64(&r) != B->n_groups[s];
		for (int64_t g = 0; g < B->n_groups[s] && !r.bad; g++)
		{
			int64_t		size = gbml_msg_get_count(&r, ch->n_rows[s]);

			group_off[B->group_union[s][g] + 1] += size;
			rows += size;
		}
		r.bad |= rows != ch->n_rows[s];
		if ((rc = gbml_shard_reply_done(ch, s, &r)) != GBML_OK)
			return rc;
	}
	for (int64_t g = 0; g < G; g++)
		group_off[g + 1] += group_off[g];
	if (group_off[G] != T->n_global)
		return gbml_error(env, GBML_EINVAL, "boost: the shards' queries hold %lld rows, their hellos %lld",
						  (long long) group_off[G], (long long) T->n_global);
	if (B->queries_span)
		return GBML_OK;
	if ((rc = boost_shards_alloc_positions(T)) != GBML_OK)
		return rc;
	for (int s = 0; s < ch->n_shards; s++)
	{
		int64_t		local = 0;

		for (int64_t g = 0; g < B->n_groups[s]; g++)
		{
			int64_t		u = B->group_union[s][g];

			for (int64_t at = group_off[u]; at < group_off[u + 1]; at++)
				B->global_of[s][local++] = at;
		}
	}
	return GBML_OK;
}

/* What a page of ids (gather_ids) or of derived bins (send_bins) reads or writes. */
typedef struct cat_pages
{
	trainer    *T;
	boost_shards *B;
	float	   *label;			/* gather: every row's, at its global position */
	float	   *buf;			/* gather: a page's ids and labels */
	const gbml_boost_bins *D;	/* send: every row's derived bins, at its global position */
} cat_pages;

/* Shard s's page of ids and labels (each input's count ids, then the labels) to their global positions. */
static int
take_ids(void *arg, int s, int64_t first, int64_t count, gbml_msg_reader *r)
{
	cat_pages  *P = arg;
	int			nc = P->T->cat.n_cat;
	int64_t		n = P->T->n_global;

	r->bad |= gbml_msg_get_i64(r) != count;
	gbml_msg_get(r, P->buf, sizeof(float) * (size_t) count * (size_t) (nc + 1));
	for (int64_t i = 0; i < count && !r->bad; i++)
	{
		int64_t		g = P->B->global_of[s][first + i];

		for (int k = 0; k < nc; k++)
			P->T->cat.keep.out[(size_t) k * (size_t) n + (size_t) g] = P->buf[(size_t) k * (size_t) count + (size_t) i];
		P->label[g] = P->buf[(size_t) nc * (size_t) count + (size_t) i];
	}
	return GBML_OK;
}

/* Every training row's ids (into T->cat.keep) and label (into label[]), at their global positions. */
static int
gather_ids(trainer *T, boost_shards *B, float *label)
{
	size_t		row_bytes = (size_t) (T->cat.n_cat + 1) * sizeof(float);
	int64_t		page = gbml_shard_page_rows(&B->ch, row_bytes, CAT_PAGE_BYTES / (int64_t) row_bytes);
	cat_pages	P = {.T = T,.B = B,.label = label};
	int			rc;

	if ((P.buf = gbml_alloc_array(T->env, (size_t) page * (size_t) (T->cat.n_cat + 1), sizeof(float))) == NULL)
		return T->env->error_code;
	rc = gbml_shard_pages(&B->ch, BS_OP_CAT_ROWS, page, NULL, take_ids, &P);
	gbml_free(T->env, P.buf);
	return rc;
}

/* The model's section and the derived features' borders, to every shard. */
static int
send_inputs(trainer *T, boost_shards *B)
{
	gbml_strbuf section;
	gbml_strbuf *m;
	int			nd = T->cat.model.n_derived;
	int			rc;

	gbml_sb_init(&section, T->env);
	gbml_boost_inputs_write(&T->cat.model, &section);
	if ((rc = gbml_sb_status(&section)) != GBML_OK)
	{
		gbml_sb_free(&section);
		return rc;
	}
	m = gbml_shard_request(&B->ch, BS_OP_CAT_INPUTS);
	gbml_msg_put_i64(m, (int64_t) section.len);
	gbml_msg_put(m, section.data, section.len);
	gbml_sb_free(&section);
	gbml_msg_put_i64(m, nd);
	for (int d = 0; d < nd; d++)
	{
		int			f = T->n_inputs + d;

		gbml_msg_put_i64(m, T->borders.count[f]);
		gbml_msg_put(m, T->borders.values + T->borders.offset[f], sizeof(float) * (size_t) T->borders.count[f]);
	}
	return gbml_shard_send(&B->ch);
}

/* Shard s's page of derived bins, derived feature by feature (a shard done gets an empty page). */
static void
put_bins(void *arg, gbml_strbuf *m, int s, int64_t first, int64_t count)
{
	const cat_pages *P = arg;
	const gbml_boost_bins *D = P->D;

	for (int d = 0; d < D->n_features; d++)
		for (int64_t i = 0; i < count; i++)
		{
			int64_t		g = P->B->global_of[s][first + i],
						blk = g / D->block_rows;
			int64_t		len = gbml_boost_block_len(D, blk);

			gbml_msg_put(m, D->blocks[blk] + (size_t) d * (size_t) len + (size_t) (g - blk * D->block_rows), 1);
		}
}

/* Every shard's training rows' derived bins, in pages of its rows. */
static int
send_bins(trainer *T, boost_shards *B, const gbml_boost_bins *D)
{
	cat_pages	P = {.T = T,.B = B,.D = D};

	return gbml_shard_pages(&B->ch, BS_OP_CAT_BINS,
							gbml_shard_page_rows(&B->ch, (size_t) D->n_features, CAT_PAGE_BYTES / D->n_features),
							put_bins, NULL, &P);
}

int
boost_shards_categories(trainer *T, const gbml_boost_ctr_params *cp_in)
{
	gbml_env   *env = T->env;
	boost_shards *B = T->shards;
	gbml_boost_ctr_params cp = *cp_in;
	int64_t		n = T->n_global,
				G = T->n_groups_global;
	float	   *label = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(float));
	int64_t    *group_off = G > 0 ? gbml_alloc_array(env, (size_t) G + 1, sizeof(int64_t)) : NULL;
	gbml_boost_bins D;
	int			rc;

	memset(&D, 0, sizeof(D));
	D.n_rows = n;
	D.block_rows = BLOCK_ROWS;
	D.n_blocks = (n + BLOCK_ROWS - 1) / BLOCK_ROWS;
	D.blocks = gbml_alloc0(env, sizeof(uint8_t *) * (size_t) (D.n_blocks > 0 ? D.n_blocks : 1));
	if (label == NULL || D.blocks == NULL || (G > 0 && group_off == NULL))
	{
		rc = env->error_code;
		goto done;
	}
	if ((G > 0 && (rc = query_offsets(T, B, group_off)) != GBML_OK) ||
		(rc = gather_ids(T, B, label)) != GBML_OK)
		goto done;
	/* MultiClass: a statistic per class, the class count as one server's labels give it */
	if (T->kind == GBML_LOSS_MULTICLASS &&
		(rc = gbml_boost_multiclass_count(label, n, T->p->classes_count, "", false, &cp.classes, env)) != GBML_OK)
		goto done;
	if ((rc = gbml_boost_ctr_finish(&T->cat, &cp, label, G, group_off, &D, 0, T->eval_here ? &T->eval_bins : NULL,
									&T->borders, T->threads, env)) != GBML_OK ||
		(rc = send_inputs(T, B)) != GBML_OK ||
		(D.n_features > 0 && (rc = send_bins(T, B, &D)) != GBML_OK))
		goto done;
	gbml_shard_traffic_mark_setup(&B->ch.traffic);
done:
	gbml_boost_bins_free(&D, env);
	gbml_free(env, label);
	gbml_free(env, group_off);
	boost_shards_free_positions(T);
	return rc;
}
