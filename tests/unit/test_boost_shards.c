/*
 * test_boost_shards.c — boosting across shards (boost_shards.c,
 * boost_shard.c) with the shards in this process: rows dealt to 2 or 3
 * shards (one of them empty, one shard's rows in files, duplicates on two
 * shards) train to the same model bytes as all of them on one server, for
 * RMSE and Logloss, with weights and missing values, with the border
 * sample drawn from the union's order (more rows than border_sample_size)
 * and with every row the sample, and for the ranking losses with every
 * query on one shard (a query on two is an error naming it), for
 * Depthwise trees, for MultiClass (a shard of one class too) and with an
 * eval set (eval_fraction: early stopping and the best model's cut; a
 * shard whose every row it holds out; MultiClass eval rows of a class only
 * another shard trains); what cannot train across servers yet is an error
 * naming it; a shard that fails mid-training ends the fit with an
 * error naming it and leaves no memory behind.  The exact term sums behind
 * the base score and the train metrics are checked split in pieces.
 */
#include "harness.h"
#include "boost_loss.h"
#include "chunk_store_file.h"
#include "rng.h"
#include "test_shards_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct bsh_data
{
	int64_t		n;
	int			d;
	bool		binary;			/* labels 0/1, else real */
	bool		weighted;
	bool		missing;		/* some NaN features */
	int			distinct;		/* > 0: rows repeat this many points */
	int			query_rows;		/* > 0: rows i / query_rows make a query (relevance labels 0..4) */
	bool		split_queries;	/* deal rows, not queries, to the shards */
	int			classes;		/* > 0: class ids 0 .. classes - 1 (MultiClass) */
	int64_t		first;			/* the rows are those from this index on (an eval set's: other rows) */
	int64_t		lone;			/* > 0: the row lone - 1 (its query) alone on the last shard */
	bool		lone_joins;		/* ... not alone: with the last shard's share (2 shards) */
	bool		class0_apart;	/* MultiClass: class 0's rows alone on the last shard */
} bsh_data;

static void
bsh_row(const bsh_data *s, int64_t i, float *x, float *label, float *weight)
{
	int64_t		p = s->first + (s->distinct > 0 ? i % s->distinct : i);
	gbml_rng	rng;
	double		t = 0;

	gbml_rng_seed(&rng, 4242 + (uint64_t) p);
	for (int j = 0; j < s->d; j++)
	{
		x[j] = (float) (gbml_rng_uniform(&rng) * 4 - 2 + (j == 1 ? 50 : 0));
		t += (j % 3 == 0 ? 1.5 : -0.7) * x[j] * (j < 3 ? 1 : 0.2);
		if (s->missing && j == 2 && p % 7 == 0)
			x[j] = NAN;
	}
	t += gbml_rng_uniform(&rng) - 0.5;
	/* t is about -35 +- 6 (feature 1 sits near 50): binary labels split near the middle */
	*label = s->binary ? (float) (t > -35 ? 1 : 0) : (float) t;
	if (s->query_rows > 0)
		*label = (float) ((int64_t) fabs(t * 3) % 5);
	if (s->classes > 0)
		*label = (float) fmin(s->classes - 1, fmax(0, floor((t + 41) / 12 * s->classes)));
	*weight = s->weighted ? (float) (0.5 + (p % 4)) : 1.0f;
}

static void
bsh_fill(gbml_dataset *ds, gbml_env *env, int shard, int n_shards, bool to_files, void *arg)
{
	const bsh_data *s = arg;
	float	   *x = malloc(sizeof(float) * (size_t) s->d);

	gbml_dataset_init(ds, s->missing);
	ds->chunk_rows = 500;
	if (to_files)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t i = 0; i < s->n; i++)
	{
		gbml_row	row = {0};
		/* uneven shares; the last of three shards gets nothing */
		int64_t		unit = s->query_rows > 0 && !s->split_queries ? i / s->query_rows : i;
		int			owner = n_shards == 3 ? (int) ((unit * 7) % 5 < 3 ? 0 : 1) : (int) ((unit * 13) % 3 == 0);

		bsh_row(s, i, x, &row.label, &row.weight);
		/* MultiClass: the top class only on shard 0 (the others see fewer classes than the union) */
		if (s->classes > 0 && row.label == (float) (s->classes - 1))
			owner = 0;
		if (s->class0_apart)
			owner = row.label == 0 ? n_shards - 1 : 0;
		if (s->lone > 0)
		{
			int64_t		lone_unit = s->query_rows > 0 ? (s->lone - 1) / s->query_rows : s->lone - 1;

			owner = unit == lone_unit ? n_shards - 1 : owner == n_shards - 1 && !s->lone_joins ? 0 : owner;
		}
		if (shard >= 0 && owner != shard)
			continue;
		if (s->query_rows > 0)
			row.group = 1000 + (i / s->query_rows) * 3;	/* ids are not positions */
		row.group_is_null = s->query_rows == 0;
		row.x = x;
		row.n_features = s->d;
		row.weight_is_null = !s->weighted;
		CHECK(gbml_dataset_append(ds, env, &row, false) == GBML_OK);
	}
	free(x);
}

