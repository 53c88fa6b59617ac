/*
 * boost_shards.c — boosting on rows other servers hold (issue 14), the
 * coordinator's side: the shards' hellos, the border sample drawn by
 * canonical position over the union (shard_order.h) and gathered from the
 * shards that hold it, the borders sent back, and the row side
 * (boost_row_ops) as round trips to every shard at once.  boost.c's driver
 * and split side run unchanged on top, so the model bytes are those of
 * one server holding every row.
 *
 * Round trips: the order (a page of 2^20 rows' hashes per shard each,
 * only when the union has more rows than border_sample_size), the sample
 * (pages), the borders, the base score (2); then per tree its gradients'
 * maxima (carrying the last tree's leaves) and one per level (the smaller
 * children's histograms up, the split down with the next request); with
 * an eval set (eval_fraction: each shard holds out its share) two after
 * each iteration for its eval metric, the first carrying the last tree,
 * and use_best_model's cut with the next request; the train metrics at the
 * end (2).  A shard whose every row is held out answers every request
 * (nothing of its own to train: no rows, zero sums, neutral maxima) for
 * its eval rows' sake.
 *
 * Ranking losses need every query on one shard: the shards' query ids are
 * merged once (a query on two shards is an error naming it and both), and
 * each shard gets its queries' indices among the union's (their random
 * streams).  A pointwise loss with group ids (for the eval split by query)
 * takes a query on several shards unless a query metric or categorical
 * inputs need it whole.  subsample < 1 draws over the union's rows (their
 * global indices, sent with the canonical order; with group ids, their
 * indices in the union's training order: by group id, then canonical) or,
 * with a ranking loss, queries.  Categorical inputs: boost_shards_cat.c.
 * AUC, which needs every prediction, gathers them (boost_shards_auc: 16
 * bytes a row, each time it is asked for).  An eval set of the
 * coordinator's own (eval_source) is binned and scored here (boost.c,
 * eval_here); the shards only get the best model's cut.  Depthwise trees
 * send each level's node splits where symmetric ones send the level's one
 * split (a set split its mask too: categorical_split sets); MultiClass
 * sends the union's class count and base scores with the start, and each
 * tree's class is its stream's (the iteration x classes + class its
 * gradients request names).
 */
#include "boost_shard_msg.h"
#include "boost_shards_internal.h"
#include "metrics.h"
#include "shard_order.h"

#include <math.h>
#include <string.h>

/* Sample rows asked of one shard per round trip: at most about 64 MB of floats. */
#define SAMPLE_PAGE_BYTES ((size_t) 64 << 20)


/* ------------------------------------------------------------------ */
/* The border sample                                                  */
/* ------------------------------------------------------------------ */

/*
 * The merge's visitor: a sampled global position's row goes on its shard's
 * list; with categorical inputs every row's global position is noted.
 */
static void
sample_note(void *arg, int shard, int64_t local, int64_t global)
{
	boost_shards *B = arg;

	if (B->global_of)
		B->global_of[shard][local] = global;
	if (B->sample_next < B->sample_m && B->sample_pos[B->sample_next] == global)
	{
		B->sample_local[shard][B->sample_count[shard]++] = local;
		B->sample_next++;
	}
}

static bool
sample_visit(void *arg, int shard, int64_t local, int64_t global)
{
	sample_note(arg, shard, local, global);
	return true;
}

/* The grouped merge's visitor with categorical inputs: every row's position in the union's training order. */
static void
position_note(void *arg, int shard, int64_t local, int64_t global)
{
	((boost_shards *) arg)->global_of[shard][local] = global;
}

static bool
position_visit(void *arg, int shard, int64_t local, int64_t global)
{
	position_note(arg, shard, local, global);
	return true;
}

/*
 * Which rows of which shard are the sample: every row when the union has
 * at most m rows, else the sampled canonical positions found by merging
 * the shards' orders.  ranks: the merge also sends every shard its rows'
 * global indices (subsample's draws), whatever m; positions: the merge
 * runs whatever m, noting every row's global position (B->global_of).
 */
