/*
 * boost_shard.c — a boosting shard (gbml_boost_shard_ops): its rows, their
 * hashes for the union's order, the rows of the border sample it holds,
 * and then a trainer over its bins (boost_local_rows) answering the
 * coordinator's steps: gradients' maxima, level histograms, term sums.
 * It keeps every tree the coordinator sends in a forest of its own (each
 * level's split as it comes; Depthwise trees bring each level's node
 * splits), so the eval rows (eval_fraction: gbml_shard_split_eval) get each
 * tree and use_best_model's cut rebuilds the predictions from the trees
 * kept; MultiClass brings the union's class count and base scores, and
 * each tree's class is its stream's.
 * Every figure it returns is an extreme or an integer sum, so the
 * coordinator's fold does not depend on how the rows were dealt.
 *
 * A request is read and checked whole before it changes anything: a
 * damaged one is an error and leaves the state as it was.
 */
#include "boost_internal.h"
#include "boost_shard_msg.h"
#include "shard_order.h"

#include <math.h>
#include <string.h>

typedef enum bs_phase
{
	BS_ROWS,					/* rows prepared; the order and the sample may be asked for */
	BS_CATEGORIES,				/* categorical inputs: the borders arrived, the derived features not all yet */
	BS_BINNED,					/* bins made, no base score yet */
	BS_TRAINING					/* predictions set: trees */
} bs_phase;

typedef struct bs_shard
{
	gbml_env   *env;
	const gbml_dataset *ds;
	gbml_boost_params params;
	trainer		T;
	const gbml_dataset *eval;	/* the rows held out for the eval set, or NULL */
	bool		answers;		/* it has training rows or eval rows: it takes part in the steps */
	gbml_shard_hashes hashes;
	gbml_shard_ranks ranks;		/* the rows' global indices: subsample draws by them */
	bool		needs_ranks;	/* subsample < 1 without queries: the borders wait for the ranks */
	bs_phase	phase;
	int			next_level;		/* the level the next LEVEL request must be; -1: no tree open */
	bool		leaves_owed;	/* the last level is done: the next request brings the tree's leaves */
	bool		groups_indexed;	/* the union's indices of this shard's queries arrived (with group ids) */
	boost_grad_max local_max;	/* this shard's gradient maxima of the open tree */
	double	   *iteration_start;	/* MultiClass: every class's predictions when the iteration began */
	int64_t		iteration_trees;	/* ... and the forest's trees then */
	bool		cat_inputs_in;	/* BS_CATEGORIES: the derived features' section and borders arrived */
	int64_t		cat_filled;		/* ... and the training rows whose derived bins did */
} bs_shard;

static void bs_close(void *state);

static int
bs_open(const gbml_dataset *ds, const gbml_dataset *eval, const void *algo_params, gbml_env *env, void **out,
		gbml_strbuf *hello)
{
	bs_shard   *sh;
	bool	   *missing = NULL;
	int			rc;

	*out = NULL;
	if ((sh = gbml_alloc0(env, sizeof(*sh))) == NULL)
		return env->error_code;
	sh->env = env;
	sh->ds = ds;
	sh->eval = eval;
	sh->params = *(const gbml_boost_params *) algo_params;
	sh->next_level = -1;
	/*
	 * eval_fraction may hold out every row of a small shard: it trains
	 * nothing but keeps its eval rows' predictions, metric terms and scores
	 */
	sh->answers = ds->n_rows > 0 || (eval != NULL && eval->n_rows > 0);
	if (sh->answers && (rc = boost_trainer_rows(&sh->T, ds, eval, &sh->params, env)) != GBML_OK)
		goto fail;
	/* this shard's largest weight: what a refinement step's scale must leave room for */
	for (int64_t i = 0; i < sh->T.train.n; i++)
		sh->T.max_weight = fmax(sh->T.max_weight, sh->T.train.weight ? fabs((double) sh->T.train.weight[i]) : 1.0);
	/* subsample draws rows by their global index (queries, with a ranking loss: theirs) */
	sh->needs_ranks = sh->params.subsample < 1 && sh->T.train.n > 0 &&
		(sh->T.train.n_groups == 0 || !gbml_boost_loss_is_ranking(sh->T.kind));
	missing = gbml_alloc0(env, (size_t) (ds->n_features > 0 ? ds->n_features : 1));
	if (missing == NULL || (rc = gbml_boost_scan_missing(ds, missing, env)) != GBML_OK)
	{
		rc = missing ? rc : env->error_code;
		goto fail;
	}
	gbml_shard_hello_head(hello, BS_SHARD_MAGIC, ds->n_rows, ds->n_features);
	gbml_msg_put(hello, missing, (size_t) ds->n_features);
	gbml_msg_put_i64(hello, ds->n_rows > 0 ? sh->T.train.n_groups : 0);
	gbml_msg_put_i64(hello, sh->T.has_eval ? sh->T.eval.n : 0);
	gbml_msg_put_i64(hello, sh->T.has_eval ? sh->T.eval.n_groups : 0);
	gbml_free(env, missing);
	if ((rc = gbml_sb_status(hello)) != GBML_OK)
		goto fail;
	*out = sh;
	return GBML_OK;
fail:
	gbml_free(env, missing);
	bs_close(sh);
	return rc;
}

static void
bs_close(void *state)
{
	bs_shard   *sh = state;

	if (sh == NULL)
		return;
	if (sh->T.env)
		boost_trainer_free(&sh->T);
	gbml_free(sh->env, sh->iteration_start);
	gbml_shard_hashes_free(&sh->hashes, sh->env);
	gbml_shard_ranks_free(&sh->ranks, sh->env);
	gbml_free(sh->env, sh);
}