/* Whether two trainings on one server (params a, b) give different model bytes: what a same-bytes test needs. */
static bool
bsh_bytes_differ(const bsh_data *s, const gbml_param_value *a, int na, const gbml_param_value *b, int nb)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *m[2] = {NULL, NULL};
	size_t		len[2] = {0, 0};
	bool		differ;

	gbml_env_init_malloc(&env, 2);
	bsh_fill(&ds, &env, -1, 1, false, (void *) s);
	differ = tu_train("boost", &ds, &env, a, na, &m[0], &len[0]) == GBML_OK &&
		tu_train("boost", &ds, &env, b, nb, &m[1], &len[1]) == GBML_OK &&
		(len[0] != len[1] || memcmp(m[0], m[1], len[0]) != 0);
	gbml_dataset_free(&ds, &env);
	free(m[0]);
	free(m[1]);
	return differ;
}

TEST(boost_shards_rmse_sampled_borders_same_bytes)
{
	/* more rows than border_sample_size: the sample is drawn over the union's order, in pages */
	bsh_data	s = {4100, 7, false, false, false, 0, 0, false, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_num("iterations", 12), tu_num("depth", 4), tu_num("border_sample_size", 1500),
	tu_num("random_seed", 5)};

	tu_check_same_bytes("boost", "RMSE, sampled borders", bsh_fill, &s, v, 4);
}

TEST(boost_shards_logloss_weights_missing_same_bytes)
{
	/* every row is the sample; weights (unpacked histograms), NaN features (a missing border) */
	bsh_data	s = {2600, 5, true, true, true, 0, 0, false, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_num("iterations", 10), tu_num("depth", 5), tu_str("loss", "Logloss"),
	tu_num("border_count", 20)};

	tu_check_same_bytes("boost", "Logloss, weights, missing values", bsh_fill, &s, v, 4);
}

TEST(boost_shards_logloss_refined_leaves_same_bytes)
{
	/* leaf_estimation_iterations 3: two refinement steps per tree, each a round trip */
	bsh_data	s = {2200, 5, true, true, false, 0, 0, false, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_num("iterations", 7), tu_num("depth", 4), tu_str("loss", "Logloss"),
	tu_num("leaf_estimation_iterations", 3)};

	tu_check_same_bytes("boost", "Logloss, refined leaves", bsh_fill, &s, v, 4);
}

TEST(boost_shards_logloss_scored_on_weights_same_bytes)
{
	/* score_function L2: one Newton step from the shards' hessian sums, then three from the rows */
	bsh_data	s = {2200, 5, true, true, true, 0, 0, false, 0, 0, 0, false, false};
	gbml_param_value v1[] = {tu_num("iterations", 6), tu_num("depth", 4), tu_str("loss", "Logloss"),
	tu_str("score_function", "L2")};
	gbml_param_value v3[] = {tu_num("iterations", 6), tu_num("depth", 4), tu_str("loss", "Logloss"),
	tu_str("score_function", "L2"), tu_num("leaf_estimation_iterations", 3)};

	tu_check_same_bytes("boost", "Logloss scored on weights", bsh_fill, &s, v1, 4);
	tu_check_same_bytes("boost", "Logloss scored on weights, refined leaves", bsh_fill, &s, v3, 5);
}

TEST(boost_shards_duplicates_rmse_metric_same_bytes)
{
	/* 40 distinct rows repeated on both shards; depth 1 (the root is the only level) */
	bsh_data	s = {3000, 3, false, false, false, 40, 0, false, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_num("iterations", 6), tu_num("depth", 1), tu_num("border_sample_size", 1000),
	tu_str("eval_metric", "Logloss")};

	/* Logloss as the metric of a regression needs labels in [0, 1]: theirs are not, so binary labels */
	s.binary = true;
	tu_check_same_bytes("boost", "duplicates, depth 1", bsh_fill, &s, v, 4);
}

TEST(boost_shards_yetirank_same_bytes)
{
	/* queries of 9 rows, each on one shard; the default loss with group ids (YetiRank, its Newton sums) */
	bsh_data	s = {3600, 6, false, false, false, 0, 9, false, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_num("iterations", 8), tu_num("depth", 4), tu_num("border_sample_size", 1200),
	tu_num("random_seed", 3)};

	tu_check_same_bytes("boost", "YetiRank, sampled borders", bsh_fill, &s, v, 4);
}

