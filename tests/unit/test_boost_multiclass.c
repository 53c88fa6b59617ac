/*
 * test_boost_multiclass.c — boosting's MultiClass loss: the gradients are
 * the softmax cross-entropy's derivatives; a model learns three classes,
 * and the scorer's probabilities reproduce the trainer's own metric; the
 * bytes do not depend on threads, chunk order or tree shape options; the
 * best model keeps whole iterations (a tree per class); bad labels,
 * parameters and damaged headers are clear errors.
 */
#include "harness.h"
#include "boost.h"
#include "boost_histogram.h"
#include "boost_multiclass.h"
#include "model_format.h"
#include "rng.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#define MC_CLASSES 3

/* Rows whose class follows x0 and x1 (with noise): 0 low x0, 1 high x0 and low x1, 2 the rest. */
static void
make_classes(gbml_dataset *ds, gbml_env *env, int64_t n, int d, uint64_t seed, double missing)
{
	gbml_rng	rng;
	float	   *x = malloc(sizeof(float) * (size_t) d);

	gbml_dataset_init(ds, true);
	gbml_rng_seed(&rng, seed);
	for (int64_t i = 0; i < n; i++)
	{
		gbml_row	row = {0};
		double		noise = 0.2 * (gbml_rng_uniform(&rng) - 0.5);

		for (int j = 0; j < d; j++)
		{
			x[j] = (float) gbml_rng_uniform(&rng);
			if (j >= 2 && gbml_rng_uniform(&rng) < missing)
				x[j] = NAN;
		}
		row.x = x;
		row.n_features = d;
		row.label = x[0] + noise < 0.35 ? 0 : (x[1] + noise < 0.5 ? 1 : 2);
		row.group_is_null = true;
		row.weight_is_null = true;
		CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK);
	}
	free(x);
}

/* The weighted sum of -log softmax(pred)[label] over n rows (class-major): the test's own definition. */
static double
ref_loss_sum(const double *pred, const float *label, const float *weight, int n, int k)
{
	double		loss = 0;

	for (int r = 0; r < n; r++)
	{
		double		top = -INFINITY,
					s = 0;

		for (int c = 0; c < k; c++)
			top = fmax(top, pred[c * n + r]);
		for (int c = 0; c < k; c++)
			s += exp(pred[c * n + r] - top);
		loss += (weight ? weight[r] : 1.0) * (log(s) - (pred[(int) label[r] * n + r] - top));
	}
	return loss;
}

