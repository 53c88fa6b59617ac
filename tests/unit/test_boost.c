/*
 * test_boost.c — unit tests of the boosted oblivious-tree trainer and scorer:
 * quantization, learning on small synthetic data with every loss, scoring
 * consistency (raw-float scorer vs the trainer's own predictions, batch vs
 * single row), determinism across thread counts, eval set and early
 * stopping, missing values, bad parameters, cancellation, and corrupted
 * models (crafted sections with a valid checksum).
 */
#include "harness.h"
#include "boost.h"
#include "boost_loss.h"
#include "boost_quantize.h"
#include "metrics.h"
#include "rng.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

typedef enum
{
	DATA_REGRESSION,			/* y = 3*[x0 > 0.5] + 2*x1^2 + noise */
	DATA_BINARY,				/* y = [x0 + x1 + noise > 1] */
	DATA_RANKING,				/* groups of 20, relevance 0..4 from x0, x1 */
	DATA_NOISE					/* y = 0.2*x0 + big noise (overfits fast) */
} data_kind;

static void
make_data(gbml_dataset *ds, gbml_env *env, data_kind kind, int64_t n, int d, uint64_t seed,
		  double missing_rate)
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

		for (int j = 0; j < d; j++)
			x[j] = (float) gbml_rng_uniform(&rng);
		switch (kind)
		{
			case DATA_REGRESSION:
				y = 3.0 * (x[0] > 0.5f) + 2.0 * x[1] * x[1] + 0.1 * noise;
				break;
			case DATA_BINARY:
				y = (x[0] + x[1] + 0.3 * noise > 1.0) ? 1 : 0;
				break;
			case DATA_RANKING:
				y = floor(4.99 * (0.7 * x[0] + 0.3 * x[1]) + 0.5 * noise);
				y = y < 0 ? 0 : (y > 4 ? 4 : y);
				break;
			case DATA_NOISE:
				y = 0.2 * x[0] + 2.0 * noise;
				break;
		}
		for (int j = 2; j < d; j++)
			if (missing_rate > 0 && gbml_rng_uniform(&rng) < missing_rate)
				x[j] = NAN;
		row.x = x;
		row.n_features = d;
		row.label = (float) y;
		row.group = i / 20;
		row.group_is_null = kind != DATA_RANKING;
		row.weight_is_null = true;
		CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK);
	}
	free(x);
}

static double
label_std(const gbml_dataset *ds)
{
	double		s = 0,
				s2 = 0;

	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++)
		{
			s += ds->chunks[c]->label[r];
			s2 += (double) ds->chunks[c]->label[r] * ds->chunks[c]->label[r];
		}
	s /= (double) ds->n_rows;
	return sqrt(s2 / (double) ds->n_rows - s * s);
}

/* ---- tests ---- */

TEST(boost_loss_choices_match_loss_names)
{
	for (int k = 0; k <= GBML_LOSS_MULTICLASS; k++)
		CHECK(strcmp(gbml_boost_loss_choices[k + 1], gbml_boost_loss_names[k]) == 0);
	CHECK(gbml_boost_loss_names[GBML_LOSS_MULTICLASS + 1] == NULL);
	CHECK(gbml_boost_loss_choices[GBML_LOSS_MULTICLASS + 2] == NULL);
}

TEST(boost_borders_and_bins)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_boost_borders b;
	gbml_boost_bins bins;
	const int	n = 5000,
				d = 3;
	float		x[3];
	const float **rows = malloc(sizeof(float *) * n);
	int64_t		hist[64] = {0};
	gbml_rng	rng;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, true);
	gbml_rng_seed(&rng, 7);
	for (int i = 0; i < n; i++)
	{
		gbml_row	row = {.x = x,.n_features = d,.label = 0,.group_is_null = true,.weight_is_null = true};

		x[0] = (float) (i % 10);	/* 10 distinct values -> 9 borders */
		x[1] = (i % 7 == 0) ? NAN : (float) gbml_rng_uniform(&rng);	/* missing + continuous */
		x[2] = 1.5f;			/* constant -> no border */
		CHECK(gbml_dataset_append(&ds, &env, &row, true) == GBML_OK);
	}
	CHECK(gbml_boost_borders_build(&ds, 32, GBML_BORDER_MEDIAN, 200000, 1, &b, &env) == GBML_OK);
	CHECK(b.count[0] == 9);
	CHECK(!b.has_missing[0] && b.has_missing[1] && !b.has_missing[2]);
	CHECK(b.count[1] == 33);
	CHECK(isinf(b.values[b.offset[1]]) && b.values[b.offset[1]] < 0);
	CHECK(b.count[2] == 0);
	for (int f = 0; f < d; f++)
		for (int j = 1; j < b.count[f]; j++)
			CHECK(b.values[b.offset[f] + j] > b.values[b.offset[f] + j - 1]);
	for (int j = 0; j < 9; j++)
		CHECK(b.values[b.offset[0] + j] >= (float) j && b.values[b.offset[0] + j] < (float) (j + 1));

	{
		int64_t		i = 0;

		for (int c = 0; c < ds.n_chunks; c++)
			for (int64_t r = 0; r < ds.chunks[c]->n_rows; r++)
				rows[i++] = gbml_dataset_row(&ds, c, r);
	}
	CHECK(gbml_boost_bins_build(rows, n, d, &b, 1000, &bins, &env) == GBML_OK);
	CHECK(bins.n_blocks == 5);
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		blk = i / 1000,
					r = i % 1000,
					len = gbml_boost_block_len(&bins, blk);

		for (int f = 0; f < d; f++)
		{
			int			bin = bins.blocks[blk][f * len + r];
			int			expect = 0;

			for (int j = 0; j < b.count[f]; j++)
				expect += rows[i][f] > b.values[b.offset[f] + j];
			CHECK(bin == expect);
			CHECK(bin == gbml_boost_bin_of(b.values + b.offset[f], b.count[f], rows[i][f]));
			if (f == 1)
			{
				CHECK((bin == 0) == (bool) isnan(rows[i][f]));
				hist[bin]++;
			}
		}
	}
	/* quantile bins of the continuous feature hold about the same number of rows */
	for (int bin = 1; bin <= 33; bin++)
		CHECK(hist[bin] > (n * 6 / 7) / 33 / 2 && hist[bin] < (n * 6 / 7) / 33 * 2);
	gbml_boost_bins_free(&bins, &env);
	gbml_boost_borders_free(&b, &env);
	gbml_dataset_free(&ds, &env);
	free(rows);
	CHECK(env.memory_used == 0);
}