TEST(boost_shards_ranking_losses_same_bytes)
{
	const char *losses[] = {"QueryRMSE", "PairLogit", "LambdaMART"};
	bsh_data	s = {1800, 4, false, true, false, 0, 6, false, 0, 0, 0, false, false};

	for (int i = 0; i < 3; i++)
	{
		gbml_param_value v[] = {tu_num("iterations", 5), tu_num("depth", 3), tu_str("loss", losses[i])};

		tu_check_same_bytes("boost", losses[i], bsh_fill, &s, v, 3);
	}
}

TEST(boost_shards_query_on_two_shards_is_named)
{
	bsh_data	s = {900, 3, false, false, false, 0, 10, true, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_num("iterations", 3)};
	char		error[512];
	size_t		len;
	uint8_t    *m = tu_train_sharded("boost", bsh_fill, &s, 2, v, 1, 0, &len, error, sizeof(error));

	CHECK(m == NULL && strstr(error, "has rows on shards shard1 and shard2") != NULL &&
		  strstr(error, "every query's rows on one shard") != NULL);
	if (m != NULL || strstr(error, "has rows on shards") == NULL)
		fprintf(stderr, "a query on two shards: %s\n", m ? "trained" : error);
	free(m);
}

TEST(boost_shards_subsample_same_bytes)
{
	/* rows drawn by their global index: with a sampled border set (the ranks come with the order) and without */
	bsh_data	s = {3100, 5, false, false, false, 0, 0, false, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_num("iterations", 8), tu_num("depth", 3), tu_num("subsample", 0.6),
	tu_num("border_sample_size", 1000), tu_num("random_seed", 9)};
	bsh_data	q = {2400, 4, false, false, false, 0, 8, false, 0, 0, 0, false, false};
	gbml_param_value w[] = {tu_num("iterations", 6), tu_num("depth", 3), tu_num("subsample", 0.5)};

	tu_check_same_bytes("boost", "RMSE, subsample, sampled borders", bsh_fill, &s, v, 5);
	tu_check_same_bytes("boost", "RMSE, subsample, every row the sample", bsh_fill, &s, v, 3);
	/* queries drawn by their global index */
	tu_check_same_bytes("boost", "YetiRank, subsample", bsh_fill, &q, w, 3);
}

/*
 * subsample with one row alone on the last shard: its order is whole at
 * that row's place, and the coordinator's later pages of global indices
 * (700 rows a page here) bring it empty ones, which it refused as "global
 * row indices out of order" (the differential probe, seed 311, at 2 MB,
 * where the pages are small; a shard of over 1M rows would too).
 */
TEST(boost_shards_subsample_a_lone_row_takes_empty_pages)
{
	bsh_data	s = {3100, 5, false, false, false, 0, 0, false, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_num("iterations", 4), tu_num("depth", 3), tu_num("subsample", 0.6),
	tu_num("random_seed", 9)};

	s.lone = 40;
	tu_check_same_bytes("boost", "RMSE, subsample, a lone row on a shard", bsh_fill, &s, v, 4);
}

/*
 * random_strength: the noise scale's maximum (with the gradients' maxima)
 * and sum of squares (one more round trip a tree) over every row, drawn by
 * subsample or not, come from the shards, so the split draws and the bytes
 * are one server's — and the noise is there: the bytes differ from the
 * same training without it.
 */
TEST(boost_shards_random_strength_same_bytes)
{
	bsh_data	s = {2600, 5, true, true, true, 0, 0, false, 0, 0, 0, false, false};
	bsh_data	q = {1800, 4, false, false, false, 0, 6, false, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_num("iterations", 8), tu_num("depth", 4), tu_str("loss", "Logloss"),
	tu_str("score_function", "L2"), tu_num("random_seed", 7), tu_num("subsample", 0.7),
	tu_num("random_strength", 1)};
	gbml_param_value w[] = {tu_num("iterations", 5), tu_num("depth", 3), tu_num("random_strength", 3)};

	tu_check_same_bytes("boost", "Logloss scored on weights, subsample, random_strength 1", bsh_fill, &s, v, 7);
	tu_check_same_bytes("boost", "YetiRank, random_strength 3", bsh_fill, &q, w, 3);
	CHECK(bsh_bytes_differ(&s, v, 6, v, 7));
}

/*
 * grow_policy Depthwise: each level's node splits go down with the next
 * request (the level pass, the Newton sums, a refinement step, the next
 * tree's gradients), so the trees are one server's: with unsplit nodes
 * (min_child_weight), subsample and random_strength, YetiRank's Newton
 * sums per leaf, Logloss's refinement steps, a depth-1 tree.
 */