/* A page of the rows' hashes: in canonical order, or grouped (the training order with group ids). */
static int
bs_hashes(bs_shard *sh, gbml_msg_reader *r, bool grouped, gbml_strbuf *reply)
{
	int			rc;

	if (sh->phase != BS_ROWS)
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: row hashes asked for after the borders");
	if (grouped && sh->ds->group_state <= 0)
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: grouped row hashes asked for rows without group ids");
	/* the one kind asked for now (the coordinator merges one order after the other) */
	if (sh->hashes.hash != NULL && (sh->hashes.words == 3) != grouped)
		gbml_shard_hashes_free(&sh->hashes, sh->env);
	if (sh->hashes.hash == NULL &&
		(rc = grouped ? gbml_shard_hashes_build_grouped(&sh->hashes, sh->ds, sh->env)
		 : gbml_shard_hashes_build(&sh->hashes, sh->ds, sh->env)) != GBML_OK)
		return rc;
	gbml_shard_hashes_page(&sh->hashes, r, reply);
	return GBML_OK;
}

/* A page of the rows' global indices (subsample's draws): once whole, the trainer draws by them. */
static int
bs_ranks(bs_shard *sh, gbml_msg_reader *r)
{
	bool		complete;
	int			rc;

	if (sh->phase == BS_ROWS && sh->T.train.n == 0)
	{
		/* no training rows (its eval rows only): every page is empty */
		(void) gbml_msg_get_count(r, INT64_MAX / 2);
		r->bad |= gbml_msg_get_i64(r) != 0 || gbml_msg_get_i64(r) != 0;
		return GBML_OK;
	}
	if (sh->T.row_rank != NULL && gbml_shard_ranks_trailing_page(&sh->ranks, r))
		return GBML_OK;
	if (sh->phase != BS_ROWS || !sh->needs_ranks || sh->T.row_rank != NULL)
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: global row indices out of order");
	if ((rc = gbml_shard_ranks_receive(&sh->ranks, sh->T.train.n, r, sh->env, &complete)) != GBML_OK)
		return rc;
	if (complete)
	{
		sh->T.row_rank = sh->ranks.rank;
		sh->T.n_global = sh->ranks.n_global;
	}
	return GBML_OK;
}

/* The rows at the asked local positions (in the shard's canonical order, ascending), as floats. */
static int
bs_sample(bs_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	const boost_data *d = &sh->T.train;
	int			nf = sh->ds->n_features;
	int64_t		count = gbml_msg_get_count(r, d->n);
	int64_t    *local;
	float	   *rows;
	int			rc = GBML_OK;

	if (sh->phase != BS_ROWS)
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: sample rows asked for after the borders");
	local = gbml_alloc_array(sh->env, (size_t) (count > 0 ? count : 1), sizeof(int64_t));
	rows = gbml_alloc_array(sh->env, (size_t) (count > 0 ? count : 1) * (size_t) nf, sizeof(float));
	if (local == NULL || rows == NULL)
	{
		rc = sh->env->error_code;
		goto done;
	}
	gbml_msg_get(r, local, sizeof(int64_t) * (size_t) count);
	for (int64_t i = 0; i < count && !r->bad; i++)
		if (local[i] < 0 || local[i] >= d->n || (i > 0 && local[i] <= local[i - 1]))
			r->bad = true;
	if (r->bad)
		goto done;
	/* canonical positions to chunk addresses (the training order is not canonical with group ids) */
	gbml_dataset_addresses(sh->ds, local, count, local);
	rc = gbml_dataset_fetch_rows(sh->ds, local, count, rows, sh->env);
	if (rc == GBML_OK)
		gbml_msg_put(reply, rows, sizeof(float) * (size_t) count * (size_t) nf);
done:
	gbml_free(sh->env, local);
	gbml_free(sh->env, rows);
	return rc;
}

/* Feature f's borders from the request: ascending, finite but for a leading -inf when it has missing values. */
static void
bs_read_feature_borders(gbml_msg_reader *r, gbml_boost_borders *b, int f, float *values)
{
	int64_t		count = gbml_msg_get_count(r, GBML_BOOST_MAX_BORDERS);

	b->has_missing[f] = gbml_msg_get_i64(r) != 0;
	gbml_msg_get(r, values, sizeof(float) * (size_t) count);
	for (int64_t j = 0; j < count && !r->bad; j++)
	{
		bool		missing_border = j == 0 && b->has_missing[f] && values[j] == -INFINITY;

		if ((!isfinite(values[j]) && !missing_border) || (j > 0 && !(values[j] > values[j - 1])))
			r->bad = true;
	}
	b->count[f] = (int) count;
	b->offset[f + 1] = b->offset[f] + count;
}