TEST(boost_multiclass_gradients_are_the_softmax_derivative)
{
	enum
	{
		N = 5, K = 4
	};
	double		pred[K * N],
				prob[K * N],
				grad[N],
				hess[N];
	float		label[N] = {0, 3, 1, 2, 3},
				weight[N] = {1, 0.5f, 2, 1, 3};
	gbml_rng	rng;
	double		sw = 0;

	gbml_rng_seed(&rng, 7);
	for (int i = 0; i < K * N; i++)
		pred[i] = 4 * (gbml_rng_uniform(&rng) - 0.5);
	for (int r = 0; r < N; r++)
		sw += weight[r];
	gbml_boost_multiclass_probs(pred, N, K, prob, 2);
	for (int r = 0; r < N; r++)
	{
		double		s = 0;

		for (int c = 0; c < K; c++)
			s += prob[c * N + r];
		CHECK_NEAR(s, 1.0, 1e-12);
	}
	for (int c = 0; c < K; c++)
	{
		double		grad2[N],
					hess2[N];

		gbml_boost_multiclass_gradients(prob, label, weight, N, K, c, 0, grad, hess, 1);
		/* an asked-for factor (XGBoost's 2) scales the hessians only */
		gbml_boost_multiclass_gradients(prob, label, weight, N, K, c, 2, grad2, hess2, 1);
		for (int r = 0; r < N; r++)
		{
			/* d/d pred[c][r] of the weighted sum of -log p(label), by central differences */
			double		h = 1e-6,
						keep = pred[c * N + r],
						up,
						down;

			pred[c * N + r] = keep + h;
			up = ref_loss_sum(pred, label, weight, N, K);
			pred[c * N + r] = keep - h;
			down = ref_loss_sum(pred, label, weight, N, K);
			pred[c * N + r] = keep;
			CHECK_NEAR(grad[r], (up - down) / (2 * h), 1e-6);
			/* the diagonal Newton hessian with Friedman's K/(K-1) */
			CHECK_NEAR(hess[r], weight[r] * (double) K / (K - 1) * prob[c * N + r] * (1 - prob[c * N + r]), 1e-15);
			CHECK(hess[r] > 0);
			CHECK(grad2[r] == grad[r]);
			CHECK_NEAR(hess2[r], weight[r] * 2 * prob[c * N + r] * (1 - prob[c * N + r]), 1e-15);
		}
	}
	/* accuracy: the highest score's class */
	{
		double		hits = 0;

		for (int r = 0; r < N; r++)
		{
			int			best = 0;

			for (int c = 1; c < K; c++)
				if (pred[c * N + r] > pred[best * N + r])
					best = c;
			hits += best == (int) label[r] ? weight[r] : 0;
		}
		/* the metrics' exact terms (MultiClass, Accuracy) against these sums */
		{
			double		max[GBML_BOOST_MULTICLASS_TERMS],
						scale[GBML_BOOST_MULTICLASS_TERMS];
			int64_t		sum[GBML_BOOST_MULTICLASS_TERMS];

			gbml_boost_multiclass_terms(pred, N, label, weight, N, K, NULL, max, NULL);
			for (int t = 0; t < GBML_BOOST_MULTICLASS_TERMS; t++)
				scale[t] = gbml_boost_fixed_scale(max[t], N);
			gbml_boost_multiclass_terms(pred, N, label, weight, N, K, scale, NULL, sum);
			CHECK_NEAR((double) sum[GBML_BOOST_MC_TERM_W] / scale[GBML_BOOST_MC_TERM_W], sw, 1e-9);
			CHECK_NEAR((double) sum[GBML_BOOST_MC_TERM_HIT] / scale[GBML_BOOST_MC_TERM_HIT], hits, 1e-9);
			CHECK_NEAR((double) sum[GBML_BOOST_MC_TERM_LOSS] / scale[GBML_BOOST_MC_TERM_LOSS],
					   ref_loss_sum(pred, label, weight, N, K), 1e-9);
		}
	}
}

/* Every row's class probabilities from the scorer; the mean -log p(label) and the accuracy. */
static void
score_classes(gbml_scorer *sc, gbml_env *env, const gbml_dataset *ds, double *logloss, double *accuracy)
{
	double		loss = 0,
				hits = 0;

	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++)
		{
			const float *x = gbml_dataset_row(ds, c, r);
			double		prob[MC_CLASSES + 1],
						cls,
						s = 0;
			int			best = 0;

			CHECK(gbml_scorer_classes(sc, env, x, ds->n_features, prob) == GBML_OK);
			for (int k = 0; k < sc->n_classes; k++)
			{
				s += prob[k];
				if (prob[k] > prob[best])
					best = k;
			}
			CHECK_NEAR(s, 1.0, 1e-12);
			CHECK(gbml_scorer_predict(sc, env, x, ds->n_features, GBML_OUT_SCORE, &cls) == GBML_OK);
			CHECK(cls == best);
			loss -= log(prob[(int) ds->chunks[c]->label[r]]);
			hits += best == (int) ds->chunks[c]->label[r];
		}
	*logloss = loss / (double) ds->n_rows;
	*accuracy = hits / (double) ds->n_rows;
}