TEST(boost_shards_depthwise_same_bytes)
{
	bsh_data	s = {3100, 5, false, true, true, 0, 0, false, 0, 0, 0, false, false};
	bsh_data	b = {2200, 5, true, true, false, 0, 0, false, 0, 0, 0, false, false};
	bsh_data	q = {1800, 4, false, false, false, 0, 6, false, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_str("grow_policy", "Depthwise"), tu_num("iterations", 8), tu_num("depth", 5),
		tu_num("min_child_weight", 40), tu_num("subsample", 0.7), tu_num("random_strength", 1),
	tu_num("border_sample_size", 1000)};
	gbml_param_value r[] = {tu_str("grow_policy", "Depthwise"), tu_num("iterations", 6), tu_num("depth", 4),
	tu_str("loss", "Logloss"), tu_num("leaf_estimation_iterations", 3)};
	gbml_param_value w[] = {tu_str("grow_policy", "Depthwise"), tu_num("iterations", 6), tu_num("depth", 3)};
	gbml_param_value one[] = {tu_str("grow_policy", "Depthwise"), tu_num("iterations", 5), tu_num("depth", 1)};
	gbml_param_value sym[] = {tu_str("grow_policy", "SymmetricTree"), tu_num("iterations", 8), tu_num("depth", 5),
		tu_num("min_child_weight", 40), tu_num("subsample", 0.7), tu_num("random_strength", 1),
	tu_num("border_sample_size", 1000)};

	tu_check_same_bytes("boost", "Depthwise RMSE, weights, missing, unsplit nodes, subsample, random_strength",
						bsh_fill, &s, v, 7);
	tu_check_same_bytes("boost", "Depthwise Logloss, refined leaves", bsh_fill, &b, r, 5);
	tu_check_same_bytes("boost", "Depthwise YetiRank (Newton sums per leaf)", bsh_fill, &q, w, 3);
	tu_check_same_bytes("boost", "Depthwise, depth 1", bsh_fill, &s, one, 3);
	/* the Depthwise trees are not the symmetric ones (the test would pass for a protocol that ignored the policy) */
	CHECK(bsh_bytes_differ(&s, v, 7, sym, 7));
}

/*
 * A tree whose root cannot split (every row the same point: no feature has
 * a border) is dropped and the training ends, on the shards too (the next
 * request says so): the model of one server, with no trees.
 */
TEST(boost_shards_root_without_split_same_bytes)
{
	bsh_data	s = {900, 3, false, false, false, 1, 0, false, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_num("iterations", 4), tu_num("depth", 3)};
	gbml_param_value w[] = {tu_num("iterations", 4), tu_num("depth", 1), tu_str("grow_policy", "Depthwise")};

	tu_check_same_bytes("boost", "symmetric, no border", bsh_fill, &s, v, 2);
	tu_check_same_bytes("boost", "Depthwise depth 1, no border", bsh_fill, &s, w, 3);
}

/*
 * MultiClass: the union's class count and the classes' base scores from
 * exact sums, each tree's class from its stream, the metrics' exact sums:
 * one server's bytes (the top class on one shard only, subsample,
 * random_strength, Depthwise trees, Accuracy as the metric).  A class
 * whose first tree cannot split ends the training and drops the
 * iteration's earlier trees, which the shards then take back.
 */
TEST(boost_shards_multiclass_same_bytes)
{
	bsh_data	s = {3100, 5, false, true, true, 0, 0, false, 3, 0, 0, false, false};
	bsh_data	four = {2000, 4, false, false, false, 0, 0, false, 4, 0, 0, false, false};
	gbml_param_value v[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 6), tu_num("depth", 4),
		tu_num("subsample", 0.7), tu_num("random_strength", 1), tu_num("border_sample_size", 1000),
	tu_str("eval_metric", "Accuracy")};
	gbml_param_value d[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 5), tu_num("depth", 3),
	tu_str("grow_policy", "Depthwise")};
	/* class 5 has no row: its trees' gradients are all alike, so its first tree cannot split */
	gbml_param_value absent[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 5), tu_num("depth", 3),
	tu_str("grow_policy", "Depthwise"), tu_num("classes_count", 6)};

	tu_check_same_bytes("boost", "MultiClass, weights, missing, subsample, random_strength, Accuracy",
						bsh_fill, &s, v, 7);
	tu_check_same_bytes("boost", "MultiClass, Depthwise", bsh_fill, &four, d, 4);
	tu_check_same_bytes("boost", "MultiClass, a class without rows (the iteration dropped)", bsh_fill, &four,
						absent, 5);
}

/*
 * eval_fraction across servers: each shard holds out the rows (queries) one
 * server would, by their contents; the eval metric each iteration is an
 * exact sum over the shards' eval rows, early stopping stops where one
 * server stops, and use_best_model's cut rebuilds the shards' predictions
 * from the trees they kept.  Each case first checks that the cut happens
 * on one server (the model differs from the one keeping every tree).
 */