static int
sample_lists(trainer *T, boost_shards *B, int64_t m, bool ranks, bool positions)
{
	gbml_env   *env = T->env;
	gbml_shard_channel *ch = &B->ch;
	int			S = ch->n_shards;
	int			rc;

	B->sample_local = gbml_alloc0(env, sizeof(int64_t *) * (size_t) S);
	B->sample_count = gbml_alloc0(env, sizeof(int64_t) * (size_t) S);
	if (B->sample_local == NULL || B->sample_count == NULL)
		return env->error_code;
	for (int s = 0; s < S; s++)
	{
		int64_t		cap = ch->n_rows[s] < m ? ch->n_rows[s] : m;

		if ((B->sample_local[s] = gbml_alloc_array(env, (size_t) (cap > 0 ? cap : 1), sizeof(int64_t))) == NULL)
			return env->error_code;
	}
	if (positions && (rc = boost_shards_alloc_positions(T)) != GBML_OK)
		return rc;
	if (m >= T->n_global)
	{
		for (int s = 0; s < S; s++)
		{
			for (int64_t i = 0; i < ch->n_rows[s]; i++)
				B->sample_local[s][i] = i;
			B->sample_count[s] = ch->n_rows[s];
		}
		if (ranks)
			return gbml_shard_send_ranks(ch, T->n_global, BS_OP_HASHES, BS_OP_RANKS, positions ? sample_note : NULL, B);
		return positions ? gbml_shard_merge_order(ch, T->n_global, BS_OP_HASHES, sample_visit, NULL, B) : GBML_OK;
	}
	if ((B->sample_pos = gbml_alloc_array(env, (size_t) m, sizeof(int64_t))) == NULL)
		return env->error_code;
	B->sample_m = gbml_boost_sample_positions(T->n_global, m, (uint64_t) T->p->random_seed, B->sample_pos);
	if (ranks)
		return gbml_shard_send_ranks(ch, T->n_global, BS_OP_HASHES, BS_OP_RANKS, sample_note, B);
	return gbml_shard_merge_order(ch, T->n_global, BS_OP_HASHES, sample_visit, NULL, B);
}

/* The sample's rows from the shards, page by page, into rows (m x d, shard by shard). */
static int
gather_sample(trainer *T, boost_shards *B, float *rows, int d)
{
	gbml_env   *env = T->env;
	gbml_shard_channel *ch = &B->ch;
	int			S = ch->n_shards;
	int64_t		page = (int64_t) (SAMPLE_PAGE_BYTES / ((size_t) (d > 0 ? d : 1) * sizeof(float)));
	int64_t    *sent = gbml_alloc0(env, sizeof(int64_t) * (size_t) S);
	int64_t    *asked = gbml_alloc0(env, sizeof(int64_t) * (size_t) S);
	int64_t		at = 0;
	bool		more = true;
	int			rc = GBML_OK;

	if (sent == NULL || asked == NULL)
		rc = env->error_code;
	page = page < 1 ? 1 : page;
	while (more && rc == GBML_OK)
	{
		more = false;
		for (int s = 0; s < S; s++)
		{
			gbml_strbuf *m = gbml_shard_request_to(ch, s, BS_OP_SAMPLE);

			asked[s] = B->sample_count[s] - sent[s] < page ? B->sample_count[s] - sent[s] : page;
			gbml_msg_put_i64(m, asked[s]);
			gbml_msg_put(m, B->sample_local[s] + sent[s], sizeof(int64_t) * (size_t) asked[s]);
		}
		if ((rc = gbml_shard_send_each(ch)) != GBML_OK)
			break;
		for (int s = 0; s < S && rc == GBML_OK; s++)
		{
			gbml_msg_reader r;

			if (!gbml_shard_reply(ch, s, &r))
				continue;
			gbml_msg_get(&r, rows + (size_t) at * (size_t) d, sizeof(float) * (size_t) asked[s] * (size_t) d);
			if ((rc = gbml_shard_reply_done(ch, s, &r)) != GBML_OK)
				break;
			at += asked[s];
			sent[s] += asked[s];
			more |= sent[s] < B->sample_count[s];
		}
	}
	gbml_free(env, sent);
	gbml_free(env, asked);
	return rc;
}

/*
 * The hellos' tails: every shard's "has a missing value" flags, or'ed, its
 * query count (*with_groups: the shards with rows have group ids; they must
 * agree) and its eval rows and their queries (summed into T).
 */
static int
hello_tails(trainer *T, boost_shards *B, int d, bool *missing, bool *with_groups)
{
	const gbml_shard_link *link = B->ch.link;
	int			seen = 0;

	memset(missing, 0, (size_t) d);
	*with_groups = false;
	T->n_eval_global = T->n_eval_groups_global = 0;
	for (int s = 0; s < link->n_shards; s++)
	{
		gbml_msg_reader r = {link->hello[s] + GBML_SHARD_HELLO_HEAD, link->hello[s] + link->hello_len[s], false};
		/* a shard that never saw a row has no features' flags */
		int64_t		flags = B->ch.n_rows[s] > 0 ? d : gbml_shard_hello_features(link, s, BS_SHARD_MAGIC);
		uint8_t		flag;
		int64_t		groups,
					eval_rows,
					eval_groups;

		if (link->hello_len[s] < GBML_SHARD_HELLO_HEAD || (flags != d && flags != 0))
			r.bad = true;
		for (int f = 0; f < flags && !r.bad; f++)
		{
			gbml_msg_get(&r, &flag, 1);
			missing[f] |= flag != 0;
		}
		groups = gbml_msg_get_count(&r, B->ch.n_rows[s]);
		eval_rows = gbml_msg_get_count(&r, INT64_MAX / 4);
		eval_groups = gbml_msg_get_count(&r, eval_rows);
		if (r.bad || r.p != r.end)
			return gbml_error(T->env, GBML_EINVAL, "boost: shard %s answered its opening with a malformed message",
							  link->name(link->ctx, s));
		B->n_groups[s] = groups;
		T->n_eval_global += eval_rows;
		T->n_eval_groups_global += eval_groups;
		/* a shard whose every row eval_fraction held out answers for its eval rows */
		B->ch.answers[s] = B->ch.n_rows[s] > 0 || eval_rows > 0;
		if (B->ch.n_rows[s] == 0)
			continue;
		if (seen++ > 0 && (groups > 0) != *with_groups)
			return gbml_error(T->env, GBML_EINVAL, "boost: some shards' rows have group ids and shard %s's do not "
							  "(or the other way round)", link->name(link->ctx, s));
		*with_groups = groups > 0;
	}
	/* eval_fraction's rows, held out by each shard as one server would (gbml_shard_split_eval) */
	T->has_eval = T->n_eval_global > 0;
	return GBML_OK;
}

