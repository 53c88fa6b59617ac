/*
 * test_boost_depthwise.c — unit tests of grow_policy Depthwise (trees whose
 * nodes each take their own split): the tree found on data whose best split
 * differs by branch, nodes left unsplit, the scorers (single row, batch,
 * categorical inputs) against the trainer's own predictions, the eval set,
 * determinism across thread counts and row order, the default
 * (SymmetricTree) keeping its bytes, and the trees section's node-split
 * flag checked against its bytes.
 */
#define _GNU_SOURCE				/* memmem */
#include "harness.h"
#include "boost.h"
#include "metrics.h"
#include "model_format.h"
#include "rng.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

typedef enum
{
	BRANCHES,					/* y = x0 > 0.5 ? 4 + [x1 > 0.3] : [x2 > 0.7] (+ small noise) */
	ONE_BRANCH,					/* y = x0 > 0.5 ? 4 x1 : 0: the left branch has nothing to split */
	BINARY						/* y = [x0 x1 + 0.5 x2 + noise > 0.45], some features missing */
} shape;

static void
make_rows(gbml_dataset *ds, gbml_env *env, shape kind, int64_t n, int d, uint64_t seed, bool reversed)
{
	gbml_rng	rng;
	float	   *x = malloc(sizeof(float) * d);

	gbml_dataset_init(ds, true);
	gbml_rng_seed(&rng, seed);
	for (int64_t i = 0; i < n; i++)
	{
		gbml_row	row = {0};
		double		noise = gbml_rng_uniform(&rng) - 0.5;
		double		y = 0;

		/* on a grid of 20 values (every threshold below falls between two), except BINARY's */
		for (int j = 0; j < d; j++)
			x[j] = kind == BINARY ? (float) gbml_rng_uniform(&rng) :
				(float) ((floor(gbml_rng_uniform(&rng) * 20) + 0.5) / 20);
		switch (kind)
		{
			case BRANCHES:
				y = x[0] > 0.5f ? 4.0 + (x[1] > 0.3f) : (double) (x[2] > 0.7f);
				y += 0.01 * noise;
				break;
			case ONE_BRANCH:
				y = x[0] > 0.5f ? 4.0 * x[1] : 0.0;
				break;
			case BINARY:
				y = (x[0] * x[1] + 0.5 * x[2] + 0.3 * noise > 0.45) ? 1 : 0;
				if (gbml_rng_uniform(&rng) < 0.05)
					x[3] = NAN;
				break;
		}
		row.x = x;
		row.n_features = d;
		row.label = (float) y;
		row.group_is_null = true;
		row.weight_is_null = true;
		CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK);
	}
	free(x);
	if (reversed)
		for (int a = 0, b = ds->n_chunks - 1; a < b; a++, b--)
		{
			gbml_chunk *t = ds->chunks[a];

			ds->chunks[a] = ds->chunks[b];
			ds->chunks[b] = t;
		}
}

/* Mean log loss of probabilities p against 0/1 labels. */
static double
logloss(const double *p, const float *label, int64_t n)
{
	double		s = 0;

	for (int64_t i = 0; i < n; i++)
		s -= label[i] > 0.5f ? log(p[i]) : log(1 - p[i]);
	return s / (double) n;
}

/* Whether the model's PARAMS section names key. */
static bool
params_name(gbml_env *env, const uint8_t *model, size_t len, const char *key)
{
	size_t		off,
				slen;

	CHECK(tu_section_offset(env, model, len, GBML_SECTION_PARAMS, &off, &slen));
	return memmem(model + off, slen, key, strlen(key)) != NULL;
}