/* The coordinator's borders: this shard's rows binned, the row side's arrays made. */
static int
bs_borders(bs_shard *sh, gbml_msg_reader *r)
{
	gbml_env   *env = sh->env;
	int			nf = sh->ds->n_features;
	int64_t		n_global = gbml_msg_get_count(r, INT64_MAX / 4);
	gbml_boost_borders b;
	float	   *values;
	int			rc;

	if (sh->phase != BS_ROWS)
		return gbml_error(env, GBML_EINVAL, "boost shard: the borders arrived twice");
	if (sh->T.train.n_groups > 0 && !sh->groups_indexed)
		return gbml_error(env, GBML_EINVAL, "boost shard: the borders arrived before the queries' indices");
	if (sh->needs_ranks && sh->T.row_rank == NULL)
		return gbml_error(env, GBML_EINVAL, "boost shard: the borders arrived before the rows' global indices");
	memset(&b, 0, sizeof(b));
	b.count = gbml_alloc0(env, sizeof(int) * (size_t) (nf > 0 ? nf : 1));
	b.offset = gbml_alloc0(env, sizeof(int64_t) * ((size_t) nf + 1));
	b.has_missing = gbml_alloc0(env, sizeof(bool) * (size_t) (nf > 0 ? nf : 1));
	values = b.values = gbml_alloc_array(env, (size_t) (nf > 0 ? nf : 1) * GBML_BOOST_MAX_BORDERS, sizeof(float));
	if (!b.count || !b.offset || !b.has_missing || !values)
	{
		gbml_boost_borders_free(&b, env);
		return env->error_code;
	}
	for (int f = 0; f < nf && !r->bad; f++)
		bs_read_feature_borders(r, &b, f, values + b.offset[f]);
	if (r->bad || r->p != r->end || n_global < sh->T.train.n)
	{
		r->bad = true;
		gbml_boost_borders_free(&b, env);
		return GBML_OK;
	}
	sh->T.borders = b;
	gbml_shard_hashes_free(&sh->hashes, env);
	if ((rc = boost_trainer_bins(&sh->T, sh->ds, sh->eval, n_global)) != GBML_OK)
		return rc;
	sh->phase = sh->T.cat.n_cat > 0 ? BS_CATEGORIES : BS_BINNED;
	return GBML_OK;
}

/*
 * Categorical inputs (boost_shard_cat.c): the kept ids asked for, the
 * queries' sizes, the derived features' section and borders, then pages of
 * their training bins; the last page makes the row side's arrays.
 */
static int
bs_categories(bs_shard *sh, int64_t op, gbml_msg_reader *r, gbml_strbuf *reply)
{
	trainer    *T = &sh->T;
	int			rc;

	if (op == BS_OP_CAT_BINS && sh->phase == BS_BINNED && sh->cat_inputs_in)
	{
		/* every row's bins are in: empty pages come while other shards' rows do */
		r->bad |= gbml_msg_get_i64(r) != T->train.n || gbml_msg_get_i64(r) != 0;
		return GBML_OK;
	}
	if (sh->phase != BS_CATEGORIES || (op == BS_OP_CAT_BINS) != sh->cat_inputs_in)
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: categorical request %lld out of order", (long long) op);
	if (op == BS_OP_CAT_ROWS)
		return boost_cat_rows_page(T, r, reply);
	if (op == BS_OP_CAT_GROUP_SIZES)
		return boost_cat_group_sizes(T, reply);
	if (op == BS_OP_CAT_INPUTS)
	{
		if ((rc = boost_cat_take_inputs(T, sh->ds->schema, r)) != GBML_OK || r->bad)
			return rc;
		sh->cat_inputs_in = true;
	}
	else if ((rc = boost_cat_take_bins(T, r, &sh->cat_filled)) != GBML_OK || r->bad)
		return rc;
	if (sh->cat_filled < T->train.n && T->cat.model.n_derived > 0)
		return GBML_OK;
	sh->phase = BS_BINNED;
	return boost_trainer_arrays(T, sh->ds);
}

/*
 * A level's split in a request (boost_shard_msg.h): its (feature, border
 * index), or with Depthwise (-1, -1) and the level's node splits; read and
 * checked here, written into the open tree by bs_use_split once the whole
 * request is known to be sound.
 */
typedef struct bs_split
{
	int64_t		f,
				j;
	int			level;
	int32_t		feature[1 << (GBML_BOOST_MAX_DEPTH - 1)];
	int32_t		border[1 << (GBML_BOOST_MAX_DEPTH - 1)];
	/* a set split's bins going right (border GBML_BOOST_SET_SPLIT, on a slot column) */
	uint8_t		mask[1 << (GBML_BOOST_MAX_DEPTH - 1)][GBML_BOOST_SET_MASK_BYTES];
} bs_split;

static void
bs_read_split(bs_shard *sh, gbml_msg_reader *r, int level, bs_split *s)
{
	const trainer *T = &sh->T;
	int			n = 1 << level;	/* level < depth <= GBML_BOOST_MAX_DEPTH */

	s->f = gbml_msg_get_i64(r);
	s->j = gbml_msg_get_i64(r);
	s->level = level;
	if (!T->forest.node_splits)
	{
		r->bad |= s->f < 0 || s->f >= T->n_features || s->j < 0 || s->j >= T->borders.count[s->f];
		return;
	}
	r->bad |= s->f != -1 || s->j != -1;
	gbml_msg_get(r, s->feature, sizeof(int32_t) * (size_t) n);
	gbml_msg_get(r, s->border, sizeof(int32_t) * (size_t) n);
	for (int k = 0; k < n && !r->bad; k++)
	{
		int32_t		f = s->feature[k],
					j = s->border[k];
		bool		set = f >= 0 && f < T->n_features && T->is_set && T->is_set[f];

		/* a slot column splits as a set (its mask follows) or not at all; any other feature at a border */
		r->bad = f < 0 || f >= T->n_features ||
			!(j == GBML_BOOST_NO_SPLIT || (set ? j == GBML_BOOST_SET_SPLIT : j >= 0 && j < T->borders.count[f]));
		if (!r->bad && j == GBML_BOOST_SET_SPLIT)
			gbml_msg_get(r, s->mask[k], GBML_BOOST_SET_MASK_BYTES);
	}
}