/* Borders of feature f in a dataset of one column v[0..n), by `type`. */
static int
borders_of_column(const float *v, int n, int border_count, gbml_boost_border_type type, float *out)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_boost_borders b;
	int			count;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, true);
	for (int i = 0; i < n; i++)
	{
		gbml_row	row = {.x = &v[i],.n_features = 1,.label = 0,.group_is_null = true,.weight_is_null = true};

		CHECK(gbml_dataset_append(&ds, &env, &row, true) == GBML_OK);
	}
	CHECK(gbml_boost_borders_build(&ds, border_count, type, 200000, 1, &b, &env) == GBML_OK);
	count = b.count[0];
	memcpy(out, b.values, sizeof(float) * (size_t) count);
	gbml_boost_borders_free(&b, &env);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
	return count;
}

/*
 * GreedyLogSum: with 60 % of the rows at 0, quantile borders mostly fall
 * inside the run of zeros and are lost; the greedy choice spends all 32,
 * one at the run's edge and the rest splitting the other rows into bins
 * of about equal size; with few distinct values both take them all.
 */
TEST(boost_greedy_logsum_borders_use_every_border)
{
	enum {n = 5000};
	static float v[n],
				median[GBML_BOOST_MAX_BORDERS],
				greedy[GBML_BOOST_MAX_BORDERS],
				again[GBML_BOOST_MAX_BORDERS];
	int			n_median,
				n_greedy,
				per_bin[33] = {0};
	gbml_rng	rng;

	gbml_rng_seed(&rng, 11);
	for (int i = 0; i < n; i++)
		v[i] = i % 5 < 3 ? 0.0f : (float) gbml_rng_uniform(&rng) + 1.0f;
	n_median = borders_of_column(v, n, 32, GBML_BORDER_MEDIAN, median);
	n_greedy = borders_of_column(v, n, 32, GBML_BORDER_GREEDY_LOGSUM, greedy);
	CHECK(n_median < 20);
	CHECK(n_greedy == 32);
	CHECK(greedy[0] >= 0.0f && greedy[0] < 1.0f);	/* the zeros' edge */
	for (int j = 1; j < n_greedy; j++)
		CHECK(greedy[j] > greedy[j - 1]);
	for (int i = 0; i < n; i++)
		per_bin[gbml_boost_bin_of(greedy, n_greedy, v[i])]++;
	CHECK(per_bin[0] == n * 3 / 5);
	for (int bin = 1; bin <= 32; bin++)	/* 2,000 rows in 32 bins: 62.5 each */
		CHECK(per_bin[bin] >= 40 && per_bin[bin] <= 90);
	CHECK(borders_of_column(v, n, 32, GBML_BORDER_GREEDY_LOGSUM, again) == 32);
	CHECK(memcmp(again, greedy, sizeof(float) * 32) == 0);

	/* 10 distinct values, 32 borders: every boundary, whichever rule */
	for (int i = 0; i < n; i++)
		v[i] = (float) (i % 10 == 0 ? 100 : i % 10);
	CHECK(borders_of_column(v, n, 32, GBML_BORDER_MEDIAN, median) == 9);
	CHECK(borders_of_column(v, n, 32, GBML_BORDER_GREEDY_LOGSUM, greedy) == 9);
	CHECK(memcmp(median, greedy, sizeof(float) * 9) == 0);

	/*
	 * No ties: each split halves the bin with the most rows (three give the
	 * quartiles); between bins of equal size the lower one goes first.
	 */
	for (int i = 0; i < n; i++)
		v[i] = (float) ((i * 7919) % n);
	CHECK(borders_of_column(v, n, 3, GBML_BORDER_GREEDY_LOGSUM, greedy) == 3);
	for (int j = 0; j < 3; j++)
		CHECK(fabsf(greedy[j] - (float) (n * (j + 1) / 4)) <= 1.0f);
	CHECK(borders_of_column(v, n, 4, GBML_BORDER_GREEDY_LOGSUM, greedy) == 4);
	CHECK(fabsf(greedy[0] - (float) (n / 8)) <= 1.0f && fabsf(greedy[1] - (float) (n / 4)) <= 1.0f);
}