TEST(boost_multiclass_learns_and_scorer_matches_trainer)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_scorer sc;
	gbml_param_value v[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 40), tu_num("depth", 4),
	tu_num("learning_rate", 0.3)};
	double		logloss,
				accuracy,
				out;

	gbml_env_init_malloc(&env, 2);
	make_classes(&ds, &env, 4000, 5, 3, 0.05);
	CHECK(gbml_train_values(&env, "boost", v, 4, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	CHECK(sc.n_classes == MC_CLASSES);
	CHECK(tu_meta_number(&env, model, len, "trees") == 40 * MC_CLASSES);
	CHECK(tu_meta_number(&env, model, len, "classes") == MC_CLASSES);
	score_classes(&sc, &env, &ds, &logloss, &accuracy);
	/* the trainer's predictions (from bins, column by column) are the scorer's (from floats, per class) */
	CHECK_NEAR(tu_meta_number(&env, model, len, "train_MultiClass"), logloss, 1e-9);
	CHECK(accuracy > 0.9);
	CHECK(logloss < 0.35);
	/* one probability is not defined for several classes: a clear error */
	CHECK(gbml_scorer_predict(&sc, &env, gbml_dataset_row(&ds, 0, 0), 5, GBML_OUT_PROBA, &out) == GBML_EUNSUPPORTED);
	CHECK(strstr(env.error, "predict_classes") != NULL);
	{
		gbml_strbuf sb;

		gbml_sb_init(&sb, &env);
		CHECK(gbml_algorithm_boost.to_json(sc.handle, &sb) == GBML_OK);
		gbml_sb_append(&sb, "", 1);
		CHECK(strstr(sb.data, "\"loss\":\"MultiClass\",\"classes\":3") != NULL);
		gbml_sb_free(&sb);
	}
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/* A model without classes answers predict_classes with an error, not a guess. */
TEST(boost_multiclass_classes_need_a_multiclass_model)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_scorer sc;
	gbml_param_value v[] = {tu_num("iterations", 3)};
	double		prob[4];

	gbml_env_init_malloc(&env, 1);
	make_classes(&ds, &env, 500, 3, 4, 0);
	CHECK(gbml_train_values(&env, "boost", v, 1, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	CHECK(sc.n_classes == 0);
	CHECK(gbml_scorer_classes(&sc, &env, gbml_dataset_row(&ds, 0, 0), 3, prob) == GBML_EUNSUPPORTED);
	CHECK(strstr(env.error, "MultiClass") != NULL);
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
}

/* Threads 1, 2, 3 and the chunks in reverse: the same bytes (subsample, missing values, noise, shapes). */
static void
check_deterministic(const gbml_param_value *v, int nv)
{
	uint8_t    *models[3] = {NULL, NULL, NULL};
	size_t		lens[3];
	gbml_env	envs[3];

	for (int i = 0; i < 3; i++)
	{
		gbml_dataset ds;

		gbml_env_init_malloc(&envs[i], i + 1);
		make_classes(&ds, &envs[i], 20000, 6, 9, 0.05);
		for (int a = 0, b = ds.n_chunks - 1; i == 1 && a < b; a++, b--)
		{
			gbml_chunk *t = ds.chunks[a];

			ds.chunks[a] = ds.chunks[b];
			ds.chunks[b] = t;
		}
		CHECK(gbml_train_values(&envs[i], "boost", v, nv, &ds, NULL, &models[i], &lens[i]) == GBML_OK);
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

TEST(boost_multiclass_deterministic_across_threads)
{
	gbml_param_value sym[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 8), tu_num("depth", 5),
		tu_num("subsample", 0.7), tu_num("random_seed", 5), tu_num("random_strength", 1),
	tu_num("border_count", 64)};
	gbml_param_value deep[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 6), tu_num("depth", 4),
	tu_str("grow_policy", "Depthwise"), tu_num("subsample", 0.8)};

	check_deterministic(sym, 7);
	check_deterministic(deep, 5);
}

/* An eval set, early stopping and the best model: whole iterations kept, the predictions rebuilt. */
TEST(boost_multiclass_best_model_keeps_whole_iterations)
{
	gbml_env	env;
	gbml_dataset ds,
				ev;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_scorer sc;
	gbml_param_value v[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 300), tu_num("depth", 6),
	tu_num("learning_rate", 0.9), tu_num("l2_leaf_reg", 0), tu_num("early_stopping_rounds", 5)};
	double		best,
				logloss,
				accuracy,
				eval_value;

	gbml_env_init_malloc(&env, 2);
	make_classes(&ds, &env, 1500, 4, 21, 0);
	make_classes(&ev, &env, 800, 4, 22, 0);
	CHECK(gbml_train_values(&env, "boost", v, 6, &ds, &ev, &model, &len) == GBML_OK);
	CHECK(tu_meta_number(&env, model, len, "stopped_early") == 1);
	best = tu_meta_number(&env, model, len, "best_iteration");
	CHECK(best >= 1 && best < tu_meta_number(&env, model, len, "iterations_run"));
	CHECK(tu_meta_number(&env, model, len, "trees") == best * MC_CLASSES);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	/* the kept trees score the eval rows to the best value, the training rows to the train value */
	eval_value = tu_meta_number(&env, model, len, "eval_value");
	score_classes(&sc, &env, &ev, &logloss, &accuracy);
	CHECK_NEAR(logloss, eval_value, 1e-9);
	score_classes(&sc, &env, &ds, &logloss, &accuracy);
	CHECK_NEAR(tu_meta_number(&env, model, len, "train_MultiClass"), logloss, 1e-9);
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&ev, &env);
	CHECK(env.memory_used == 0);
}

/* classes_count above the labels: the absent class gets its trees and a small probability. */
TEST(boost_multiclass_classes_count_keeps_an_absent_class)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_scorer sc;
	gbml_param_value v[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 20), tu_num("classes_count", 4)};
	double		prob[4];

	gbml_env_init_malloc(&env, 1);
	make_classes(&ds, &env, 1000, 3, 5, 0);
	CHECK(gbml_train_values(&env, "boost", v, 3, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	CHECK(sc.n_classes == 4);
	CHECK(tu_meta_number(&env, model, len, "trees") == 80);
	CHECK(gbml_scorer_classes(&sc, &env, gbml_dataset_row(&ds, 0, 0), 3, prob) == GBML_OK);
	CHECK(prob[3] < 0.05 && prob[3] > 0);
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
}

/*
 * An eval label the training rows lack (an eval share can hold a rare
 * class's every row): without classes_count the class count is the largest
 * label of both + 1, so the model has the class, with a small probability,
 * and trees the same as classes_count's (the params differ: recorded).
 */
TEST(boost_multiclass_eval_only_class_counts)
{
	gbml_env	env;
	gbml_dataset ds,
				ev;
	uint8_t    *model = NULL,
			   *counted = NULL;
	size_t		len,
				counted_len;
	gbml_scorer sc;
	gbml_param_value v[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 10)};
	gbml_param_value v4[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 10), tu_num("classes_count", 4)};
	double		prob[4];

	gbml_env_init_malloc(&env, 1);
	make_classes(&ds, &env, 600, 3, 5, 0);
	make_classes(&ev, &env, 200, 3, 6, 0);
	ev.chunks[0]->label[11] = 3;
	CHECK(gbml_train_values(&env, "boost", v, 2, &ds, &ev, &model, &len) == GBML_OK);
	CHECK(gbml_train_values(&env, "boost", v4, 3, &ds, &ev, &counted, &counted_len) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	CHECK(sc.n_classes == 4);
	CHECK(tu_meta_number(&env, model, len, "trees") == 40);
	CHECK(gbml_scorer_classes(&sc, &env, gbml_dataset_row(&ds, 0, 0), 3, prob) == GBML_OK);
	CHECK(prob[3] < 0.05 && prob[3] > 0);
	CHECK_NEAR(tu_meta_number(&env, model, len, "eval_value"), tu_meta_number(&env, counted, counted_len, "eval_value"),
			   0);
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_free(&env, counted);
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&ev, &env);
	CHECK(env.memory_used == 0);
}