/* The level's split into the open tree (Depthwise: its node splits, where the row side reads them). */
static void
bs_use_split(bs_shard *sh, const bs_split *s)
{
	forest_builder *F = &sh->T.forest;
	size_t		at = boost_split_index(F, F->n_trees, s->level, 0);

	if (!F->node_splits)
	{
		F->feature[at] = (int32_t) s->f;
		F->border_index[at] = (int32_t) s->j;
		return;
	}
	memcpy(F->feature + at, s->feature, sizeof(int32_t) << s->level);
	memcpy(F->border_index + at, s->border, sizeof(int32_t) << s->level);
	for (int k = 0; F->has_sets && k < (1 << s->level); k++)
		if (s->border[k] == GBML_BOOST_SET_SPLIT)
			memcpy(F->set_mask + (at + (size_t) k) * GBML_BOOST_SET_MASK_BYTES, s->mask[k], GBML_BOOST_SET_MASK_BYTES);
}

/*
 * What changed the predictions since the last request (boost_shard_msg.h),
 * read and checked; applied only by bs_apply_pending once the whole
 * request is known to be sound.
 */
typedef struct bs_pending_msg
{
	int64_t		kind;
	double		base;
	int64_t		classes;		/* MultiClass: the union's class count and base scores */
	double		class_base[GBML_BOOST_MAX_CLASSES];
	bs_split	split;			/* the tree's last level */
	float		lv[1 << GBML_BOOST_MAX_DEPTH];
	int64_t		keep_trees;		/* a cut's */
} bs_pending_msg;

/*
 * MultiClass's start: the union's class count (at least this shard's, and
 * classes_count when set) and each class's base score.
 */
static void
bs_read_classes(bs_shard *sh, gbml_msg_reader *r, bs_pending_msg *pm)
{
	const trainer *T = &sh->T;

	pm->classes = gbml_msg_get_i64(r);
	if (pm->classes < 2 || pm->classes > GBML_BOOST_MAX_CLASSES || pm->classes < T->n_classes ||
		(sh->params.classes_count > 0 && pm->classes != sh->params.classes_count))
	{
		r->bad = true;
		return;
	}
	gbml_msg_get(r, pm->class_base, sizeof(double) * (size_t) pm->classes);
	for (int64_t c = 0; c < pm->classes && !r->bad; c++)
		r->bad = !isfinite(pm->class_base[c]);
}

static void
bs_read_pending(bs_shard *sh, gbml_msg_reader *r, bs_pending_msg *pm)
{
	trainer    *T = &sh->T;

	pm->kind = gbml_msg_get_i64(r);
	if (pm->kind == BS_PENDING_BASE)
	{
		pm->base = gbml_msg_get_f64(r);
		r->bad |= sh->phase != BS_BINNED || !isfinite(pm->base);
		if (T->kind == GBML_LOSS_MULTICLASS)
			bs_read_classes(sh, r, pm);
	}
	else if (pm->kind == BS_PENDING_TREE)
	{
		bs_read_split(sh, r, T->depth - 1, &pm->split);
		gbml_msg_get(r, pm->lv, sizeof(float) * ((size_t) 1 << T->depth));
		r->bad |= !sh->leaves_owed ||
			sh->T.leaves_applied != (boost_structure_by_weight(T) || boost_refines_leaves(T));
		for (int l = 0; l < (1 << T->depth) && !r->bad; l++)
			r->bad = !isfinite(pm->lv[l]);
	}
	else if (pm->kind == BS_PENDING_DROPPED)
	{
		/* the open tree's root could not split: the coordinator dropped it */
		r->bad |= !(sh->next_level > 0 || sh->leaves_owed);
		return;
	}
	else if (pm->kind == BS_PENDING_CUT)
	{
		/* use_best_model: whole iterations of the trees so far (a tree left open is dropped with it) */
		int64_t		per_iteration = T->n_classes > 0 ? T->n_classes : 1;

		pm->keep_trees = gbml_msg_get_i64(r);
		r->bad |= sh->phase != BS_TRAINING || pm->keep_trees < 1 || pm->keep_trees > T->forest.n_trees ||
			pm->keep_trees % per_iteration != 0;
		return;
	}
	else
		r->bad |= pm->kind != BS_PENDING_NONE || sh->leaves_owed;
	r->bad |= sh->next_level >= 0;		/* a tree's levels are not done */
}

static int
bs_apply_pending(bs_shard *sh, const bs_pending_msg *pm)
{
	int			rc;

	if (pm->kind == BS_PENDING_BASE)
	{
		/* one server checks the eval labels against the training's class count: the union's */
		if (sh->T.kind == GBML_LOSS_MULTICLASS && sh->T.has_eval && sh->T.eval_classes > pm->classes)
			return gbml_error(sh->env, GBML_EINVAL, "boost: eval label %d is not below the class count %lld "
							  "(classes_count)", sh->T.eval_classes - 1,
							  (long long) pm->classes);
		if (sh->T.kind == GBML_LOSS_MULTICLASS &&
			(rc = boost_trainer_classes(&sh->T, (int) pm->classes, pm->class_base)) != GBML_OK)
			return rc;
		sh->phase = BS_TRAINING;
		return boost_local_rows.start(&sh->T, pm->base);
	}
	if (pm->kind == BS_PENDING_DROPPED || pm->kind == BS_PENDING_CUT)
	{
		sh->next_level = -1;
		sh->leaves_owed = false;
		sh->T.leaves_applied = false;
	}
	if (pm->kind == BS_PENDING_CUT)
	{
		sh->T.forest.n_trees = pm->keep_trees;
		return boost_rebuild_predictions(&sh->T);
	}
	if (pm->kind == BS_PENDING_DROPPED && sh->iteration_start)
	{
		/* MultiClass drops the iteration's earlier trees with it */
		memcpy(sh->T.pred_all, sh->iteration_start,
			   sizeof(double) * (size_t) sh->T.train.n * (size_t) sh->T.n_classes);
		sh->T.forest.n_trees = sh->iteration_trees;
	}
	if (pm->kind == BS_PENDING_TREE)
	{
		forest_builder *F = &sh->T.forest;

		bs_use_split(sh, &pm->split);
		memcpy(F->leaf + ((size_t) F->n_trees << F->depth), pm->lv, sizeof(float) << F->depth);
		if ((rc = boost_apply_tree(&sh->T, (int) pm->split.f, (int) pm->split.j, pm->lv)) != GBML_OK ||
			(rc = boost_eval_add_tree(&sh->T)) != GBML_OK)
			return rc;
		F->n_trees++;
		sh->leaves_owed = false;
	}
	return GBML_OK;
}