static void
bsh_check_eval(const char *name, const bsh_data *s, const gbml_param_value *v, int nv)
{
	gbml_param_value all[16];

	CHECK(nv < 15);
	memcpy(all, v, sizeof(gbml_param_value) * (size_t) nv);
	all[nv] = tu_bool("use_best_model", false);
	CHECK(bsh_bytes_differ(s, v, nv, all, nv + 1));
	tu_check_same_bytes("boost", name, bsh_fill, (void *) s, v, nv);
}

/* A check of a training with an eval set: name (prefixed), its rows, its params. */
typedef void (*bsh_eval_check) (const char *name, bsh_data s, const gbml_param_value *v, int nv);

/*
 * The eval-set cases every eval check runs, each name after prefix: RMSE
 * with early stopping, subsample and a sampled border set; Logloss with
 * Depthwise trees and refined leaves; YetiRank's eval queries with NDCG@5;
 * MultiClass.
 */
static void
bsh_eval_cases(const char *prefix, bsh_eval_check check)
{
	bsh_data	r = {3000, 5, false, true, true, 0, 0, false, 0, 0, 0, false, false};
	bsh_data	b = {2500, 5, true, true, false, 0, 0, false, 0, 0, 0, false, false};
	bsh_data	q = {3600, 5, false, false, false, 0, 9, false, 0, 0, 0, false, false};
	bsh_data	mc = {2000, 4, false, false, false, 0, 0, false, 4, 0, 0, false, false};
	gbml_param_value rmse[] = {tu_num("iterations", 60), tu_num("depth", 4), tu_num("learning_rate", 0.6),
		tu_num("eval_fraction", 0.25), tu_num("early_stopping_rounds", 4), tu_num("subsample", 0.8),
	tu_num("border_sample_size", 1000)};
	gbml_param_value logloss[] = {tu_str("loss", "Logloss"), tu_num("iterations", 40), tu_num("depth", 4),
		tu_num("learning_rate", 0.7), tu_num("eval_fraction", 0.3), tu_num("early_stopping_rounds", 3),
	tu_str("grow_policy", "Depthwise"), tu_num("leaf_estimation_iterations", 2)};
	gbml_param_value yeti[] = {tu_num("iterations", 30), tu_num("depth", 4), tu_num("learning_rate", 0.9),
	tu_num("eval_fraction", 0.3), tu_num("early_stopping_rounds", 3), tu_num("eval_k", 5)};
	gbml_param_value multi[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 25), tu_num("depth", 4),
	tu_num("learning_rate", 0.9), tu_num("eval_fraction", 0.25), tu_num("early_stopping_rounds", 3)};
	char		name[160];

	snprintf(name, sizeof(name), "%sRMSE, early stopping, subsample, weights, missing, sampled borders", prefix);
	check(name, r, rmse, 7);
	snprintf(name, sizeof(name), "%sLogloss, Depthwise, refined leaves, early stopping", prefix);
	check(name, b, logloss, 8);
	snprintf(name, sizeof(name), "%sYetiRank, eval queries, NDCG@5, early stopping", prefix);
	check(name, q, yeti, 6);
	snprintf(name, sizeof(name), "%sMultiClass, early stopping", prefix);
	check(name, mc, multi, 6);
}

static void
bsh_check_eval_case(const char *name, bsh_data s, const gbml_param_value *v, int nv)
{
	bsh_check_eval(name, &s, v, nv);
}

TEST(boost_shards_eval_set_same_bytes)
{
	bsh_data	dup = {2400, 4, false, false, false, 150, 0, false, 0, 0, 0, false, false};
	bsh_data	mc = {2000, 4, false, false, false, 0, 0, false, 4, 0, 0, false, false};
	gbml_param_value dups[] = {tu_num("iterations", 30), tu_num("depth", 5), tu_num("learning_rate", 0.8),
	tu_num("eval_fraction", 0.3)};
	/* class 5 has no row: iteration 0 is dropped after class 0's tree; the cut then keeps no tree of it */
	gbml_param_value absent[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 5), tu_num("depth", 3),
	tu_num("classes_count", 6), tu_num("eval_fraction", 0.25)};

	bsh_eval_cases("an eval set: ", bsh_check_eval_case);
	bsh_check_eval("RMSE, an eval set of duplicate rows", &dup, dups, 4);
	tu_check_same_bytes("boost", "MultiClass, an eval set, a class without rows", bsh_fill, &mc, absent, 5);
}

/*
 * An eval set of the coordinator's own (eval_source): binned with the
 * union's borders and scored on the coordinator every tree; the shards
 * only get the best model's cut.
 */