/*
 * The union's queries: every shard's ids (ascending) merged; a query on two
 * shards is an error naming it and both when something needs every query
 * whole (needs_whole says what; NULL: a pointwise loss, whose query on
 * several shards gets one index on each); each shard gets its queries'
 * indices in the merged order.
 */
static int
index_groups(trainer *T, boost_shards *B, const char *needs_whole)
{
	gbml_env   *env = T->env;
	gbml_shard_channel *ch = &B->ch;
	const gbml_shard_link *link = ch->link;
	int			S = ch->n_shards;
	int64_t   **ids = gbml_alloc0(env, sizeof(int64_t *) * (size_t) S);
	int64_t    *at = gbml_alloc0(env, sizeof(int64_t) * (size_t) S);
	int64_t		total = 0,
				listed;
	int			rc;

	B->group_union = gbml_alloc0(env, sizeof(int64_t *) * (size_t) S);
	if (ids == NULL || at == NULL || B->group_union == NULL)
	{
		rc = env->error_code;
		goto done;
	}
	gbml_shard_request(ch, BS_OP_GROUPS);
	if ((rc = gbml_shard_send(ch)) != GBML_OK)
		goto done;
	for (int s = 0; s < S; s++)
	{
		gbml_msg_reader r;

		if (!gbml_shard_reply(ch, s, &r))
			continue;
		r.bad |= gbml_msg_get_i64(&r) != B->n_groups[s];
		if ((ids[s] = gbml_alloc_array(env, (size_t) (B->n_groups[s] > 0 ? B->n_groups[s] : 1),
									   sizeof(int64_t))) == NULL)
		{
			rc = env->error_code;
			goto done;
		}
		if ((B->group_union[s] = gbml_alloc_array(env, (size_t) (B->n_groups[s] > 0 ? B->n_groups[s] : 1),
												  sizeof(int64_t))) == NULL)
		{
			rc = env->error_code;
			goto done;
		}
		gbml_msg_get(&r, ids[s], sizeof(int64_t) * (size_t) B->n_groups[s]);
		for (int64_t g = 1; g < B->n_groups[s] && !r.bad; g++)
			r.bad = !(ids[s][g] > ids[s][g - 1]);
		if ((rc = gbml_shard_reply_done(ch, s, &r)) != GBML_OK)
			goto done;
		total += B->n_groups[s];
	}
	/* the merge: each union query's index to every shard holding it (fewer than listed: some span shards) */
	listed = total;
	for (int64_t g = 0; g < total; g++)
	{
		int			best = -1;

		for (int s = 0; s < S; s++)
		{
			if (ids[s] == NULL || at[s] == B->n_groups[s])
				continue;
			if (best >= 0 && ids[s][at[s]] == ids[best][at[best]] && needs_whole != NULL)
			{
				rc = gbml_error(env, GBML_EINVAL, "boost: query %lld has rows on shards %s and %s; %s needs "
								"every query's rows on one shard (partition the table by its group column)",
								(long long) ids[s][at[s]], link->name(link->ctx, best), link->name(link->ctx, s),
								needs_whole);
				goto done;
			}
			if (best < 0 || ids[s][at[s]] < ids[best][at[best]])
				best = s;
		}
		if (best < 0)
		{
			total = g;			/* fewer: queries on several shards */
			break;
		}
		for (int s = 0; s < S; s++)
			if (s != best && ids[s] != NULL && at[s] < B->n_groups[s] && ids[s][at[s]] == ids[best][at[best]])
				B->group_union[s][at[s]++] = g;
		B->group_union[best][at[best]++] = g;
	}
	/* each shard's index message: the union's count, its count, its indices */
	for (int s = 0; s < S; s++)
	{
		gbml_msg_put_i64(gbml_shard_request_to(ch, s, BS_OP_GROUP_INDEX), total);
		gbml_msg_put_i64(&ch->each[s], B->n_groups[s]);
		if (B->n_groups[s] > 0)
			gbml_msg_put(&ch->each[s], B->group_union[s], sizeof(int64_t) * (size_t) B->n_groups[s]);
	}
	T->n_groups_global = total;
	B->queries_span = total < listed;
	rc = gbml_shard_send_each(ch);
done:
	for (int s = 0; ids && s < S; s++)
		gbml_free(env, ids[s]);
	gbml_free(env, ids);
	gbml_free(env, at);
	return rc;
}