/* Trains with v on rows whose labels are set by `label` (NULL: the generator's); the status, env.error set. */
static int
train_labels(gbml_env *env, const gbml_param_value *v, int nv, float bad_label, bool on_eval)
{
	gbml_dataset ds,
				ev;
	uint8_t    *model = NULL;
	size_t		len;
	int			rc;

	make_classes(&ds, env, 300, 3, 8, 0);
	make_classes(&ev, env, 100, 3, 9, 0);
	if (!isnan(bad_label))
		(on_eval ? ev.chunks[0] : ds.chunks[0])->label[7] = bad_label;
	rc = gbml_train_values(env, "boost", v, nv, &ds, on_eval ? &ev : NULL, &model, &len);
	gbml_free(env, model);
	gbml_dataset_free(&ds, env);
	gbml_dataset_free(&ev, env);
	return rc;
}

TEST(boost_multiclass_bad_labels_and_parameters)
{
	gbml_env	env;
	gbml_param_value mc[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 2)};
	gbml_param_value two[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 2), tu_num("classes_count", 2)};
	gbml_param_value three[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 2), tu_num("classes_count", 3)};
	gbml_param_value rmse_acc[] = {tu_str("loss", "RMSE"), tu_str("eval_metric", "Accuracy")};
	gbml_param_value mc_auc[] = {tu_str("loss", "MultiClass"), tu_str("eval_metric", "AUC")};
	gbml_param_value mc_l2[] = {tu_str("loss", "MultiClass"), tu_str("score_function", "L2")};

	gbml_env_init_malloc(&env, 1);
	CHECK(train_labels(&env, mc, 2, 1.5f, false) == GBML_EINVAL);
	CHECK(strstr(env.error, "class ids") != NULL);
	CHECK(train_labels(&env, mc, 2, -1, false) == GBML_EINVAL);
	CHECK(train_labels(&env, mc, 2, 5000, false) == GBML_EINVAL);
	/* an eval label past classes_count (without it the class count takes the eval labels too) */
	CHECK(train_labels(&env, three, 3, 3, true) == GBML_EINVAL);
	CHECK(strstr(env.error, "eval label 3 is not below the class count 3") != NULL);
	CHECK(train_labels(&env, mc, 2, 3, true) == GBML_OK);
	CHECK(train_labels(&env, two, 3, NAN, false) == GBML_EINVAL);
	CHECK(strstr(env.error, "class count 2") != NULL);
	CHECK(train_labels(&env, rmse_acc, 2, NAN, false) == GBML_EINVAL);
	CHECK(train_labels(&env, mc_auc, 2, NAN, false) == GBML_EINVAL);
	CHECK(train_labels(&env, mc_l2, 2, NAN, false) == GBML_EINVAL);
	CHECK(env.memory_used == 0);
}