TEST(boost_shards_eval_source_same_bytes)
{
	bsh_data	r = {3000, 5, false, true, true, 0, 0, false, 0, 0, 0, false, false};
	bsh_data	re = {700, 5, false, true, true, 0, 0, false, 0, 50000, 0, false, false};
	bsh_data	q = {3600, 5, false, false, false, 0, 9, false, 0, 0, 0, false, false};
	bsh_data	qe = {900, 5, false, false, false, 0, 9, false, 0, 90000, 0, false, false};
	bsh_data	mc = {2000, 4, false, false, false, 0, 0, false, 4, 0, 0, false, false};
	bsh_data	mce = {600, 4, false, false, false, 0, 0, false, 4, 70000, 0, false, false};
	gbml_param_value rmse[] = {tu_num("iterations", 60), tu_num("depth", 4), tu_num("learning_rate", 0.6),
	tu_num("early_stopping_rounds", 4), tu_num("border_sample_size", 1000)};
	gbml_param_value yeti[] = {tu_num("iterations", 30), tu_num("depth", 4), tu_num("learning_rate", 0.9),
	tu_num("early_stopping_rounds", 3)};
	gbml_param_value multi[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 25), tu_num("depth", 4),
	tu_num("learning_rate", 0.9), tu_num("early_stopping_rounds", 3), tu_num("eval_fraction", 0.3)};

	tu_check_same_bytes_eval("boost", "RMSE, eval_source, early stopping", bsh_fill, &r, bsh_fill, &re, rmse, 5);
	tu_check_same_bytes_eval("boost", "YetiRank, eval_source queries", bsh_fill, &q, bsh_fill, &qe, yeti, 4);
	/* (eval_fraction beside an eval set of its own is ignored, on one server and by the shards) */
	tu_check_same_bytes_eval("boost", "MultiClass, eval_source", bsh_fill, &mc, bsh_fill, &mce, multi, 6);
}

/*
 * A pointwise loss with group ids (the eval split by query): a query may
 * have rows on several shards, and subsample draws each row by its index
 * in the union's training order (by group id, then canonical), as one
 * server draws it: one server's bytes, with the queries on one shard each
 * and dealt across shards, with an eval set; a query metric (NDCG) still
 * needs every query on one shard, an error naming the query and what
 * needs it.
 */
TEST(boost_shards_pointwise_loss_with_group_ids_same_bytes)
{
	bsh_data	whole = {2400, 4, false, true, false, 0, 8, false, 0, 0, 0, false, false};
	bsh_data	dealt = {2400, 4, false, true, true, 0, 8, true, 0, 0, 0, false, false};
	gbml_param_value sub[] = {tu_str("loss", "RMSE"), tu_num("iterations", 8), tu_num("depth", 3),
	tu_num("subsample", 0.6), tu_num("random_seed", 4), tu_num("border_sample_size", 1000)};
	gbml_param_value eval[] = {tu_str("loss", "RMSE"), tu_num("iterations", 40), tu_num("depth", 3),
		tu_num("learning_rate", 0.7), tu_num("subsample", 0.7), tu_num("eval_fraction", 0.3),
	tu_num("early_stopping_rounds", 3)};
	gbml_param_value ndcg[] = {tu_str("loss", "RMSE"), tu_num("iterations", 3), tu_str("eval_metric", "NDCG")};
	gbml_param_value nosub[] = {tu_str("loss", "RMSE"), tu_num("iterations", 8), tu_num("depth", 3),
	tu_num("random_seed", 4), tu_num("border_sample_size", 1000)};
	char		error[512];
	size_t		len;
	uint8_t    *m;

	tu_check_same_bytes("boost", "RMSE with group ids, subsample, whole queries", bsh_fill, &whole, sub, 6);
	tu_check_same_bytes("boost", "RMSE with group ids, subsample, queries on several shards", bsh_fill, &dealt,
						sub, 6);
	tu_check_same_bytes("boost", "RMSE with group ids, queries on several shards, no subsample", bsh_fill, &dealt,
						sub, 3);
	bsh_check_eval("RMSE with group ids, subsample, queries on several shards, an eval set by query", &dealt, eval, 7);
	/* the draws are there: the bytes differ from the training without subsample */
	CHECK(bsh_bytes_differ(&dealt, nosub, 5, sub, 6));

	m = tu_train_sharded("boost", bsh_fill, &dealt, 2, ndcg, 3, 0, &len, error, sizeof(error));
	CHECK(m == NULL && strstr(error, "has rows on shards shard1 and shard2") != NULL &&
		  strstr(error, "the NDCG metric needs every query's rows on one shard") != NULL);
	if (m != NULL || strstr(error, "the NDCG metric") == NULL)
		fprintf(stderr, "NDCG with a query on two shards: %s\n", m ? "trained" : error);
	free(m);
}