/* What needs every query's rows on one shard (the error's words), or NULL: a query may span shards. */
static const char *
query_needs_whole(const trainer *T)
{
	if (gbml_boost_loss_is_ranking(T->kind))
		return "a ranking loss";
	if (T->metric == GBML_BOOST_METRIC_NDCG)
		return "the NDCG metric";
	return NULL;
}

/*
 * subsample with group ids and a pointwise loss: one server draws each row
 * by its index in its training order (by group id, then canonical), which
 * the shards get from the union's grouped merge.
 */
static bool
draws_rows_by_training_order(const trainer *T, bool with_groups)
{
	return T->p->subsample < 1 && with_groups && !gbml_boost_loss_is_ranking(T->kind);
}

/* The borders to every shard (each bins its rows with them). */
static int
send_borders(trainer *T, boost_shards *B, int d)
{
	gbml_strbuf *m = gbml_shard_request(&B->ch, BS_OP_BORDERS);

	gbml_msg_put_i64(m, T->n_global);
	for (int f = 0; f < d; f++)
	{
		gbml_msg_put_i64(m, T->borders.count[f]);
		gbml_msg_put_i64(m, T->borders.has_missing[f]);
		gbml_msg_put(m, T->borders.values + T->borders.offset[f], sizeof(float) * (size_t) T->borders.count[f]);
	}
	return gbml_shard_send(&B->ch);
}

extern const boost_row_ops boost_shard_rows;

/*
 * The union described: the hellos' tails (missing flags, queries, eval
 * rows), the loss, the union's queries, categorical inputs begun.
 */
static int
setup_union(trainer *T, boost_shards *B, const gbml_dataset *ds, int64_t n_eval_here, bool *missing,
			bool *with_groups)
{
	int			n_cat,
				rc;

	if ((rc = hello_tails(T, B, ds->n_features, missing, with_groups)) != GBML_OK ||
		(rc = boost_resolve_loss(T, *with_groups ? 1 : 0)) != GBML_OK ||
		(*with_groups && (rc = index_groups(T, B, query_needs_whole(T))) != GBML_OK))
		return rc;
	n_cat = gbml_schema_n_categorical(ds->schema);
	/*
	 * Categorical inputs: the union's ids here (an eval_source's too), and
	 * later every row's label, place in the union's order and derived bins
	 * (at least one a categorical input), whatever went to the shards' files
	 */
	if (n_cat > 0 &&
		(rc = gbml_budget_check(T->env, (size_t) T->n_global * ((size_t) n_cat * (sizeof(float) + 1) + sizeof(float) +
																sizeof(int64_t)) +
								(size_t) n_eval_here * (size_t) n_cat * sizeof(float),
								"boost: the union's categorical ids, labels, places and derived bins on the coordinator "
								"(%zu bytes a row for %lld rows)",
								(size_t) n_cat * (sizeof(float) + 1) + sizeof(float) + sizeof(int64_t),
								(long long) T->n_global)) != GBML_OK)
		return rc;
	return gbml_boost_ctr_begin(&T->cat, ds->schema, ds->n_features, T->n_global, n_eval_here, T->env);
}

/*
 * With group ids, the union's training order (by group id, then canonical;
 * a query may span shards) merged from the shards' grouped pages: every
 * shard gets its rows' indices where subsample draws by them, and with
 * categorical inputs and a query on several shards the coordinator notes
 * every row's position (the ordered statistics run along that order; with
 * every query whole on a shard, its queries' sizes place them:
 * boost_shards_cat.c).
 */
static int
grouped_order(trainer *T, boost_shards *B, bool with_groups)
{
	bool		positions = with_groups && T->cat.n_cat > 0 && B->queries_span;
	int			rc;

	if (positions && (rc = boost_shards_alloc_positions(T)) != GBML_OK)
		return rc;
	if (draws_rows_by_training_order(T, with_groups))
		return gbml_shard_send_grouped_ranks(&B->ch, T->n_global, BS_OP_GROUP_HASHES, BS_OP_RANKS,
											 positions ? position_note : NULL, B);
	return positions ? gbml_shard_merge_grouped_order(&B->ch, T->n_global, BS_OP_GROUP_HASHES, position_visit, NULL, B)
		: GBML_OK;
}