/*
 * Whether this shard can give terms of `which` with k: the queries' with
 * group ids (NDCG with a cut-off), MultiClass's with that loss (the classes'
 * weights for at least this shard's classes, the metric terms for the
 * classes it trains).
 */
static bool
bs_terms_fit(const bs_shard *sh, boost_terms_kind which, int64_t k)
{
	const trainer *T = &sh->T;
	bool		multiclass = T->kind == GBML_LOSS_MULTICLASS;
	/* the rows have group ids (a shard whose every row eval_fraction held out: its eval rows do) */
	bool		queries = T->train.n_groups > 0 || (T->train.n == 0 && T->has_eval && T->eval.n_groups > 0);

	switch (which)
	{
		case BOOST_TERMS_QUERY_NDCG:
			return k > 0 && queries;
		case BOOST_TERMS_QUERY_LOSS:
			return queries;
		case BOOST_TERMS_CLASS_COUNT:
			return multiclass && k == 0;
		case BOOST_TERMS_CLASSES:
			return multiclass && k >= T->n_classes && k <= GBML_BOOST_MAX_CLASSES;
		case BOOST_TERMS_MULTICLASS:
			return multiclass && sh->phase == BS_TRAINING && k == T->n_classes;
		default:
			return true;
	}
}

/*
 * Whether a request's kind of terms is one: a kind, or one of the metrics'
 * with BOOST_TERMS_EVAL (the eval rows', each iteration).
 */
static bool
bs_terms_known(int64_t which)
{
	int64_t		base = which & ~(int64_t) BOOST_TERMS_EVAL;

	if (base < BOOST_TERMS_LABELS || base > BOOST_TERMS_POINTWISE_LOGLOSS)
		return false;
	return which == base || base == BOOST_TERMS_POINTWISE || base == BOOST_TERMS_POINTWISE_SQERR ||
		base == BOOST_TERMS_POINTWISE_LOGLOSS || base == BOOST_TERMS_QUERY_NDCG || base == BOOST_TERMS_QUERY_LOSS ||
		base == BOOST_TERMS_MULTICLASS;
}

/* TERM_MAX and TERM_SUMS: the maxima or the fixed-point sums of a kind of terms (boost_internal.h). */
static int
bs_terms(bs_shard *sh, gbml_msg_reader *r, bool sums, gbml_strbuf *reply)
{
	bs_pending_msg pm;
	int64_t		which,
				k;
	int			n_terms;
	double		scale[BOOST_MAX_TERMS],
				max[BOOST_MAX_TERMS];
	int64_t		sum[BOOST_MAX_TERMS],
				count;
	const boost_data *d;
	int			rc;

	bs_read_pending(sh, r, &pm);
	which = gbml_msg_get_i64(r);
	k = gbml_msg_get_i64(r);
	if (!bs_terms_known(which) || k < 0 || k > 1000000 || !bs_terms_fit(sh, boost_terms_base((int) which), k))
		r->bad = true;
	n_terms = r->bad ? 0 : boost_terms_count((int) which, (int) k);
	if (sums)
		gbml_msg_get(r, scale, sizeof(double) * (size_t) n_terms);
	if (r->bad || r->p != r->end ||
		(!boost_terms_of_labels((int) which) && sh->phase == BS_BINNED && pm.kind != BS_PENDING_BASE))
	{
		r->bad = true;
		return GBML_OK;
	}
	if ((rc = bs_apply_pending(sh, &pm)) != GBML_OK ||
		(rc = boost_local_rows.term_maxima(&sh->T, (int) which, (int) k, max)) != GBML_OK)
		return rc;
	if (!sums)
	{
		gbml_msg_put(reply, max, sizeof(double) * (size_t) n_terms);
		return GBML_OK;
	}
	/* a scale no sum of this shard's terms can overflow at (as the union's maxima give) */
	d = (which & BOOST_TERMS_EVAL) ? &sh->T.eval : &sh->T.train;
	count = boost_terms_per_row((int) which) ? d->n : d->n_groups;
	for (int t = 0; t < n_terms; t++)
		if (!(scale[t] >= 0 && isfinite(scale[t])) ||
			(scale[t] > 0 && !(max[t] * scale[t] * (double) (count + 1) <= ldexp(1.0, 62))))
			return gbml_error(sh->env, GBML_EINVAL, "boost shard: a term scale its sums could overflow at");
	if ((rc = boost_local_rows.term_sums(&sh->T, (int) which, (int) k, scale, sum)) != GBML_OK)
		return rc;
	gbml_msg_put(reply, sum, sizeof(int64_t) * (size_t) n_terms);
	return GBML_OK;
}