TEST(boost_rmse_learns_and_scorer_matches_trainer)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_scorer sc;
	gbml_param_value v[] = {tu_num("iterations", 60), tu_num("depth", 4), tu_num("learning_rate", 0.3)};
	double	   *pred;
	float	   *label;
	double		rmse,
				meta_rmse;

	gbml_env_init_malloc(&env, 2);
	make_data(&ds, &env, DATA_REGRESSION, 3000, 5, 11, 0);
	CHECK(gbml_train_values(&env, "boost", v, 3, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	pred = malloc(sizeof(double) * ds.n_rows);
	label = malloc(sizeof(float) * ds.n_rows);
	CHECK(tu_score_dataset(&sc, &env, &ds, GBML_OUT_SCORE, pred, label) == GBML_OK);
	rmse = gbml_rmse(pred, label, NULL, ds.n_rows);
	CHECK(rmse < 0.15 * label_std(&ds));
	/* the trainer's own predictions (from bins) are the scorer's (from raw floats) */
	meta_rmse = tu_meta_number(&env, model, len, "train_RMSE");
	CHECK_NEAR(meta_rmse, rmse, 1e-12 * (1 + rmse));
	CHECK(tu_meta_number(&env, model, len, "trees") == 60);
	CHECK(tu_meta_number(&env, model, len, "higher_is_better") == 0);
	CHECK_NEAR(tu_meta_number(&env, model, len, "eval_value"), rmse, 1e-9);

	/* batch scorer == single-row scorer, bit for bit */
	{
		const gbml_boost_model *m = sc.handle;
		float	   *xs = malloc(sizeof(float) * ds.n_rows * ds.n_features);
		double	   *bout = malloc(sizeof(double) * ds.n_rows);
		int64_t		i = 0;
		bool		same = true;

		for (int c = 0; c < ds.n_chunks; c++)
			for (int64_t r = 0; r < ds.chunks[c]->n_rows; r++, i++)
				memcpy(xs + i * ds.n_features, gbml_dataset_row(&ds, c, r), sizeof(float) * ds.n_features);
		CHECK(gbml_boost_forest_predict_batch(&m->forest, xs, ds.n_rows, ds.n_features, bout, &env) == GBML_OK);
		for (i = 0; i < ds.n_rows; i++)
			if (memcmp(&bout[i], &pred[i], sizeof(double)) != 0)
				same = false;
		CHECK(same);
		free(xs);
		free(bout);
	}

	/* importance: the two informative features carry nearly all the gain */
	{
		double		imp[5],
					s = 0;

		CHECK(gbml_algorithm_boost.importance(sc.handle, imp) == GBML_OK);
		for (int j = 0; j < 5; j++)
			s += imp[j];
		CHECK_NEAR(s, 1.0, 1e-9);
		CHECK(imp[0] + imp[1] > 0.95);
	}
	/* readable dump */
	{
		gbml_strbuf sb;

		gbml_sb_init(&sb, &env);
		CHECK(gbml_algorithm_boost.to_json(sc.handle, &sb) == GBML_OK);
		gbml_sb_append(&sb, "", 1);
		CHECK(strstr(sb.data, "\"loss\":\"RMSE\"") != NULL);
		CHECK(strstr(sb.data, "\"leaf_values\":[") != NULL);
		CHECK(strstr(sb.data, "\"borders\":[[") != NULL);
		gbml_sb_free(&sb);
	}
	/* PROBA is an error for a non-logistic loss, naming what to call */
	{
		double		out;

		CHECK(gbml_scorer_predict(&sc, &env, gbml_dataset_row(&ds, 0, 0), 5, GBML_OUT_PROBA, &out) == GBML_EUNSUPPORTED);
		CHECK(strstr(env.error, "gbml.predict") != NULL);
	}
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	free(pred);
	free(label);
	CHECK(env.memory_used == 0);
}

/* The model's own sections (header, trees, borders, params), compared one by one. */
static const uint32_t boost_tags[] = {GBML_SECTION_BOOST_HEADER, GBML_SECTION_BOOST_TREES,
GBML_SECTION_BOOST_BORDERS, GBML_SECTION_PARAMS};

static void
determinism_case_noisy(data_kind kind, const char *loss, double missing, int leaf_iterations, const char *score,
					   double random_strength)
{
	uint8_t    *models[3] = {NULL, NULL, NULL};
	size_t		lens[3];
	int			threads[3] = {1, 2, 3};
	gbml_env	envs[3];
	gbml_param_value v[] = {tu_num("iterations", 12), tu_num("depth", 5), tu_num("subsample", 0.7),
		tu_str("loss", loss), tu_num("random_seed", 42), tu_num("border_count", 64),
	tu_num("leaf_estimation_iterations", leaf_iterations), tu_str("score_function", score),
	tu_num("random_strength", random_strength)};

	for (int i = 0; i < 3; i++)
	{
		gbml_dataset ds;

		gbml_env_init_malloc(&envs[i], threads[i]);
		/* > 1 block of rows, rows appended in a different order each time */
		make_data(&ds, &envs[i], kind, 20000, 6, 5, missing);
		if (i == 1)
		{
			/* reverse the chunk list: canonical order must undo it */
			for (int a = 0, b = ds.n_chunks - 1; a < b; a++, b--)
			{
				gbml_chunk *t = ds.chunks[a];

				ds.chunks[a] = ds.chunks[b];
				ds.chunks[b] = t;
			}
		}
		CHECK(gbml_train_values(&envs[i], "boost", v, 9, &ds, NULL, &models[i], &lens[i]) == GBML_OK);
		gbml_dataset_free(&ds, &envs[i]);
	}
	CHECK(models[0] && models[1] && models[2]);
	if (models[0] && models[1] && models[2])
	{
		CHECK(tu_same_sections(&envs[0], models[0], lens[0], models[1], lens[1], boost_tags, 4));
		CHECK(tu_same_sections(&envs[0], models[0], lens[0], models[2], lens[2], boost_tags, 4));
		/* the whole container too: run-dependent figures live outside the model bytes */
		CHECK(lens[0] == lens[1] && memcmp(models[0], models[1], lens[0]) == 0);
		CHECK(lens[0] == lens[2] && memcmp(models[0], models[2], lens[0]) == 0);
	}
	for (int i = 0; i < 3; i++)
		gbml_free(&envs[i], models[i]);
}

static void
determinism_case_scored(data_kind kind, const char *loss, double missing, int leaf_iterations, const char *score)
{
	determinism_case_noisy(kind, loss, missing, leaf_iterations, score, 0);
}

static void
determinism_case(data_kind kind, const char *loss, double missing)
{
	determinism_case_scored(kind, loss, missing, 1, "auto");
}

TEST(boost_deterministic_across_threads_rmse)
{
	determinism_case(DATA_REGRESSION, "RMSE", 0.1);
}

TEST(boost_deterministic_across_threads_yetirank)
{
	determinism_case(DATA_RANKING, "YetiRank", 0.05);
}

TEST(boost_deterministic_across_threads_logloss_newton_leaves)
{
	/* further Newton steps sum derivatives per block, then over blocks in order */
	determinism_case_scored(DATA_BINARY, "Logloss", 0.05, 10, "auto");
}

TEST(boost_deterministic_across_threads_logloss_scored_on_weights)
{
	/* one Newton step from the leaves' hessian sums; ten from the rows, the first at 0 */
	determinism_case_scored(DATA_BINARY, "Logloss", 0.05, 1, "L2");
	determinism_case_scored(DATA_BINARY, "Logloss", 0.05, 10, "L2");
}

TEST(boost_deterministic_across_threads_split_noise)
{
	/* random_strength: the gradients' squares summed in fixed point, the draws by (tree, level, feature) */
	determinism_case_noisy(DATA_BINARY, "Logloss", 0.05, 3, "L2", 1);
	determinism_case_noisy(DATA_RANKING, "YetiRank", 0.05, 1, "auto", 2);
}

/*
 * With the setting's thread count (env->bins_per_thread set), a small
 * training's trees run on one thread (20,000 rows x 6 features is under
 * one thread's share), a big enough one on every thread, and a count asked
 * for (bins_per_thread 0) is used as asked; the same bytes each way.
 */
TEST(boost_tree_threads_follow_the_rows_bins)
{
	int64_t		per_thread[3] = {GBML_BINS_PER_THREAD, 1000, 0};
	int			expect[3] = {1, 2, 2};
	uint8_t    *models[3] = {NULL, NULL, NULL};
	size_t		lens[3];
	gbml_env	envs[3];
	gbml_param_value v[] = {tu_num("iterations", 4), tu_num("depth", 4), tu_str("loss", "Logloss")};

	for (int i = 0; i < 3; i++)
	{
		gbml_dataset ds;

		gbml_env_init_malloc(&envs[i], 2);
		envs[i].bins_per_thread = per_thread[i];
		make_data(&ds, &envs[i], DATA_BINARY, 20000, 6, 5, 0.05);
		CHECK(gbml_train_values(&envs[i], "boost", v, 3, &ds, NULL, &models[i], &lens[i]) == GBML_OK);
		CHECK(envs[i].threads == expect[i]);
		gbml_dataset_free(&ds, &envs[i]);
	}
	CHECK(models[0] && models[1] && models[2] && lens[0] == lens[1] && lens[0] == lens[2] &&
		  memcmp(models[0], models[1], lens[0]) == 0 && memcmp(models[0], models[2], lens[0]) == 0);
	for (int i = 0; i < 3; i++)
		gbml_free(&envs[i], models[i]);
}

/*
 * random_strength adds CatBoost's noise to the split scores: 0 is the
 * default and leaves the model's bytes as they were; a noise far below the
 * scores' differences chooses the same trees; a huge one picks splits at
 * random, which fit the training rows worse.
 */
TEST(boost_random_strength_noises_the_split_search)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *m[4] = {NULL, NULL, NULL, NULL};
	size_t		len[4];
	double		strength[4] = {-1, 0, 1e-12, 1e6};
	double		loss[4];

	gbml_env_init_malloc(&env, 2);
	make_data(&ds, &env, DATA_BINARY, 3000, 5, 17, 0);
	for (int k = 0; k < 4; k++)
	{
		gbml_param_value v[] = {tu_str("loss", "Logloss"), tu_num("iterations", 20), tu_num("depth", 4),
		tu_str("score_function", "L2"), tu_num("random_strength", strength[k])};

		CHECK(gbml_train_values(&env, "boost", v, k == 0 ? 4 : 5, &ds, NULL, &m[k], &len[k]) == GBML_OK);
		loss[k] = tu_meta_number(&env, m[k], len[k], "train_Logloss");
	}
	CHECK(len[0] == len[1] && memcmp(m[0], m[1], len[0]) == 0);
	CHECK(tu_same_sections(&env, m[0], len[0], m[2], len[2], boost_tags, 3));
	CHECK(!tu_same_sections(&env, m[0], len[0], m[3], len[3], boost_tags, 3));
	CHECK(loss[3] > 1.2 * loss[0]);
	printf("# train Logloss after 20 trees: %.4f without noise, %.4f with random_strength 1e6\n", loss[0], loss[3]);
	for (int k = 0; k < 4; k++)
		gbml_free(&env, m[k]);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/*
 * score_function L2 scores Logloss's splits on the row weights, NewtonL2 on
 * the hessians.  In the first tree every row has the same hessian, so
 * without an L2 term both choose the same splits and (Newton) leaves; later
 * trees differ.  L2 is for Logloss and YetiRank only, NewtonL2 not for
 * YetiRank.
 */
TEST(boost_score_function_l2_scores_splits_on_weights)
{
	gbml_env	env;
	gbml_dataset ds,
				ranked;
	uint8_t    *m = NULL;
	size_t		len;
	double		loss[2][3];
	const char *score[2] = {"NewtonL2", "L2"};

	gbml_env_init_malloc(&env, 2);
	make_data(&ds, &env, DATA_BINARY, 3000, 5, 17, 0);
	for (int s = 0; s < 2; s++)
		for (int k = 0; k < 3; k++)
		{
			/* one tree, one Newton step; thirty trees; one tree, two steps (the second from the rows) */
			gbml_param_value v[] = {tu_str("loss", "Logloss"), tu_num("iterations", k == 1 ? 30 : 1),
				tu_num("depth", 4), tu_num("l2_leaf_reg", 0), tu_num("learning_rate", 0.3),
			tu_str("score_function", score[s]), tu_num("leaf_estimation_iterations", k == 2 ? 2 : 1)};

			CHECK(gbml_train_values(&env, "boost", v, 7, &ds, NULL, &m, &len) == GBML_OK);
			loss[s][k] = tu_meta_number(&env, m, len, "train_Logloss");
			gbml_free(&env, m);
			m = NULL;
		}
	CHECK(fabs(loss[0][0] - loss[1][0]) < 1e-9);
	CHECK(fabs(loss[0][2] - loss[1][2]) < 1e-9);
	CHECK(fabs(loss[0][1] - loss[1][1]) > 1e-4);
	CHECK(loss[1][1] < 0.8 * loss[1][0]);	/* and it learns */
	printf("# train Logloss after 30 trees: %.4f NewtonL2, %.4f L2\n", loss[0][1], loss[1][1]);

	{
		gbml_param_value v[] = {tu_str("loss", "RMSE"), tu_str("score_function", "L2")};

		CHECK(gbml_train_values(&env, "boost", v, 2, &ds, NULL, &m, &len) == GBML_EINVAL);
		CHECK(strstr(env.error, "score_function L2 is for Logloss and YetiRank, not RMSE") != NULL);
	}
	make_data(&ranked, &env, DATA_RANKING, 2000, 5, 3, 0);
	{
		gbml_param_value v[] = {tu_str("loss", "YetiRank"), tu_str("score_function", "NewtonL2")};

		CHECK(gbml_train_values(&env, "boost", v, 2, &ranked, NULL, &m, &len) == GBML_EINVAL);
		CHECK(strstr(env.error, "score_function NewtonL2 is not for YetiRank") != NULL);
	}
	gbml_dataset_free(&ranked, &env);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/*
 * More Newton steps per tree bring each leaf closer to its own optimum, so
 * the same number of trees fits the training rows better; one step is the
 * default, and asking for it leaves the model's bytes as they were.
 */
TEST(boost_leaf_estimation_iterations_fit_logloss_leaves)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *m[3] = {NULL, NULL, NULL};
	size_t		len[3];
	double		loss[3];

	gbml_env_init_malloc(&env, 2);
	make_data(&ds, &env, DATA_BINARY, 3000, 5, 17, 0);
	for (int k = 0; k < 3; k++)
	{
		gbml_param_value v[] = {tu_str("loss", "Logloss"), tu_num("iterations", 20), tu_num("depth", 4),
		tu_num("leaf_estimation_iterations", k == 2 ? 10 : 1)};

		CHECK(gbml_train_values(&env, "boost", v, k == 0 ? 3 : 4, &ds, NULL, &m[k], &len[k]) == GBML_OK);
		loss[k] = tu_meta_number(&env, m[k], len[k], "train_Logloss");
	}
	CHECK(len[0] == len[1] && memcmp(m[0], m[1], len[0]) == 0);
	CHECK(loss[2] < 0.9 * loss[1]);
	printf("# train Logloss after 20 trees: %.4f with one Newton step, %.4f with ten\n", loss[1], loss[2]);
	for (int k = 0; k < 3; k++)
		gbml_free(&env, m[k]);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(boost_every_loss_learns)
{
	gbml_env	env;
	const char *losses[] = {"RMSE", "Logloss", "QueryRMSE", "PairLogit", "YetiRank", "LambdaMART"};

	gbml_env_init_malloc(&env, 2);
	for (int k = 0; k < 6; k++)
	{
		gbml_dataset ds;
		uint8_t    *model = NULL;
		size_t		len;
		gbml_scorer sc;
		gbml_param_value v[] = {tu_str("loss", losses[k]), tu_num("iterations", 40), tu_num("depth", 4),
		tu_num("learning_rate", 0.2)};
		bool		binary = strcmp(losses[k], "Logloss") == 0;
		int64_t		n = 2000;
		double	   *pred = malloc(sizeof(double) * n),
				   *zero = calloc(n, sizeof(double));
		float	   *label = malloc(sizeof(float) * n);

		make_data(&ds, &env, binary ? DATA_BINARY : DATA_RANKING, n, 4, 100 + k, 0);
		if (gbml_train_values(&env, "boost", v, 4, &ds, NULL, &model, &len) != GBML_OK)
		{
			fprintf(stderr, "  loss %s: %s\n", losses[k], env.error);
			CHECK(false);
			gbml_dataset_free(&ds, &env);
			continue;
		}
		CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
		CHECK(tu_score_dataset(&sc, &env, &ds, GBML_OUT_SCORE, pred, label) == GBML_OK);
		if (binary)
		{
			double		auc = gbml_auc(pred, label, NULL, n);
			double		p;

			CHECK(auc > 0.97);
			CHECK(gbml_scorer_predict(&sc, &env, gbml_dataset_row(&ds, 0, 0), 4, GBML_OUT_PROBA, &p) == GBML_OK);
			CHECK(p > 0 && p < 1);
		}
		else
		{
			/* ds is in canonical order, not grouped: rebuild groups for NDCG */
			int64_t    *off = malloc(sizeof(int64_t) * (n + 1));
			double	   *sp = malloc(sizeof(double) * n);
			float	   *sl = malloc(sizeof(float) * n);
			int64_t		ng = 0,
						i = 0;

			for (int64_t g = 0; g * 20 < n; g++)
			{
				off[ng++] = i;
				for (int c = 0; c < ds.n_chunks; c++)
					for (int64_t r = 0; r < ds.chunks[c]->n_rows; r++)
						if (ds.chunks[c]->group[r] == g)
						{
							CHECK(gbml_scorer_predict(&sc, &env, gbml_dataset_row(&ds, c, r), 4,
													  GBML_OUT_SCORE, &sp[i]) == GBML_OK);
							sl[i++] = ds.chunks[c]->label[r];
						}
			}
			off[ng] = i;
			CHECK(i == n);
			{
				double		ndcg = gbml_mean_ndcg(sp, sl, ng, off, 10);
				double		base = gbml_mean_ndcg(zero, sl, ng, off, 10);

				if (!(ndcg > 0.9 && ndcg > base + 0.1))
					fprintf(stderr, "  loss %s: NDCG@10 %.4f, constant %.4f\n", losses[k], ndcg, base);
				CHECK(ndcg > 0.9);
				CHECK(ndcg > base + 0.1);
			}
			free(off);
			free(sp);
			free(sl);
		}
		gbml_scorer_free(&sc, &env);
		gbml_free(&env, model);
		gbml_dataset_free(&ds, &env);
		free(pred);
		free(zero);
		free(label);
	}
	CHECK(env.memory_used == 0);
}

/* l2_leaf_reg's default depends on the loss (CatBoost's: 0 for YetiRank, else 3); META has it */
TEST(boost_l2_leaf_reg_default_follows_the_loss)
{
	gbml_env	env;
	gbml_dataset ds;
	const char *losses[] = {"auto", "YetiRank", "PairLogit", "QueryRMSE", "YetiRank"};
	double		given[] = {NAN, NAN, NAN, NAN, 5};
	double		want[] = {0, 0, 3, 3, 5};

	gbml_env_init_malloc(&env, 2);
	make_data(&ds, &env, DATA_RANKING, 400, 4, 7, 0);
	for (int k = 0; k < 5; k++)
	{
		uint8_t    *model = NULL;
		size_t		len;
		gbml_param_value v[] = {tu_str("loss", losses[k]), tu_num("iterations", 3), tu_num("depth", 3),
		tu_num("l2_leaf_reg", given[k])};

		CHECK(gbml_train_values(&env, "boost", v, isnan(given[k]) ? 3 : 4, &ds, NULL, &model, &len) == GBML_OK);
		CHECK(tu_meta_number(&env, model, len, "l2_leaf_reg") == want[k]);
		gbml_free(&env, model);
	}
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(boost_eval_set_and_early_stopping)
{
	gbml_env	env;
	gbml_dataset ds,
				ev;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_scorer sc;
	gbml_param_value v[] = {tu_num("iterations", 400), tu_num("depth", 6), tu_num("learning_rate", 0.5),
	tu_num("l2_leaf_reg", 0), tu_num("early_stopping_rounds", 15)};
	double		trees,
				best;

	gbml_env_init_malloc(&env, 2);
	make_data(&ds, &env, DATA_NOISE, 1500, 8, 21, 0);
	make_data(&ev, &env, DATA_NOISE, 1500, 8, 22, 0);
	CHECK(gbml_train_values(&env, "boost", v, 5, &ds, &ev, &model, &len) == GBML_OK);
	trees = tu_meta_number(&env, model, len, "trees");
	best = tu_meta_number(&env, model, len, "best_iteration");
	CHECK(tu_meta_number(&env, model, len, "stopped_early") == 1);
	CHECK(trees < 100);
	CHECK(trees == best);
	CHECK(tu_meta_number(&env, model, len, "iterations_run") == best + 15);
	/* META's eval value is the eval RMSE of the kept trees */
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	{
		double	   *pred = malloc(sizeof(double) * ev.n_rows);
		float	   *label = malloc(sizeof(float) * ev.n_rows);

		CHECK(tu_score_dataset(&sc, &env, &ev, GBML_OUT_SCORE, pred, label) == GBML_OK);
		CHECK_NEAR(tu_meta_number(&env, model, len, "eval_value"), gbml_rmse(pred, label, NULL, ev.n_rows), 1e-9);
		free(pred);
		free(label);
	}
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);

	/* use_best_model false keeps every tree grown */
	{
		gbml_param_value v2[] = {tu_num("iterations", 400), tu_num("depth", 6), tu_num("learning_rate", 0.5),
		tu_num("l2_leaf_reg", 0), tu_num("early_stopping_rounds", 15),
		tu_bool("use_best_model", false)};

		CHECK(gbml_train_values(&env, "boost", v2, 6, &ds, &ev, &model, &len) == GBML_OK);
		CHECK(tu_meta_number(&env, model, len, "trees") == best + 15);
		gbml_free(&env, model);
	}
	/* eval_fraction: the driver holds out rows itself */
	{
		gbml_param_value v3[] = {tu_num("iterations", 30), tu_num("eval_fraction", 0.2), tu_str("eval_metric", "AUC")};

		CHECK(gbml_train_values(&env, "boost", v3, 3, &ds, NULL, &model, &len) == GBML_OK);
		CHECK(tu_meta_number(&env, model, len, "higher_is_better") == 1);
		CHECK(tu_meta_number(&env, model, len, "eval_value") > 0.5);
		gbml_free(&env, model);
	}
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&ev, &env);
	CHECK(env.memory_used == 0);
}

TEST(boost_missing_values_get_their_own_split)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_scorer sc;
	gbml_rng	rng;
	gbml_param_value v[] = {tu_num("iterations", 80), tu_num("depth", 3), tu_num("learning_rate", 0.3)};
	float		x[2];
	double		out;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, true);
	gbml_rng_seed(&rng, 3);
	for (int i = 0; i < 4000; i++)
	{
		gbml_row	row = {.x = x,.n_features = 2,.group_is_null = true,.weight_is_null = true};
		bool		miss = i % 3 == 0;

		x[0] = miss ? NAN : (float) gbml_rng_uniform(&rng);
		x[1] = (float) gbml_rng_uniform(&rng);
		/* missing is worth 5; present values are below 1 */
		row.label = miss ? 5.0f : x[0];
		CHECK(gbml_dataset_append(&ds, &env, &row, true) == GBML_OK);
	}
	CHECK(gbml_train_values(&env, "boost", v, 3, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	x[0] = NAN;
	x[1] = 0.5f;
	CHECK(gbml_scorer_predict(&sc, &env, x, 2, GBML_OUT_SCORE, &out) == GBML_OK);
	CHECK_NEAR(out, 5.0, 0.1);
	x[0] = 0.2f;
	CHECK(gbml_scorer_predict(&sc, &env, x, 2, GBML_OUT_SCORE, &out) == GBML_OK);
	CHECK_NEAR(out, 0.2, 0.15);
	x[0] = 0.9f;
	CHECK(gbml_scorer_predict(&sc, &env, x, 2, GBML_OUT_SCORE, &out) == GBML_OK);
	CHECK_NEAR(out, 0.9, 0.15);
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(boost_bad_parameters_and_inputs)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;

	gbml_env_init_malloc(&env, 1);
	make_data(&ds, &env, DATA_REGRESSION, 200, 3, 1, 0);
	{
		gbml_param_value v = tu_num("depth", 11);

		CHECK(gbml_train_values(&env, "boost", &v, 1, &ds, NULL, &model, &len) == GBML_EINVAL);
		CHECK(strstr(env.error, "depth") != NULL);
	}
	{
		gbml_param_value v = tu_num("learning_rate", 0);

		CHECK(gbml_train_values(&env, "boost", &v, 1, &ds, NULL, &model, &len) == GBML_EINVAL);
	}
	{
		gbml_param_value v = tu_num("border_count", 256);

		CHECK(gbml_train_values(&env, "boost", &v, 1, &ds, NULL, &model, &len) == GBML_EINVAL);
	}
	{
		gbml_param_value v = tu_str("loss", "Hinge");

		CHECK(gbml_train_values(&env, "boost", &v, 1, &ds, NULL, &model, &len) == GBML_EINVAL);
		CHECK(strstr(env.error, "YetiRank") != NULL);	/* the message lists the choices */
	}
	{
		gbml_param_value v = tu_num("iteration", 5);	/* typo */

		CHECK(gbml_train_values(&env, "boost", &v, 1, &ds, NULL, &model, &len) == GBML_EINVAL);
	}
	{
		gbml_param_value v = tu_str("loss", "YetiRank");

		CHECK(gbml_train_values(&env, "boost", &v, 1, &ds, NULL, &model, &len) == GBML_EINVAL);
		CHECK(strstr(env.error, "needs a group_id") != NULL);
	}
	{
		gbml_param_value v = tu_str("eval_metric", "NDCG");

		CHECK(gbml_train_values(&env, "boost", &v, 1, &ds, NULL, &model, &len) == GBML_EINVAL);
		CHECK(strstr(env.error, "group_id") != NULL);
	}
	{
		/* labels up to ~5: not a probability */
		gbml_param_value v = tu_str("loss", "Logloss");

		CHECK(gbml_train_values(&env, "boost", &v, 1, &ds, NULL, &model, &len) == GBML_EINVAL);
		CHECK(strstr(env.error, "[0, 1]") != NULL);
	}
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(boost_cancel_releases_memory)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_param_value v = tu_num("iterations", 100);
	tu_cancel	cancel = {.at_iteration = 3};

	gbml_env_init_malloc(&env, 2);
	make_data(&ds, &env, DATA_REGRESSION, 3000, 4, 1, 0);
	env.progress_fn = tu_cancel_progress;
	env.progress_ctx = &cancel;
	CHECK(gbml_train_values(&env, "boost", &v, 1, &ds, NULL, &model, &len) == GBML_ECANCELLED);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(boost_memory_budget_is_a_clean_error)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_param_value v[] = {tu_num("iterations", 5), tu_num("depth", 10), tu_num("border_count", 255)};
	size_t		held;

	gbml_env_init_malloc(&env, 2);
	make_data(&ds, &env, DATA_REGRESSION, 3000, 50, 1, 0);
	held = env.memory_used;
	env.memory_limit = held + (4 << 20);
	CHECK(gbml_train_values(&env, "boost", v, 3, &ds, NULL, &model, &len) == GBML_EBUDGET);
	CHECK(env.memory_used == held);
	env.memory_limit = 0;
	gbml_dataset_free(&ds, &env);
}

/* Rebuilds a container from a model's sections, replacing one section's bytes. */
TEST(boost_corrupt_models_are_rejected)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_model_reader r;
	gbml_rng	rng;
	gbml_param_value v[] = {tu_num("iterations", 5), tu_num("depth", 3)};
	uint32_t	tags[3] = {GBML_SECTION_BOOST_HEADER, GBML_SECTION_BOOST_TREES, GBML_SECTION_BOOST_BORDERS};
	int			rejected = 0,
				accepted = 0;
	float		x[3] = {0.5f, NAN, 0.25f};

	gbml_env_init_malloc(&env, 1);
	make_data(&ds, &env, DATA_REGRESSION, 500, 3, 1, 0);
	CHECK(gbml_train_values(&env, "boost", v, 2, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_model_open(&r, &env, model, len) == GBML_OK);

	/* targeted: a split feature index out of range */
	{
		const uint8_t *data;
		size_t		dlen;
		uint8_t    *copy,
				   *bad;
		size_t		blen;
		gbml_scorer sc;
		uint32_t	big = 3;

		CHECK(gbml_model_find(&r, GBML_SECTION_BOOST_TREES, &data, &dlen));
		copy = malloc(dlen);
		memcpy(copy, data, dlen);
		memcpy(copy + 4, &big, 4);	/* tree 0, level 0 feature */
		CHECK(tu_rebuild(&env, &r, GBML_SECTION_BOOST_TREES, copy, dlen, &bad, &blen) == GBML_OK);
		CHECK(gbml_scorer_load(&sc, &env, bad, blen) == GBML_ECORRUPT);
		CHECK(strstr(env.error, "feature index") != NULL);
		gbml_scorer_free(&sc, &env);
		gbml_free(&env, bad);
		free(copy);
	}

	/* fuzz: random byte changes and truncations inside each boost section */
	gbml_rng_seed(&rng, 99);
	for (int it = 0; it < 3000; it++)
	{
		uint32_t	tag = tags[it % 3];
		const uint8_t *data;
		size_t		dlen,
					blen,
					nlen;
		uint8_t    *copy,
				   *bad;
		gbml_scorer sc;
		int			rc;

		CHECK(gbml_model_find(&r, tag, &data, &dlen));
		copy = malloc(dlen + 8);
		memcpy(copy, data, dlen);
		nlen = dlen;
		switch (gbml_rng_below(&rng, 4))
		{
			case 0:
				nlen = gbml_rng_below(&rng, dlen + 1);	/* truncate */
				break;
			case 1:
				for (int k = 0; k < 4; k++)
					copy[gbml_rng_below(&rng, dlen)] = (uint8_t) gbml_rng_next(&rng);
				break;
			case 2:
				copy[gbml_rng_below(&rng, dlen)] ^= (uint8_t) (1u << gbml_rng_below(&rng, 8));
				break;
			default:
				{
					/* a random 32-bit word (counts, depths, indices) */
					uint32_t	w = (uint32_t) gbml_rng_next(&rng);
					size_t		at = gbml_rng_below(&rng, dlen >= 4 ? dlen - 3 : 1) & ~(size_t) 3;

					if (dlen >= 4)
						memcpy(copy + at, &w, 4);
				}
		}
		CHECK(tu_rebuild(&env, &r, tag, copy, nlen, &bad, &blen) == GBML_OK);
		rc = gbml_scorer_load(&sc, &env, bad, blen);
		CHECK(rc == GBML_OK || rc == GBML_ECORRUPT);
		if (rc == GBML_OK)
		{
			double		out;
			gbml_strbuf sb;
			double		imp[3];

			accepted++;
			CHECK(gbml_scorer_predict(&sc, &env, x, 3, GBML_OUT_SCORE, &out) == GBML_OK);
			gbml_sb_init(&sb, &env);
			CHECK(gbml_algorithm_boost.to_json(sc.handle, &sb) == GBML_OK);
			CHECK(gbml_algorithm_boost.importance(sc.handle, imp) == GBML_OK);
			gbml_sb_free(&sb);
		}
		else
			rejected++;
		gbml_scorer_free(&sc, &env);
		gbml_free(&env, bad);
		free(copy);
	}
	CHECK(rejected > 1000);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(boost_depth_one_and_constant_features)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	float		x[2];
	gbml_scorer sc;
	double		out;

	gbml_env_init_malloc(&env, 2);
	/* every feature constant: no split possible, the model is the mean */
	gbml_dataset_init(&ds, true);
	for (int i = 0; i < 100; i++)
	{
		gbml_row	row = {.x = x,.n_features = 2,.label = (float) (i % 4),.group_is_null = true,.weight_is_null = true};

		x[0] = 1;
		x[1] = 2;
		CHECK(gbml_dataset_append(&ds, &env, &row, true) == GBML_OK);
	}
	{
		gbml_param_value v[] = {tu_num("iterations", 10), tu_num("depth", 1)};

		CHECK(gbml_train_values(&env, "boost", v, 2, &ds, NULL, &model, &len) == GBML_OK);
		CHECK(tu_meta_number(&env, model, len, "trees") == 0);
		CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
		CHECK(gbml_scorer_predict(&sc, &env, x, 2, GBML_OUT_SCORE, &out) == GBML_OK);
		CHECK_NEAR(out, 1.5, 1e-6);
		gbml_scorer_free(&sc, &env);
		gbml_free(&env, model);
	}
	gbml_dataset_free(&ds, &env);
	/* a single row trains too */
	gbml_dataset_init(&ds, true);
	{
		gbml_row	row = {.x = x,.n_features = 2,.label = 7,.group_is_null = true,.weight_is_null = true};
		gbml_param_value v[] = {tu_num("iterations", 3)};

		CHECK(gbml_dataset_append(&ds, &env, &row, true) == GBML_OK);
		CHECK(gbml_train_values(&env, "boost", v, 1, &ds, NULL, &model, &len) == GBML_OK);
		gbml_free(&env, model);
	}
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(boost_zero_weight_rows_are_ignored)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_scorer sc;
	gbml_rng	rng;
	gbml_param_value v[] = {tu_num("iterations", 60), tu_num("depth", 4), tu_num("learning_rate", 0.3)};
	float		x[3];
	double		se = 0;
	int			n_good = 0;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, true);
	gbml_rng_seed(&rng, 8);
	for (int i = 0; i < 4000; i++)
	{
		gbml_row	row = {.x = x,.n_features = 3,.group_is_null = true};
		bool		junk = i % 4 == 0;

		for (int j = 0; j < 3; j++)
			x[j] = (float) gbml_rng_uniform(&rng);
		row.label = junk ? 100.0f : 2.0f * x[0];
		row.weight = junk ? 0.0f : 1.0f;
		CHECK(gbml_dataset_append(&ds, &env, &row, true) == GBML_OK);
	}
	CHECK(ds.has_weight);
	CHECK(gbml_train_values(&env, "boost", v, 3, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	for (int c = 0; c < ds.n_chunks; c++)
		for (int64_t r = 0; r < ds.chunks[c]->n_rows; r++)
			if (ds.chunks[c]->weight[r] > 0)
			{
				double		p;

				CHECK(gbml_scorer_predict(&sc, &env, gbml_dataset_row(&ds, c, r), 3, GBML_OUT_SCORE, &p) == GBML_OK);
				se += (p - ds.chunks[c]->label[r]) * (p - ds.chunks[c]->label[r]);
				n_good++;
			}
	/* the labels 100 of weight 0 would pull every prediction far up */
	CHECK(sqrt(se / n_good) < 0.1);
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}