/*
 * A shard whose every row eval_fraction holds out (a small partition:
 * here one row, or one query) has no training rows but eval rows: it
 * takes part in every step with nothing to add to the training's sums
 * (no gradients, empty histograms) and its eval rows' terms, scores and
 * best-model cut as one server's, so the bytes are one server's: an eval
 * metric with early stopping, AUC (gathered), MultiClass, Depthwise with
 * refined leaves, and a ranking loss's eval queries.
 */
static void
bsh_check_lone(const char *name, bsh_data s, const gbml_param_value *v, int nv)
{
	int64_t		i = tu_first_held_out("boost", v, nv, bsh_fill, &s, 0);

	CHECK(i >= 0);
	s.lone = i + 1;
	bsh_check_eval(name, &s, v, nv);
}

TEST(boost_shards_a_shard_whose_rows_are_all_held_out)
{
	bsh_data	b = {2500, 5, true, true, false, 0, 0, false, 0, 0, 0, false, false};
	bsh_data	q = {3600, 5, false, false, false, 0, 9, false, 0, 0, 0, false, false};
	gbml_param_value auc[] = {tu_str("loss", "Logloss"), tu_str("eval_metric", "AUC"), tu_num("iterations", 40),
		tu_num("depth", 4), tu_num("learning_rate", 0.8), tu_num("eval_fraction", 0.3),
	tu_num("early_stopping_rounds", 3)};
	gbml_param_value pointwise[] = {tu_str("loss", "RMSE"), tu_num("iterations", 30), tu_num("depth", 4),
		tu_num("learning_rate", 0.9), tu_num("eval_fraction", 0.3), tu_num("early_stopping_rounds", 3),
	tu_num("subsample", 0.7), tu_num("border_sample_size", 1000)};

	/* the eval-set cases (a row, or YetiRank's query, alone on the last shard) */
	bsh_eval_cases("a lone held-out row or query: ", bsh_check_lone);
	bsh_check_lone("a lone held-out row: Logloss, AUC", b, auc, 7);
	/* a pointwise loss with group ids and subsample: the grouped merge's pages, none from that shard */
	bsh_check_lone("a lone held-out query: RMSE with group ids, subsample", q, pointwise, 8);
}

/*
 * MultiClass: a shard's eval rows may hold a class its training rows do
 * not (the union's do): its labels are checked against the union's class
 * count, as one server checks them against its training labels'.  Here
 * the top class's training rows are all on shard 0, and one of its held-out
 * rows is on shard 1, beside shard 1's rows of the other classes.
 */
TEST(boost_shards_multiclass_eval_class_from_another_shard)
{
	bsh_data	mc = {2000, 4, false, false, false, 0, 0, false, 4, 0, 0, true, false};
	gbml_param_value multi[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 25), tu_num("depth", 4),
	tu_num("learning_rate", 0.9), tu_num("eval_fraction", 0.25), tu_num("early_stopping_rounds", 3)};
	int64_t		i = -1;

	/* the first held-out row of the top class */
	for (int64_t from = 0; from < mc.n; from = i + 1)
	{
		float		x[4],
					label,
					weight;

		i = tu_first_held_out("boost", multi, 6, bsh_fill, &mc, from);
		if (i < 0)
			break;
		bsh_row(&mc, i, x, &label, &weight);
		if (label == (float) (mc.classes - 1))
			break;
	}
	CHECK(i >= 0);
	mc.lone = i + 1;
	bsh_check_eval("MultiClass, an eval row of a class only another shard trains", &mc, multi, 6);
}

/* MultiClass: a shard whose rows are all of one class (fewer than 2 are an error only for the union) */
TEST(boost_shards_multiclass_shard_of_one_class)
{
	bsh_data	mc = {2000, 4, false, false, false, 0, 0, false, 3, 0, 0, false, true};
	gbml_param_value v[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 6), tu_num("depth", 3)};
	gbml_param_value e[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 25), tu_num("depth", 4),
	tu_num("learning_rate", 0.9), tu_num("eval_fraction", 0.25), tu_num("early_stopping_rounds", 3)};

	tu_check_same_bytes("boost", "MultiClass, a shard of class 0 only", bsh_fill, &mc, v, 3);
	bsh_check_eval("MultiClass, a shard of class 0 only, an eval set", &mc, e, 6);
}

/*
 * AUC, which needs every prediction: the shards' predictions, labels and
 * weights gathered to the coordinator (the train AUC in META; the eval
 * set's each iteration, early stopping on it), one server's bytes.
 */