/*
 * A page of the rows' predictions, labels and weights (AUC, which needs
 * every prediction of the union: the coordinator gathers them), after the
 * pending tree.
 */
static int
bs_scores(bs_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	trainer    *T = &sh->T;
	bs_pending_msg pm;
	int64_t		eval,
				first,
				count,
				m;
	const boost_data *d;
	const double *pred;
	int			rc;

	bs_read_pending(sh, r, &pm);
	eval = gbml_msg_get_i64(r);
	first = gbml_msg_get_i64(r);
	count = gbml_msg_get_i64(r);
	if (r->bad || r->p != r->end || (eval != 0 && eval != 1) || first < 0 || count < 1 ||
		count > BS_SCORES_PAGE_ROWS || T->n_classes > 0 || (sh->phase == BS_BINNED && pm.kind != BS_PENDING_BASE))
	{
		r->bad = true;
		return GBML_OK;
	}
	if ((rc = bs_apply_pending(sh, &pm)) != GBML_OK)
		return rc;
	d = eval ? &T->eval : &T->train;
	pred = eval ? T->eval_pred : T->pred;
	m = eval && !T->has_eval ? 0 : first >= d->n ? 0 : d->n - first < count ? d->n - first : count;
	gbml_msg_put_i64(reply, m);
	for (int64_t i = first; i < first + m; i++)
	{
		float		w = d->weight ? d->weight[i] : 1.0f;

		gbml_msg_put_f64(reply, pred[i]);
		gbml_msg_put(reply, &d->label[i], sizeof(float));
		gbml_msg_put(reply, &w, sizeof(float));
	}
	return GBML_OK;
}

/* This shard's query ids, ascending (the coordinator checks no query is on two shards). */
static int
bs_groups(bs_shard *sh, gbml_strbuf *reply)
{
	if (sh->phase != BS_ROWS || sh->groups_indexed)
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: query ids asked for after their indices");
	gbml_msg_put_i64(reply, sh->T.train.n_groups);
	gbml_msg_put(reply, sh->T.train.group_id, sizeof(int64_t) * (size_t) sh->T.train.n_groups);
	return GBML_OK;
}

/* The union's index of each of this shard's queries: ascending (their ids are), below the union's count. */
static int
bs_group_index(bs_shard *sh, gbml_msg_reader *r)
{
	boost_data *d = &sh->T.train;
	int64_t		total = gbml_msg_get_count(r, INT64_MAX / 4),
				count = gbml_msg_get_count(r, d->n_groups);
	int64_t    *idx;

	/* (a shard with eval rows only has no training queries: its message is empty) */
	if (sh->phase != BS_ROWS || sh->groups_indexed || (d->n_groups == 0 && d->n > 0))
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: query indices out of order");
	if ((idx = gbml_alloc_array(sh->env, (size_t) (d->n_groups > 0 ? d->n_groups : 1), sizeof(int64_t))) == NULL)
		return sh->env->error_code;
	r->bad |= count != d->n_groups || total < count;
	gbml_msg_get(r, idx, sizeof(int64_t) * (size_t) count);
	for (int64_t g = 0; g < count && !r->bad; g++)
		r->bad = idx[g] < 0 || idx[g] >= total || (g > 0 && idx[g] <= idx[g - 1]);
	if (r->bad || r->p != r->end)
	{
		r->bad = true;
		gbml_free(sh->env, idx);
		return GBML_OK;
	}
	d->group_global = idx;
	sh->T.n_groups_global = total;
	sh->groups_indexed = true;
	return GBML_OK;
}

/*
 * A Logloss refinement step (leaf_estimation_iterations > 1): the
 * derivatives at pred + v[leaf] summed per leaf at the coordinator's scale,
 * which must keep every sum of this shard's rows' terms below 2^62.
 */
static int
bs_refine(bs_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	trainer    *T = &sh->T;
	int			nl = 1 << T->depth;
	bs_split	split;
	int64_t		sums[2 << GBML_BOOST_MAX_DEPTH];
	double		scale,
				v[1 << GBML_BOOST_MAX_DEPTH];
	int			rc;

	if (!sh->leaves_owed || !boost_refines_leaves(T))
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: a refinement step out of order");
	bs_read_split(sh, r, T->depth - 1, &split);
	scale = gbml_msg_get_f64(r);
	gbml_msg_get(r, v, sizeof(double) * (size_t) nl);
	for (int l = 0; l < nl && !r->bad; l++)
		r->bad = !isfinite(v[l]);
	if (r->bad || r->p != r->end || !(scale > 0 && isfinite(scale)) ||
		!(gbml_boost_logloss_derivative_bound(T->max_weight) * scale * (double) (T->train.n + 1) <= ldexp(1.0, 62)))
	{
		r->bad = true;
		return GBML_OK;
	}
	bs_use_split(sh, &split);
	if ((rc = boost_local_rows.refine_sums(T, (int) split.f, (int) split.j, v, scale, sums, sums + nl)) != GBML_OK)
		return rc;
	gbml_msg_put(reply, sums, sizeof(int64_t) * 2 * (size_t) nl);
	return GBML_OK;
}

/*
 * random_strength's noise scale, between a tree's gradients and its first
 * level: this shard's squares of every row's gradient at the coordinator's
 * scale, which must keep the sum below 2^62 (the union's maximum and row
 * count give at most that).
 */