/*
 * The borders from the union's sample of m rows (and, where subsample
 * draws by them, every row's global index on its shard), sent to every
 * shard; rows: room for the sample.
 */
static int
setup_borders(trainer *T, boost_shards *B, int64_t m, int d, const bool *missing, bool with_groups, float *rows)
{
	const gbml_boost_params *p = T->p;
	int			rc;

	/*
	 * Beside the sample's rows (held): their places on the shards (and in
	 * the union's order when a sample), with categorical inputs every
	 * row's global position (the borders' sort is checked once they are in)
	 */
	if ((rc = gbml_budget_check(T->env, (size_t) (m > 0 ? m : 1) * sizeof(int64_t) * (m < T->n_global ? 2 : 1) +
								(T->cat.n_cat > 0 ? (size_t) T->n_global * sizeof(int64_t) : 0),
								"boost: the border sample's places on the shards%s",
								T->cat.n_cat > 0 ? " and every row's place in the union's order" : "")) != GBML_OK)
		return rc;
	if ((rc = sample_lists(T, B, m, p->subsample < 1 && !with_groups, T->cat.n_cat > 0 && !with_groups)) != GBML_OK ||
		(rc = grouped_order(T, B, with_groups)) != GBML_OK ||
		(rc = gather_sample(T, B, rows, d)) != GBML_OK)
		return rc;
	/* the borders' sort, beside what the merge and the queries' lists hold now */
	if ((rc = gbml_budget_check(T->env, gbml_boost_borders_work_bytes(m, d, T->env->threads) +
								(size_t) (d > 0 ? d : 1) * ((size_t) p->border_count + 1) * sizeof(float),
								"boost: the borders' sort of the border sample (%lld rows)", (long long) m)) != GBML_OK ||
		(rc = gbml_boost_borders_from_sample(rows, m, d, missing, (int) p->border_count,
											 (gbml_boost_border_type) p->border_type, &T->borders,
											 T->env)) != GBML_OK ||
		(T->cat.n_cat > 0 && (rc = gbml_boost_ctr_clear_borders(&T->cat, &T->borders, T->env)) != GBML_OK))
		return rc;
	return send_borders(T, B, d);
}

int
boost_shards_setup(trainer *T, const gbml_dataset *ds, int64_t n_eval_here)
{
	gbml_env   *env = T->env;
	boost_shards *B;
	int			d = ds->n_features;
	int64_t		m;
	bool	   *missing = NULL,
				with_groups = false;
	float	   *rows = NULL;
	int			rc;

	if ((B = T->shards = gbml_alloc0(env, sizeof(boost_shards))) == NULL)
		return env->error_code;
	T->rows = &boost_shard_rows;
	if ((rc = gbml_shard_channel_open(&B->ch, ds->shards, BS_SHARD_MAGIC, "boost", env)) != GBML_OK)
		return rc;
	T->n_global = 0;
	for (int s = 0; s < B->ch.n_shards; s++)
		T->n_global += B->ch.n_rows[s];
	if (T->n_global != ds->n_rows)
		return gbml_error(env, GBML_EINVAL, "boost: the shards hold %lld rows, the coordinator expected %lld",
						  (long long) T->n_global, (long long) ds->n_rows);
	m = T->n_global < T->p->border_sample_size ? T->n_global : T->p->border_sample_size;
	/* the sample is held here whole (rows) */
	if ((rc = gbml_budget_check(env, (size_t) (m > 0 ? m : 1) * (size_t) (d > 0 ? d : 1) * sizeof(float),
								"boost: the border sample gathered from the shards (%lld rows of %d features, "
								"border_sample_size)", (long long) m, d)) != GBML_OK)
		return rc;
	missing = gbml_alloc_array(env, (size_t) (d > 0 ? d : 1), sizeof(bool));
	rows = gbml_alloc_array(env, (size_t) (m > 0 ? m : 1) * (size_t) (d > 0 ? d : 1), sizeof(float));
	B->n_groups = gbml_alloc0(env, sizeof(int64_t) * (size_t) B->ch.n_shards);
	if (missing == NULL || rows == NULL || B->n_groups == NULL)
		rc = env->error_code;
	else if ((rc = setup_union(T, B, ds, n_eval_here, missing, &with_groups)) == GBML_OK)
		rc = setup_borders(T, B, m, d, missing, with_groups, rows);
	gbml_free(env, missing);
	gbml_free(env, rows);
	if (rc == GBML_OK)
		gbml_shard_traffic_mark_setup(&B->ch.traffic);
	return rc;
}