/* The batch scorer gives every row the single-row scorer's bits. */
static bool
batch_matches(const gbml_boost_forest *f, const gbml_dataset *ds, const double *single, gbml_env *env)
{
	float	   *xs = malloc(sizeof(float) * ds->n_rows * ds->n_features);
	double	   *out = malloc(sizeof(double) * ds->n_rows);
	int64_t		i = 0;
	bool		same = true;

	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++, i++)
			memcpy(xs + i * ds->n_features, gbml_dataset_row(ds, c, r), sizeof(float) * ds->n_features);
	CHECK(gbml_boost_forest_predict_batch(f, xs, ds->n_rows, ds->n_features, out, env) == GBML_OK);
	for (i = 0; i < ds->n_rows; i++)
		if (memcmp(&out[i], &single[i], sizeof(double)) != 0)
			same = false;
	free(xs);
	free(out);
	return same;
}

/*
 * One tree of depth 2 on data whose left and right halves depend on
 * different features: the root splits x0, its left node x2 near 0.7, its
 * right node x1 near 0.3 — a split per level cannot fit it, a split per
 * node fits it exactly.
 */
TEST(boost_depthwise_nodes_take_their_own_splits)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL,
			   *sym = NULL;
	size_t		len,
				slen;
	gbml_scorer sc;
	gbml_param_value v[] = {tu_num("iterations", 1), tu_num("depth", 2), tu_num("learning_rate", 1),
	tu_num("l2_leaf_reg", 0), tu_str("grow_policy", "Depthwise")};

	gbml_env_init_malloc(&env, 2);
	make_rows(&ds, &env, BRANCHES, 4000, 4, 3, false);
	CHECK(gbml_train_values(&env, "boost", v, 5, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_train_values(&env, "boost", v, 4, &ds, NULL, &sym, &slen) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	{
		const gbml_boost_forest *f = &((const gbml_boost_model *) sc.handle)->forest;

		CHECK(f->n_trees == 1 && f->depth[0] == 2 && f->split_off[1] == 3);
		CHECK(f->feature[0] == 0 && fabsf(f->border[0] - 0.5f) < 0.026f);
		CHECK(f->feature[1] == 2 && fabsf(f->border[1] - 0.7f) < 0.026f);	/* x0 <= 0.5: bits 0 */
		CHECK(f->feature[2] == 1 && fabsf(f->border[2] - 0.3f) < 0.026f);	/* x0 > 0.5 */
	}
	/* the exact fit against the symmetric tree's */
	CHECK(tu_meta_number(&env, model, len, "train_RMSE") < 0.01);
	CHECK(tu_meta_number(&env, sym, slen, "train_RMSE") > 0.2);
	/* recorded: the policy in the params, the node splits in the dump */
	CHECK(params_name(&env, model, len, "\"grow_policy\":\"Depthwise\""));
	{
		gbml_strbuf sb;

		gbml_sb_init(&sb, &env);
		CHECK(gbml_algorithm_boost.to_json(sc.handle, &sb) == GBML_OK);
		gbml_sb_append(&sb, "", 1);
		CHECK(strstr(sb.data, "\"depth\":2,\"node_splits\":true,\"splits\":[") != NULL);
		gbml_sb_free(&sb);
	}
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_free(&env, sym);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/*
 * The left half has a constant label: nodes holding only its rows find no
 * split with gain and send every row left (border Infinity, gain 0); the
 * scorers agree with the trainer's own predictions.
 */
TEST(boost_depthwise_unsplit_nodes_send_rows_left)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_scorer sc;
	gbml_param_value v[] = {tu_num("iterations", 20), tu_num("depth", 4), tu_num("learning_rate", 0.5),
	tu_str("grow_policy", "Depthwise")};
	double	   *pred;
	float	   *label;
	int			unsplit = 0;

	gbml_env_init_malloc(&env, 2);
	make_rows(&ds, &env, ONE_BRANCH, 3000, 3, 8, false);
	CHECK(gbml_train_values(&env, "boost", v, 4, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	{
		const gbml_boost_model *m = sc.handle;
		const gbml_boost_forest *f = &m->forest;

		/* a node splits only with gain (a border leaving one side empty is none) */
		for (int64_t s = 0; s < f->split_off[f->n_trees]; s++)
			if (isinf(f->border[s]))
			{
				unsplit++;
				CHECK(m->gain[s] == 0);
			}
			else
				CHECK(m->gain[s] > 0);
		CHECK(f->split_off[f->n_trees] == (int64_t) f->n_trees * 15);
	}
	CHECK(unsplit > 0);
	CHECK(tu_meta_number(&env, model, len, "train_RMSE") < 0.1 * 1.2);	/* the labels' deviation is about 1.2 */
	pred = malloc(sizeof(double) * ds.n_rows);
	label = malloc(sizeof(float) * ds.n_rows);
	CHECK(tu_score_dataset(&sc, &env, &ds, GBML_OUT_SCORE, pred, label) == GBML_OK);
	CHECK_NEAR(tu_meta_number(&env, model, len, "train_RMSE"), gbml_rmse(pred, label, NULL, ds.n_rows), 1e-12);
	CHECK(batch_matches(&((const gbml_boost_model *) sc.handle)->forest, &ds, pred, &env));
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	free(pred);
	free(label);
	CHECK(env.memory_used == 0);
}

/*
 * Logloss with missing values, subsampling, further Newton steps and an eval
 * set: the scorer's probabilities give the trainer's train and eval metrics
 * (the eval rows are scored per tree from their bins), and the batch scorer
 * matches the single-row one.
 */
TEST(boost_depthwise_scorers_match_the_trainer)
{
	gbml_env	env;
	gbml_dataset ds,
				ev;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_scorer sc;
	gbml_param_value v[] = {tu_num("iterations", 40), tu_num("depth", 5), tu_num("learning_rate", 0.2),
		tu_str("loss", "Logloss"), tu_num("subsample", 0.8), tu_num("leaf_estimation_iterations", 3),
	tu_bool("use_best_model", false), tu_str("grow_policy", "Depthwise")};
	double	   *p,
			   *pe;
	float	   *label,
			   *le;

	gbml_env_init_malloc(&env, 2);
	make_rows(&ds, &env, BINARY, 5000, 5, 21, false);
	make_rows(&ev, &env, BINARY, 1500, 5, 22, false);
	CHECK(gbml_train_values(&env, "boost", v, 8, &ds, &ev, &model, &len) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	p = malloc(sizeof(double) * ds.n_rows);
	label = malloc(sizeof(float) * ds.n_rows);
	pe = malloc(sizeof(double) * ev.n_rows);
	le = malloc(sizeof(float) * ev.n_rows);
	CHECK(tu_score_dataset(&sc, &env, &ds, GBML_OUT_PROBA, p, label) == GBML_OK);
	CHECK(tu_score_dataset(&sc, &env, &ev, GBML_OUT_PROBA, pe, le) == GBML_OK);
	CHECK_NEAR(tu_meta_number(&env, model, len, "train_Logloss"), logloss(p, label, ds.n_rows), 1e-9);
	CHECK_NEAR(tu_meta_number(&env, model, len, "eval_value"), logloss(pe, le, ev.n_rows), 1e-9);
	CHECK(logloss(pe, le, ev.n_rows) < 0.45);
	CHECK(tu_score_dataset(&sc, &env, &ds, GBML_OUT_SCORE, p, label) == GBML_OK);
	CHECK(batch_matches(&((const gbml_boost_model *) sc.handle)->forest, &ds, p, &env));
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&ev, &env);
	free(p);
	free(pe);
	free(label);
	free(le);
	CHECK(env.memory_used == 0);
}

/* The same rows in another order on 1, 2 and 3 threads: the same model bytes. */
TEST(boost_depthwise_deterministic_across_threads)
{
	const char *losses[] = {"RMSE", "Logloss"};

	for (int k = 0; k < 2; k++)
	{
		uint8_t    *models[3] = {NULL, NULL, NULL};
		size_t		lens[3];
		gbml_env	envs[3];
		gbml_param_value v[] = {tu_num("iterations", 10), tu_num("depth", 6), tu_num("subsample", 0.7),
			tu_str("loss", losses[k]), tu_num("random_seed", 9), tu_num("random_strength", 1),
		tu_num("leaf_estimation_iterations", k == 1 ? 3 : 1), tu_str("grow_policy", "Depthwise")};

		for (int i = 0; i < 3; i++)
		{
			gbml_dataset ds;

			gbml_env_init_malloc(&envs[i], i + 1);
			make_rows(&ds, &envs[i], k == 0 ? BRANCHES : BINARY, 20000, 6, 4, i == 1);
			CHECK(gbml_train_values(&envs[i], "boost", v, 8, &ds, NULL, &models[i], &lens[i]) == GBML_OK);
			gbml_dataset_free(&ds, &envs[i]);
		}
		CHECK(models[0] && models[1] && models[2]);
		if (models[0] && models[1] && models[2])
		{
			CHECK(lens[0] == lens[1] && memcmp(models[0], models[1], lens[0]) == 0);
			CHECK(lens[0] == lens[2] && memcmp(models[0], models[2], lens[0]) == 0);
		}
		for (int i = 0; i < 3; i++)
			gbml_free(&envs[i], models[i]);
	}
}

/* grow_policy SymmetricTree is the default: the same bytes as not naming it, and not recorded. */
TEST(boost_symmetric_tree_is_the_default)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *a = NULL,
			   *b = NULL;
	size_t		alen,
				blen;
	gbml_param_value v[] = {tu_num("iterations", 5), tu_num("depth", 3), tu_str("grow_policy", "SymmetricTree")};

	gbml_env_init_malloc(&env, 2);
	make_rows(&ds, &env, BRANCHES, 2000, 3, 5, false);
	CHECK(gbml_train_values(&env, "boost", v, 3, &ds, NULL, &a, &alen) == GBML_OK);
	CHECK(gbml_train_values(&env, "boost", v, 2, &ds, NULL, &b, &blen) == GBML_OK);
	CHECK(alen == blen && memcmp(a, b, alen) == 0);
	CHECK(!params_name(&env, a, alen, "grow_policy"));
	gbml_free(&env, a);
	gbml_free(&env, b);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/*
 * The trees section's node-split flag is checked against its bytes: a
 * Depthwise tree read as symmetric (flag cleared), or a symmetric one read
 * as Depthwise (flag set), is a clear error, not a misread model.
 */
TEST(boost_depthwise_flag_disagreeing_with_the_bytes_is_rejected)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_param_value v[] = {tu_num("iterations", 2), tu_num("depth", 3), tu_str("grow_policy", "Depthwise")};

	gbml_env_init_malloc(&env, 1);
	make_rows(&ds, &env, BRANCHES, 2000, 3, 6, false);
	for (int nodes = 0; nodes < 2; nodes++)
	{
		uint8_t    *model = NULL,
				   *bad = NULL;
		size_t		len,
					blen;
		gbml_model_reader r;
		const uint8_t *data;
		size_t		dlen;
		uint8_t    *body;
		uint32_t	word;
		gbml_scorer sc;

		CHECK(gbml_train_values(&env, "boost", v, nodes ? 3 : 2, &ds, NULL, &model, &len) == GBML_OK);
		CHECK(gbml_model_open(&r, &env, model, len) == GBML_OK);
		CHECK(gbml_model_find(&r, GBML_SECTION_BOOST_TREES, &data, &dlen));
		body = malloc(dlen);
		memcpy(body, data, dlen);
		memcpy(&word, body, 4);
		CHECK((word & GBML_BOOST_TREE_NODE_SPLITS) == (nodes ? GBML_BOOST_TREE_NODE_SPLITS : 0u));
		word ^= GBML_BOOST_TREE_NODE_SPLITS;
		memcpy(body, &word, 4);
		CHECK(tu_rebuild(&env, &r, GBML_SECTION_BOOST_TREES, body, dlen, &bad, &blen) == GBML_OK);
		CHECK(bad != NULL && gbml_scorer_load(&sc, &env, bad, blen) == GBML_ECORRUPT);
		free(body);
		gbml_free(&env, bad);
		gbml_free(&env, model);
	}
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}