static int
bs_gradient_squares(bs_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	double		scale = gbml_msg_get_f64(r),
				g = sh->local_max.g_all;
	int64_t		sum;
	int			rc;

	if (sh->phase != BS_TRAINING || sh->next_level != 0 || !(sh->params.random_strength > 0))
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: a noise scale request out of order");
	if (r->bad || r->p != r->end || !(scale > 0 && isfinite(scale)) ||
		!(g * g * scale * (double) (sh->T.train.n + 1) <= ldexp(1.0, 62)))
	{
		r->bad = true;
		return GBML_OK;
	}
	if ((rc = boost_local_rows.gradient_squares(&sh->T, scale, &sum)) != GBML_OK)
		return rc;
	gbml_msg_put_i64(reply, sum);
	return GBML_OK;
}

/* The tree's last split applied; its leaves' Newton hessians summed (YetiRank's leaf values). */
static int
bs_newton(bs_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	trainer    *T = &sh->T;
	bs_split	split;
	int64_t		sums[1 << GBML_BOOST_MAX_DEPTH];
	int			rc;

	if (!sh->leaves_owed || sh->T.leaves_applied || T->newton_hess == NULL)
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: Newton sums out of order");
	bs_read_split(sh, r, T->depth - 1, &split);
	if (r->bad || r->p != r->end)
	{
		r->bad = true;
		return GBML_OK;
	}
	bs_use_split(sh, &split);
	if ((rc = boost_newton_sums(T, (int) split.f, (int) split.j, sums)) != GBML_OK)
		return rc;
	gbml_msg_put(reply, sums, sizeof(int64_t) * ((size_t) 1 << T->depth));
	return GBML_OK;
}

/*
 * MultiClass: the tree of stream `stream` (iteration x classes + class) is
 * its class's; the first class's keeps the iteration's start, which a
 * dropped tree of a later class goes back to.
 */
static int
bs_select_class(bs_shard *sh, int64_t stream)
{
	trainer    *T = &sh->T;
	int			cls = (int) (stream % T->n_classes);
	size_t		bytes = sizeof(double) * (size_t) T->train.n * (size_t) T->n_classes;

	boost_select_class(T, cls);
	if (cls != 0)
		return GBML_OK;
	if (sh->iteration_start == NULL && (sh->iteration_start = gbml_alloc(sh->env, bytes)) == NULL)
		return sh->env->error_code;
	memcpy(sh->iteration_start, T->pred_all, bytes);
	sh->iteration_trees = T->forest.n_trees;
	return GBML_OK;
}

static int
bs_gradients(bs_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	bs_pending_msg pm;
	int64_t		iteration;
	boost_grad_max *m = &sh->local_max;
	int			rc;

	bs_read_pending(sh, r, &pm);
	iteration = gbml_msg_get_count(r, INT64_MAX / 2);
	if (r->bad || r->p != r->end || (sh->phase == BS_BINNED && pm.kind != BS_PENDING_BASE))
	{
		r->bad = true;
		return GBML_OK;
	}
	if ((rc = bs_apply_pending(sh, &pm)) != GBML_OK ||
		(sh->T.kind == GBML_LOSS_MULTICLASS && (rc = bs_select_class(sh, iteration)) != GBML_OK) ||
		(rc = boost_forest_reserve(&sh->T)) != GBML_OK ||	/* the tree that begins */
		(rc = boost_local_rows.gradients(&sh->T, iteration, m)) != GBML_OK)
		return rc;
	gbml_msg_put_f64(reply, m->g);
	gbml_msg_put_f64(reply, m->g_all);
	gbml_msg_put_f64(reply, m->h);
	gbml_msg_put_f64(reply, m->newton_h);
	gbml_msg_put_f64(reply, -m->hmin);	/* the coordinator folds every value by max */
	gbml_msg_put_f64(reply, m->hmax);
	sh->next_level = 0;
	return GBML_OK;
}

/*
 * The union's gradient maxima of a level-0 request: at least this shard's
 * own (else its fixed-point sums could overflow), finite.
 */
static bool
bs_maxima_cover(const boost_grad_max *u, const boost_grad_max *local)
{
	return isfinite(u->g) && isfinite(u->h) && isfinite(u->newton_h) && isfinite(u->hmin) && isfinite(u->hmax) &&
		u->g >= local->g && u->h >= local->h && u->newton_h >= local->newton_h &&
		(local->hmin > local->hmax || (u->hmin <= local->hmin && u->hmax >= local->hmax));
}