void
boost_shards_free(trainer *T)
{
	boost_shards *B = T->shards;

	if (B == NULL)
		return;
	for (int s = 0; B->sample_local && s < B->ch.n_shards; s++)
		gbml_free(T->env, B->sample_local[s]);
	gbml_free(T->env, B->sample_local);
	gbml_free(T->env, B->sample_count);
	gbml_free(T->env, B->sample_pos);
	gbml_free(T->env, B->n_groups);
	for (int s = 0; B->group_union && s < B->ch.n_shards; s++)
		gbml_free(T->env, B->group_union[s]);
	gbml_free(T->env, B->group_union);
	boost_shards_free_positions(T);
	gbml_shard_channel_close(&B->ch);
	gbml_free(T->env, B);
	T->shards = NULL;
}

void
boost_shards_traffic_json(const trainer *T, gbml_strbuf *m)
{
	if (T->shards)
		gbml_shard_traffic_json(m, &T->shards->ch.traffic, "tree");
}

/* ------------------------------------------------------------------ */
/* The row side on the shards                                         */
/* ------------------------------------------------------------------ */

/*
 * Tree t's split of `level` into a request (boost_shard_msg.h), from the
 * forest: its (feature, border index), or with Depthwise (-1, -1) and the
 * level's node splits.
 */
static void
put_split(gbml_strbuf *m, const trainer *T, int64_t t, int level)
{
	const forest_builder *F = &T->forest;
	size_t		at = boost_split_index(F, t, level, 0);

	if (!F->node_splits)
	{
		gbml_msg_put_i64(m, F->feature[at]);
		gbml_msg_put_i64(m, F->border_index[at]);
		return;
	}
	gbml_msg_put_i64(m, -1);
	gbml_msg_put_i64(m, -1);
	gbml_msg_put(m, F->feature + at, sizeof(int32_t) << level);
	gbml_msg_put(m, F->border_index + at, sizeof(int32_t) << level);
	/* each set split's mask, in node order */
	for (int k = 0; F->has_sets && k < (1 << level); k++)
		if (F->border_index[at + (size_t) k] == GBML_BOOST_SET_SPLIT)
			gbml_msg_put(m, F->set_mask + (at + (size_t) k) * GBML_BOOST_SET_MASK_BYTES, GBML_BOOST_SET_MASK_BYTES);
}

/* A request that reads the predictions: its code, then what changed them since the last one. */
static gbml_strbuf *
request_with_pending(const trainer *T, int64_t op)
{
	boost_shards *B = T->shards;
	gbml_strbuf *m = gbml_shard_request(&B->ch, op);

	gbml_msg_put_i64(m, B->pending);
	if (B->pending == BS_PENDING_BASE)
	{
		gbml_msg_put_f64(m, B->base);
		if (T->n_classes > 0)
		{
			/* MultiClass: the union's class count and each class's base score */
			gbml_msg_put_i64(m, T->n_classes);
			gbml_msg_put(m, T->class_base, sizeof(double) * (size_t) T->n_classes);
		}
	}
	else if (B->pending == BS_PENDING_TREE)
	{
		/* the tree finished last has joined the forest: its last split and its leaf values */
		int64_t		t = T->forest.n_trees - 1;

		put_split(m, T, t, T->depth - 1);
		gbml_msg_put(m, T->forest.leaf + ((size_t) t << T->depth), sizeof(float) * ((size_t) 1 << T->depth));
	}
	else if (B->pending == BS_PENDING_CUT)
		gbml_msg_put_i64(m, T->forest.n_trees);
	B->pending = BS_PENDING_NONE;
	return m;
}

static int
shard_term_maxima(trainer *T, int which, int k, double *max)
{
	gbml_strbuf *m = request_with_pending(T, BS_OP_TERM_MAX);

	gbml_msg_put_i64(m, which);
	gbml_msg_put_i64(m, k);
	return gbml_shard_send_max_f64(&T->shards->ch, max, (size_t) boost_terms_count(which, k));
}

static int
shard_term_sums(trainer *T, int which, int k, const double *scale, int64_t *sum)
{
	gbml_strbuf *m = request_with_pending(T, BS_OP_TERM_SUMS);

	gbml_msg_put_i64(m, which);
	gbml_msg_put_i64(m, k);
	gbml_msg_put(m, scale, sizeof(double) * (size_t) boost_terms_count(which, k));
	return gbml_shard_send_sum_i64(&T->shards->ch, sum, (size_t) boost_terms_count(which, k));
}

static int
shard_start(trainer *T, double base)
{
	T->shards->pending = BS_PENDING_BASE;
	T->shards->base = T->base_score = base;
	if (T->eval_here)
	{
		/* this server's eval rows (eval_source): their predictions (MultiClass: a column a class, known now) */
		size_t		cols = T->n_classes > 0 ? (size_t) T->n_classes : 1;

		if ((T->eval_pred = gbml_alloc_array(T->env, (size_t) T->eval.n * cols, sizeof(double))) == NULL)
			return T->env->error_code;
		T->eval_pred_all = T->n_classes > 0 ? T->eval_pred : NULL;
		return boost_local_rows.start(T, base);
	}
	return GBML_OK;
}