/* A header whose class count is out of range or does not divide the trees is a corrupt model. */
TEST(boost_multiclass_damaged_header_is_rejected)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_param_value v[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 4)};
	gbml_model_reader r;
	const uint8_t *hdr;
	size_t		hlen;
	uint32_t	bad[] = {1, 0, 5, GBML_BOOST_MAX_CLASSES + 1};

	gbml_env_init_malloc(&env, 1);
	make_classes(&ds, &env, 600, 3, 6, 0);
	CHECK(gbml_train_values(&env, "boost", v, 2, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_model_open(&r, &env, model, len) == GBML_OK);
	/* 24 bytes as every header, the class count, a base score a class */
	CHECK(gbml_model_find(&r, GBML_SECTION_BOOST_HEADER, &hdr, &hlen) && hlen == 28 + 8 * MC_CLASSES);
	for (size_t i = 0; i <= sizeof(bad) / sizeof(bad[0]); i++)
	{
		uint8_t		body[28 + 8 * MC_CLASSES],
				   *out = NULL;
		size_t		olen;
		gbml_scorer sc;

		memcpy(body, hdr, hlen);
		if (i < sizeof(bad) / sizeof(bad[0]))
			memcpy(body + 24, &bad[i], 4);
		else
		{
			double		inf = INFINITY;

			memcpy(body + 28 + 8, &inf, 8);	/* class 1's base score */
		}
		CHECK(tu_rebuild(&env, &r, GBML_SECTION_BOOST_HEADER, body, hlen, &out, &olen) == GBML_OK);
		CHECK(gbml_scorer_load(&sc, &env, out, olen) == GBML_ECORRUPT);
		gbml_free(&env, out);
	}
	/* without its class count (or a base score) the header is the wrong size */
	{
		uint8_t    *out = NULL;
		size_t		olen;
		gbml_scorer sc;

		CHECK(tu_rebuild(&env, &r, GBML_SECTION_BOOST_HEADER, hdr, 24, &out, &olen) == GBML_OK);
		CHECK(gbml_scorer_load(&sc, &env, out, olen) == GBML_ECORRUPT);
		gbml_free(&env, out);
		CHECK(tu_rebuild(&env, &r, GBML_SECTION_BOOST_HEADER, hdr, hlen - 8, &out, &olen) == GBML_OK);
		CHECK(gbml_scorer_load(&sc, &env, out, olen) == GBML_ECORRUPT);
		gbml_free(&env, out);
	}
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/*
 * Every class's tree of an iteration grows on the gradients at the
 * iteration's start (not after the earlier classes' trees): so the classes'
 * order does not matter, and with the classes renamed (0 <-> 2) the first
 * iteration's tree for class 0 is the renamed model's tree for class 2,
 * byte for byte.
 */
TEST(boost_multiclass_trees_of_an_iteration_share_its_start)
{
	gbml_env	env;
	uint8_t    *model[2] = {NULL, NULL};
	size_t		len[2];
	const uint8_t *trees[2];
	size_t		tlen[2];
	gbml_param_value v[] = {tu_str("loss", "MultiClass"), tu_num("iterations", 1), tu_num("depth", 3)};
	const size_t tree_bytes = 4 + 3 * 12 + 8 * 4;	/* depth word, 3 splits, 8 leaves */

	gbml_env_init_malloc(&env, 1);
	for (int m = 0; m < 2; m++)
	{
		gbml_dataset ds;
		gbml_model_reader r;

		make_classes(&ds, &env, 2000, 4, 12, 0);
		for (int c = 0; m == 1 && c < ds.n_chunks; c++)
			for (int64_t i = 0; i < ds.chunks[c]->n_rows; i++)
				ds.chunks[c]->label[i] = 2 - ds.chunks[c]->label[i];
		CHECK(gbml_train_values(&env, "boost", v, 3, &ds, NULL, &model[m], &len[m]) == GBML_OK);
		CHECK(gbml_model_open(&r, &env, model[m], len[m]) == GBML_OK);
		CHECK(gbml_model_find(&r, GBML_SECTION_BOOST_TREES, &trees[m], &tlen[m]));
		gbml_dataset_free(&ds, &env);
	}
	CHECK(tlen[0] == 3 * tree_bytes && tlen[1] == 3 * tree_bytes);
	CHECK(memcmp(trees[0], trees[1] + 2 * tree_bytes, tree_bytes) == 0);
	CHECK(memcmp(trees[0] + 2 * tree_bytes, trees[1], tree_bytes) == 0);
	CHECK(memcmp(trees[0] + tree_bytes, trees[1] + tree_bytes, tree_bytes) == 0);
	gbml_free(&env, model[0]);
	gbml_free(&env, model[1]);
}