static int
bs_level(bs_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	trainer    *T = &sh->T;
	int64_t		level = gbml_msg_get_i64(r),
				slots,
				half;
	bs_split	split;
	int64_t		small[1 << (GBML_BOOST_MAX_DEPTH - 1)];
	boost_grad_max u;
	int			rc;

	if (sh->next_level < 0 || level != sh->next_level)
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: level %lld out of order", (long long) level);
	if (level > 0)
		bs_read_split(sh, r, (int) level - 1, &split);	/* the previous level's */
	else
	{
		split.f = gbml_msg_get_i64(r);	/* (no previous level: unused) */
		split.j = gbml_msg_get_i64(r);
		split.level = -1;
	}
	slots = gbml_msg_get_i64(r);
	half = level > 0 ? (int64_t) 1 << (level - 1) : 0;	/* level < depth <= GBML_BOOST_MAX_DEPTH */
	if (slots != (level == 0 ? 1 : half))
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: level %lld out of order", (long long) level);
	gbml_msg_get(r, small, sizeof(int64_t) * (size_t) slots);
	for (int64_t p = 0; p < slots && !r->bad; p++)
		r->bad = level > 0 && small[p] != p && small[p] != (p | half);
	if (level == 0)
	{
		u.g = gbml_msg_get_f64(r);
		u.h = gbml_msg_get_f64(r);
		u.newton_h = gbml_msg_get_f64(r);
		u.hmin = gbml_msg_get_f64(r);
		u.hmax = gbml_msg_get_f64(r);
		r->bad |= !bs_maxima_cover(&u, &sh->local_max);
	}
	if (r->bad || r->p != r->end)
	{
		r->bad = true;
		return GBML_OK;
	}
	if (level == 0)
		boost_fixed_point_plan(T, &u);
	else
		bs_use_split(sh, &split);
	for (int i = 0; i < GBML_BOOST_SLOT_TABLE; i++)
		T->slot_of[i] = -1;
	for (int64_t p = 0; p < slots; p++)
	{
		T->small[p] = (int16_t) (level == 0 ? 0 : small[p]);
		T->slot_of[T->small[p]] = (int16_t) p;
	}
	T->send_packed = true;
	if ((rc = boost_local_rows.level(T, (int) level, (int) split.f, (int) split.j, (int) slots)) != GBML_OK)
		return rc;
	if (T->packed)
	{
		/* packed sums add up across shards as they do across threads: one int64 a bin */
		for (int64_t i = 0; i < slots * T->total_bins; i++)
			gbml_msg_put_i64(reply, T->thist[i].g);
	}
	else
		gbml_msg_put(reply, T->thist, sizeof(gbml_boost_hist_bin) * (size_t) slots * (size_t) T->total_bins);
	sh->next_level = level + 1 < T->depth ? (int) level + 1 : -1;
	sh->leaves_owed = sh->next_level < 0;
	return GBML_OK;
}

/*
 * Whether request op reads the row side's arrays (bins, predictions): none
 * may come before the borders, nor with categorical inputs before every
 * derived feature's bins; one place for every such request.
 */
static bool
bs_reads_bins(int64_t op)
{
	return (op >= BS_OP_TERM_MAX && op <= BS_OP_LEVEL) || op == BS_OP_NEWTON || op == BS_OP_REFINE ||
		op == BS_OP_GRADIENT_SQUARES || op == BS_OP_SCORES;
}

static int
bs_step(void *state, const uint8_t *req, size_t len, gbml_strbuf *reply)
{
	bs_shard   *sh = state;
	gbml_msg_reader r = {req, req + len, false};
	int64_t		op = gbml_msg_get_i64(&r);
	int			rc;

	/* a shard without rows is left out of every step (the coordinator skips its replies) */
	if (!sh->answers)
		return GBML_OK;
	if (bs_reads_bins(op) && sh->phase <= BS_CATEGORIES)
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: request %lld before the borders%s", (long long) op,
						  sh->phase == BS_CATEGORIES ? " and the categorical features" : "");
	switch (op)
	{
		case BS_OP_HASHES:
		case BS_OP_GROUP_HASHES:
			rc = bs_hashes(sh, &r, op == BS_OP_GROUP_HASHES, reply);
			break;
		case BS_OP_SAMPLE:
			rc = bs_sample(sh, &r, reply);
			break;
		case BS_OP_BORDERS:
			rc = bs_borders(sh, &r);
			break;
		case BS_OP_TERM_MAX:
		case BS_OP_TERM_SUMS:
			rc = bs_terms(sh, &r, op == BS_OP_TERM_SUMS, reply);
			break;
		case BS_OP_GRADIENTS:
			rc = bs_gradients(sh, &r, reply);
			break;
		case BS_OP_LEVEL:
			rc = bs_level(sh, &r, reply);
			break;
		case BS_OP_GROUPS:
			rc = bs_groups(sh, reply);
			break;
		case BS_OP_GROUP_INDEX:
			rc = bs_group_index(sh, &r);
			break;
		case BS_OP_REFINE:
			rc = sh->phase == BS_TRAINING ? bs_refine(sh, &r, reply) :
				gbml_error(sh->env, GBML_EINVAL, "boost shard: a refinement step before the trees");
			break;
		case BS_OP_RANKS:
			rc = bs_ranks(sh, &r);
			break;
		case BS_OP_GRADIENT_SQUARES:
			rc = bs_gradient_squares(sh, &r, reply);
			break;
		case BS_OP_SCORES:
			rc = bs_scores(sh, &r, reply);
			break;
		case BS_OP_CAT_ROWS:
		case BS_OP_CAT_GROUP_SIZES:
		case BS_OP_CAT_INPUTS:
		case BS_OP_CAT_BINS:
			rc = bs_categories(sh, op, &r, reply);
			break;
		case BS_OP_NEWTON:
			rc = sh->phase == BS_TRAINING ? bs_newton(sh, &r, reply) :
				gbml_error(sh->env, GBML_EINVAL, "boost shard: Newton sums before the trees");
			break;
		default:
			return gbml_error(sh->env, GBML_EINVAL, "boost shard: unknown request %lld", (long long) op);
	}
	if (rc != GBML_OK)
		return rc;
	if (r.bad || r.p != r.end)
		return gbml_error(sh->env, GBML_EINVAL, "boost shard: malformed request %lld", (long long) op);
	return gbml_sb_status(reply);
}

const gbml_shard_ops gbml_boost_shard_ops = {
	.hello_magic = BS_SHARD_MAGIC,
	.takes_eval_split = true,
	.takes_eval_source = true,
	.takes_categorical = true,
	.open = bs_open,
	.step = bs_step,
	.close = bs_close,
};