static int
shard_gradients(trainer *T, int64_t iteration, boost_grad_max *gm)
{
	boost_shards *B = T->shards;
	double		v[BS_GRAD_MAXIMA];
	int			rc;

	B->tree_bytes_before = B->ch.traffic.bytes_sent + B->ch.traffic.bytes_received;
	gbml_msg_put_i64(request_with_pending(T, BS_OP_GRADIENTS), iteration);
	if ((rc = gbml_shard_send_max_f64(&B->ch, v, BS_GRAD_MAXIMA)) != GBML_OK)
		return rc;
	gm->g = v[0];
	gm->g_all = v[1];
	gm->h = v[2];
	gm->newton_h = v[3];
	gm->hmin = -v[4];
	gm->hmax = v[5];
	B->gm = *gm;
	T->drawn = T->n_global;
	return GBML_OK;
}

static int
shard_level(trainer *T, int level, int prev_f, int prev_j, int n_slots)
{
	boost_shards *B = T->shards;
	gbml_strbuf *m = gbml_shard_request(&B->ch, BS_OP_LEVEL);

	gbml_msg_put_i64(m, level);
	if (level > 0)
		put_split(m, T, T->forest.n_trees, level - 1);	/* (prev_f, prev_j: the forest's) */
	else
	{
		gbml_msg_put_i64(m, prev_f);
		gbml_msg_put_i64(m, prev_j);
	}
	gbml_msg_put_i64(m, n_slots);
	for (int p = 0; p < n_slots; p++)
		gbml_msg_put_i64(m, T->small[p]);
	if (level == 0)
	{
		gbml_msg_put_f64(m, B->gm.g);
		gbml_msg_put_f64(m, B->gm.h);
		gbml_msg_put_f64(m, B->gm.newton_h);
		gbml_msg_put_f64(m, B->gm.hmin);
		gbml_msg_put_f64(m, B->gm.hmax);
	}
	if (!T->packed)
		return gbml_shard_send_sum_i64(&B->ch, (int64_t *) T->thist, (size_t) n_slots * (size_t) T->total_bins * 2);

	/*
	 * Packed histograms (constant hessian): each bin one int64, g 2^K +
	 * count, which add up across shards as across threads (the union's
	 * count stays below 2^K); summed into the front of thist, spread to
	 * their bins from the last down (bin i's pair never overlaps an
	 * unread packed value j < i), then unpacked as one server unpacks.
	 */
	{
		int64_t		n = (int64_t) n_slots * T->total_bins;
		int64_t    *packed = (int64_t *) T->thist;
		int			rc;

		if ((rc = gbml_shard_send_sum_i64(&B->ch, packed, (size_t) n)) != GBML_OK)
			return rc;
		for (int64_t i = n - 1; i >= 0; i--)
		{
			int64_t		v = packed[i];

			T->thist[i].g = v;
			T->thist[i].h = 0;
		}
		gbml_boost_hist_unpack(T->thist, n, T->count_bits, T->hq_const);
		return GBML_OK;
	}
}

static int
shard_finish_tree(trainer *T, int last_f, int last_j, float *lv)
{
	boost_shards *B = T->shards;

	if (boost_refines_leaves(T))
	{
		int			rc = boost_refined_leaf_values(T, last_f, last_j, lv);	/* one round trip a step */

		if (rc != GBML_OK)
			return rc;
	}
	else if (boost_structure_by_weight(T))
	{
		/* the leaf values take the leaves' Newton hessians: the shards apply the last split and sum them */
		int64_t		newton_h[1 << GBML_BOOST_MAX_DEPTH];
		gbml_strbuf *m = gbml_shard_request(&B->ch, BS_OP_NEWTON);
		int			rc;

		put_split(m, T, T->forest.n_trees, T->depth - 1);
		if ((rc = gbml_shard_send_sum_i64(&B->ch, newton_h, (size_t) 1 << T->depth)) != GBML_OK)
			return rc;
		boost_newton_leaf_values(T, newton_h, lv);
	}
	else
		boost_newton_leaf_values(T, NULL, lv);
	/* a tree's traffic: its gradients and its levels (its leaves go with the next request, 4 kB at most) */
	B->ch.traffic.step_bytes = B->ch.traffic.bytes_sent + B->ch.traffic.bytes_received - B->tree_bytes_before;
	/* the next request brings the tree (request_with_pending: from the forest, which it joins now) */
	B->pending = BS_PENDING_TREE;
	/* this server's own eval rows get it here */
	return T->eval_here ? boost_eval_add_tree(T) : GBML_OK;
}