TEST(boost_shards_auc_same_bytes)
{
	bsh_data	b = {2600, 5, true, true, true, 0, 0, false, 0, 0, 0, false, false};
	bsh_data	be = {700, 5, true, true, true, 0, 0, false, 0, 40000, 0, false, false};
	gbml_param_value train[] = {tu_str("loss", "Logloss"), tu_str("eval_metric", "AUC"), tu_num("iterations", 6),
	tu_num("depth", 4)};
	gbml_param_value split[] = {tu_str("loss", "Logloss"), tu_str("eval_metric", "AUC"), tu_num("iterations", 40),
		tu_num("depth", 4), tu_num("learning_rate", 0.8), tu_num("eval_fraction", 0.3),
	tu_num("early_stopping_rounds", 3)};
	gbml_param_value source[] = {tu_str("loss", "Logloss"), tu_str("eval_metric", "AUC"), tu_num("iterations", 40),
	tu_num("depth", 4), tu_num("learning_rate", 0.8), tu_num("early_stopping_rounds", 3)};

	tu_check_same_bytes("boost", "Logloss, the train AUC", bsh_fill, &b, train, 4);
	bsh_check_eval("Logloss, AUC on an eval set, early stopping", &b, split, 7);
	tu_check_same_bytes_eval("boost", "Logloss, AUC on an eval_source", bsh_fill, &b, bsh_fill, &be, source, 6);
}

TEST(boost_shards_failing_shard_names_it)
{
	bsh_data	s = {3000, 4, false, false, false, 0, 0, false, 0, 0, 0, false, false};
	gbml_param_value v[] = {tu_num("iterations", 5), tu_num("depth", 3), tu_num("border_sample_size", 1000)};
	char		error[512];
	size_t		len;
	uint8_t    *m;

	/* in the order's pages, the sample, the borders, the base score, a tree's levels */
	for (int at = 1; at <= 28; at += 3)
	{
		m = tu_train_sharded("boost", bsh_fill, &s, 2, v, 3, at, &len, error, sizeof(error));
		CHECK(m == NULL);
		CHECK(strstr(error, "shard2") != NULL && strstr(error, "planted failure") != NULL);
		if (m != NULL || strstr(error, "planted failure") == NULL)
			fprintf(stderr, "failure at round trip %d: %s\n", at, m ? "the fit ended first" : error);
		free(m);
	}
}

TEST(boost_term_sums_add_up_from_pieces)
{
	/* the base score's and metrics' sums: the same integers from any split of the rows */
	enum {N = 1001};
	float		label[N],
				weight[N];
	double		pred[N],
				max[GBML_BOOST_N_TERMS],
				part_max[GBML_BOOST_N_TERMS],
				scale[GBML_BOOST_N_TERMS];
	int64_t		whole[GBML_BOOST_N_TERMS],
				sum[GBML_BOOST_N_TERMS] = {0},
				part[GBML_BOOST_N_TERMS];
	gbml_rng	rng;
	gbml_boost_problem p = {0};
	int64_t		cut[] = {0, 1, 333, 334, 900, N};

	gbml_rng_seed(&rng, 77);
	for (int i = 0; i < N; i++)
	{
		label[i] = (float) (gbml_rng_uniform(&rng) < 0.3);
		weight[i] = (float) (0.1 + 3 * gbml_rng_uniform(&rng));
		pred[i] = 6 * gbml_rng_uniform(&rng) - 3;
	}
	p.n = N;
	p.label = label;
	p.weight = weight;
	gbml_boost_term_maxima(&p, pred, GBML_BOOST_WITH_BOTH, max);
	gbml_boost_term_scales(max, GBML_BOOST_N_TERMS, N, scale);
	gbml_boost_term_sums(&p, pred, GBML_BOOST_WITH_BOTH, scale, whole);
	for (int c = 0; c + 1 < (int) (sizeof(cut) / sizeof(cut[0])); c++)
	{
		gbml_boost_problem q = p;

		q.n = cut[c + 1] - cut[c];
		q.label = label + cut[c];
		q.weight = weight + cut[c];
		gbml_boost_term_maxima(&q, pred + cut[c], GBML_BOOST_WITH_BOTH, part_max);
		for (int t = 0; t < GBML_BOOST_N_TERMS; t++)
			CHECK(part_max[t] <= max[t]);
		gbml_boost_term_sums(&q, pred + cut[c], GBML_BOOST_WITH_BOTH, scale, part);
		for (int t = 0; t < GBML_BOOST_N_TERMS; t++)
			sum[t] += part[t];
	}
	for (int t = 0; t < GBML_BOOST_N_TERMS; t++)
		CHECK(sum[t] == whole[t]);
	/* and the value is the plain sum to about 2^-50 of the largest term times n */
	{
		double		sw = 0;

		for (int i = 0; i < N; i++)
			sw += weight[i];
		CHECK(fabs(gbml_boost_term_value(whole, scale, GBML_BOOST_TERM_W) - sw) < 1e-9 * sw);
	}
}