/* A Logloss refinement step's sums from every shard (which apply the last split at the first). */
static int
shard_refine_sums(trainer *T, int last_f, int last_j, const double *v, double scale, int64_t *G, int64_t *H)
{
	int			nl = 1 << T->depth;
	int64_t		sums[2 << GBML_BOOST_MAX_DEPTH];
	gbml_strbuf *m = gbml_shard_request(&T->shards->ch, BS_OP_REFINE);
	int			rc;

	(void) last_f;				/* (the forest's, put_split) */
	(void) last_j;
	put_split(m, T, T->forest.n_trees, T->depth - 1);
	gbml_msg_put_f64(m, scale);
	gbml_msg_put(m, v, sizeof(double) * (size_t) nl);
	if ((rc = gbml_shard_send_sum_i64(&T->shards->ch, sums, 2 * (size_t) nl)) != GBML_OK)
		return rc;
	memcpy(G, sums, sizeof(int64_t) * (size_t) nl);
	memcpy(H, sums + nl, sizeof(int64_t) * (size_t) nl);
	return GBML_OK;
}

static int
shard_gradient_squares(trainer *T, double scale, int64_t *sum)
{
	gbml_msg_put_f64(gbml_shard_request(&T->shards->ch, BS_OP_GRADIENT_SQUARES), scale);
	return gbml_shard_send_sum_i64(&T->shards->ch, sum, 1);
}

/*
 * The shards' open tree ends without a split: the next request says so
 * (MultiClass: the shards' predictions go back to the iteration's start,
 * as grow_iteration drops its earlier trees).
 */
static void
shard_drop_tree(trainer *T)
{
	T->shards->pending = BS_PENDING_DROPPED;
}

/*
 * AUC over every row (eval: the eval rows): the shards' predictions,
 * labels and weights gathered page by page (the first request carrying
 * what changed the predictions); gbml_auc_env orders them by their values,
 * so the figure is one server's.
 */
int
boost_shards_auc(trainer *T, bool eval, double *out)
{
	boost_shards *B = T->shards;
	gbml_env   *env = T->env;
	int64_t		n = eval ? T->n_eval_global : T->n_global,
				at = 0;
	double	   *score = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(double));
	float	   *label = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(float)),
			   *weight = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(float));
	bool		more = true;
	int			rc = GBML_OK;

	if (score == NULL || label == NULL || weight == NULL)
		rc = env->error_code;
	for (int64_t first = 0; rc == GBML_OK && more; first += BS_SCORES_PAGE_ROWS)
	{
		gbml_strbuf *m = request_with_pending(T, BS_OP_SCORES);

		gbml_msg_put_i64(m, eval ? 1 : 0);
		gbml_msg_put_i64(m, first);
		gbml_msg_put_i64(m, BS_SCORES_PAGE_ROWS);
		if ((rc = gbml_shard_send(&B->ch)) != GBML_OK)
			break;
		more = false;
		for (int s = 0; s < B->ch.n_shards && rc == GBML_OK; s++)
		{
			gbml_msg_reader r;
			int64_t		rows;

			if (!gbml_shard_reply(&B->ch, s, &r))
				continue;
			rows = gbml_msg_get_count(&r, n - at);
			for (int64_t i = 0; i < rows && !r.bad; i++, at++)
			{
				score[at] = gbml_msg_get_f64(&r);
				gbml_msg_get(&r, &label[at], sizeof(float));
				gbml_msg_get(&r, &weight[at], sizeof(float));
			}
			rc = gbml_shard_reply_done(&B->ch, s, &r);
			more |= rows == BS_SCORES_PAGE_ROWS;
		}
	}
	if (rc == GBML_OK && at != n)
		rc = gbml_error(env, GBML_EINVAL, "boost: the shards sent %lld rows' predictions for AUC, not %lld",
						(long long) at, (long long) n);
	if (rc == GBML_OK)
		*out = gbml_auc_env(env, score, label, weight, n);
	gbml_free(env, score);
	gbml_free(env, label);
	gbml_free(env, weight);
	return rc;
}

/*
 * use_best_model cut the forest: the next request says how many trees the
 * shards keep (they rebuild their predictions from them).  Every tree it
 * keeps was sent: the cut drops at least the last iteration, so a tree
 * still pending (the eval rows are this server's: no request after the
 * last one) or dropped since (MultiClass) goes with the cut.
 */
static int
shard_trees_cut(trainer *T)
{
	if (T->shards->pending == BS_PENDING_BASE)
		return gbml_error(T->env, GBML_EINVAL, "boost: the best model's cut before the first tree");
	T->shards->pending = BS_PENDING_CUT;
	return GBML_OK;
}

const boost_row_ops boost_shard_rows = {
	.trees_cut = shard_trees_cut,
	.drop_tree = shard_drop_tree,
	.gradient_squares = shard_gradient_squares,
	.refine_sums = shard_refine_sums,
	.term_maxima = shard_term_maxima,
	.term_sums = shard_term_sums,
	.start = shard_start,
	.gradients = shard_gradients,
	.level = shard_level,
	.finish_tree = shard_finish_tree,
};
