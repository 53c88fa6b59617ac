/*
 * test_saga_shards.c — the linear models across shards (saga_shards.h)
 * with the shards in this process: the rows dealt to 2 or 3 shards (one
 * empty, one in files) reach the single-server SAGA optimum (run to a tight
 * tolerance) within 1e-6 of its objective, for logistic with ridge and
 * standardization, squared loss with elastic net and row weights, and the
 * lasso (which must zero some weights there too); the pseudo-gradient at
 * the solution is ~0.  Labels outside the classes, one class only, and a
 * shard that fails are errors naming the problem.  An eval set of the
 * coordinator's own (eval_source) is scored there.
 */
#include "harness.h"
#include "chunk_store_file.h"
#include "rng.h"
#include "test_shards_util.h"

#include <stdlib.h>
#include <string.h>

typedef struct sg_data
{
	int64_t		n;
	int			d;
	bool		squared;		/* regression labels, else classes 0/1 */
	bool		weights;
	float		bad_label;		/* != 0: row 17's label (logistic) */
	bool		one_class;
	int64_t		first;			/* the rows are those from this index on (an eval set's: other rows) */
	int64_t		lone;			/* > 0: row lone - 1 alone on the last shard */
} sg_data;

static void
sg_fill(gbml_dataset *ds, gbml_env *env, int shard, int n_shards, bool to_files, void *arg)
{
	const sg_data *s = arg;
	float	   *x = malloc(sizeof(float) * (size_t) s->d);

	gbml_dataset_init(ds, false);
	ds->chunk_rows = 700;
	if (to_files)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t i = 0; i < s->n; i++)
	{
		gbml_row	row = {0};
		int			owner = n_shards == 3 ? (int) ((i * 7) % 5 < 3 ? 0 : 1) : (int) ((i * 13) % 3 == 0);

		if (s->lone > 0)
			owner = i == s->lone - 1 ? n_shards - 1 : 0;
		gbml_rng	rng;
		double		z = 0.3;

		if (shard >= 0 && owner != shard)
			continue;
		gbml_rng_seed(&rng, 5150 + (uint64_t) (s->first + i));
		for (int j = 0; j < s->d; j++)
		{
			x[j] = (float) (gbml_rng_uniform(&rng) * 4 - 2 + (j == 1 ? 50 : 0));
			z += (j % 3 == 0 ? 1.5 : j % 3 == 1 ? -0.7 : 0.0) * (x[j] - (j == 1 ? 50 : 0));
		}
		row.x = x;
		row.n_features = s->d;
		if (s->squared)
			row.label = (float) (z + gbml_rng_uniform(&rng) - 0.5);
		else
			row.label = s->one_class ? 1.0f : (gbml_rng_uniform(&rng) < 1.0 / (1.0 + exp(-z))) ? 1.0f : 0.0f;
		if (s->bad_label != 0 && i == 17)
			row.label = s->bad_label;
		row.weight = s->weights ? (float) (0.5 + (i % 4) * 0.5) : 1.0f;
		row.group_is_null = true;
		CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK);
	}
	free(x);
}

/* The model's META number `key`. */
static double
meta(const uint8_t *model, size_t len, const char *key)
{
	gbml_env	env;

	gbml_env_init_malloc(&env, 1);
	return tu_meta_number(&env, model, len, key);
}

/* What a sharded linear model is checked for: its rows' width (the lasso's zeros), or its eval rows' count range. */
typedef struct sg_expect
{
	const sg_data *s;
	bool		lasso;
	int64_t		min_eval,
				max_eval;
} sg_expect;

/* Sharded OWL-QN at the single-server SAGA objective (SAGA run to tol 1e-12) within 1e-6, its pseudo-gradient ~0. */
static void
sg_compare_optimum(void *arg, const char *name, int n_shards, const uint8_t *m, size_t len, const uint8_t *ref,
				   size_t ref_len)
{
	const sg_expect *e = arg;
	double		f = meta(m, len, "objective"),
				f_ref = meta(ref, ref_len, "objective");

	CHECK(fabs(f - f_ref) <= 1e-6 * fabs(f_ref));
	/* at the optimum: a small pseudo-gradient */
	CHECK(meta(m, len, "pg_max") <= 1e-5);
	CHECK(!e->lasso || meta(m, len, "n_nonzero") < e->s->d);
	if (!(fabs(f - f_ref) <= 1e-6 * fabs(f_ref)))
		fprintf(stderr, "%s, %d shards: objective %.12g, one server's SAGA %.12g\n", name, n_shards, f, f_ref);
}

static void
sg_check_optimum(const char *name, const sg_data *s, const gbml_param_value *v, int nv, bool lasso)
{
	gbml_param_value tight[16];
	sg_expect	e = {s, lasso, 0, 0};

	memcpy(tight, v, sizeof(gbml_param_value) * nv);
	tight[nv] = tu_num("tol", 1e-12);
	tight[nv + 1] = tu_num("max_iter", 20000);
	tu_check_sharded("saga", name, sg_fill, (void *) s, tight, nv + 2, nv, sg_compare_optimum, &e);
}

TEST(saga_shards_logistic_ridge_standardized_reaches_the_optimum)
{
	sg_data		s = {6000, 6, false, false, 0, false, 0, 0};
	gbml_param_value v[] = {tu_str("loss", "logistic"), tu_num("alpha", 1e-3), tu_bool("standardize", true)};

	sg_check_optimum("logistic, ridge, standardized", &s, v, 3, false);
}

TEST(saga_shards_squared_elastic_net_weights_reaches_the_optimum)
{
	sg_data		s = {5000, 5, true, true, 0, false, 0, 0};
	gbml_param_value v[] = {tu_str("loss", "squared"), tu_num("alpha", 1e-2), tu_num("l1_ratio", 0.5),
	tu_bool("standardize", true)};

	sg_check_optimum("squared, elastic net, weights", &s, v, 4, false);
}

TEST(saga_shards_lasso_zeroes_weights_at_the_optimum)
{
	sg_data		s = {5000, 7, false, false, 0, false, 0, 0};
	gbml_param_value v[] = {tu_str("loss", "logistic"), tu_num("alpha", 2e-2), tu_num("l1_ratio", 1),
	tu_bool("standardize", true)};

	sg_check_optimum("logistic, lasso", &s, v, 4, true);
}

/*
 * An eval set of the coordinator's own (eval_source): scored there with the
 * shards' model, its objective within 1e-6 of one server's at the optimum;
 * an eval label outside the training classes is refused as on one server.
 */
TEST(saga_shards_eval_source_is_scored_on_the_coordinator)
{
	sg_data		s = {5000, 5, false, false, 0, false, 0, 0};
	sg_data		e = {900, 5, false, false, 0, false, 70000, 0};
	sg_data		bad = {900, 5, false, false, 2.0f, false, 70000, 0};
	gbml_param_value v[] = {tu_str("loss", "logistic"), tu_num("alpha", 1e-3), tu_bool("standardize", true),
	tu_num("tol", 1e-12), tu_num("max_iter", 20000)};
	gbml_env	env;
	gbml_dataset ds,
				ev;
	uint8_t    *ref,
			   *m;
	size_t		ref_len,
				len;
	char		error[512];

	gbml_env_init_malloc(&env, 2);
	sg_fill(&ds, &env, -1, 1, false, &s);
	sg_fill(&ev, &env, -1, 1, false, &e);
	CHECK(tu_train_eval("saga", &ds, &ev, &env, v, 5, &ref, &ref_len) == GBML_OK);
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&ev, &env);
	m = tu_train_sharded_eval("saga", sg_fill, &s, sg_fill, &e, 2, v, 3, 0, &len, error, sizeof(error));
	CHECK(m != NULL);
	if (m)
	{
		double		f = meta(m, len, "eval_objective"),
					f_ref = meta(ref, ref_len, "eval_objective");

		CHECK(isfinite(f) && fabs(f - f_ref) <= 1e-6 * fabs(f_ref));
		CHECK(meta(m, len, "eval_rows") == 900);
		CHECK(fabs(meta(m, len, "eval_value") - f) == 0);
	}
	free(m);
	free(ref);
	m = tu_train_sharded_eval("saga", sg_fill, &s, sg_fill, &bad, 2, v, 3, 0, &len, error, sizeof(error));
	CHECK(m == NULL && strstr(error, "the eval set") != NULL);
	free(m);
}

/* eval_fraction: the rows the shards held out, gathered and scored on the coordinator, are one server's. */
static void
sg_compare_eval(void *arg, const char *name, int n_shards, const uint8_t *m, size_t len, const uint8_t *ref,
				size_t ref_len)
{
	const sg_expect *e = arg;
	double		f = meta(m, len, "eval_objective"),
				f_ref = meta(ref, ref_len, "eval_objective");

	CHECK(isfinite(f) && fabs(f - f_ref) <= 1e-6 * fabs(f_ref));
	CHECK(meta(m, len, "eval_rows") == meta(ref, ref_len, "eval_rows"));
	CHECK(meta(m, len, "eval_rows") > e->min_eval && meta(m, len, "eval_rows") < e->max_eval);
	if (!(fabs(f - f_ref) <= 1e-6 * fabs(f_ref)))
		fprintf(stderr, "%s, %d shards: eval objective %.12g, one server's %.12g\n", name, n_shards, f, f_ref);
}

static void
sg_check_eval_fraction(const char *name, const sg_data *s, int64_t min_eval, int64_t max_eval)
{
	gbml_param_value v[] = {tu_str("loss", "squared"), tu_num("alpha", 1e-3), tu_bool("standardize", true),
	tu_num("eval_fraction", 0.2), tu_num("tol", 1e-12), tu_num("max_iter", 20000)};
	sg_expect	e = {s, false, min_eval, max_eval};

	tu_check_sharded("saga", name, sg_fill, (void *) s, v, 6, 4, sg_compare_eval, &e);
}

TEST(saga_shards_eval_fraction_is_gathered_and_scored)
{
	sg_data		s = {6000, 5, true, true, 0, false, 0, 0};

	sg_check_eval_fraction("eval_fraction", &s, 900, 1500);
}

/* A shard whose every row is held out (its only one): the row is gathered as one server holds it out. */
TEST(saga_shards_a_shard_whose_rows_are_all_held_out)
{
	sg_data		s = {3000, 5, true, true, 0, false, 0, 0};
	gbml_param_value v[] = {tu_str("loss", "squared"), tu_num("eval_fraction", 0.2)};
	int64_t		i = tu_first_held_out("saga", v, 2, sg_fill, &s, 0);

	CHECK(i >= 0);
	s.lone = i + 1;
	sg_check_eval_fraction("a shard whose one row is held out", &s, 450, 750);
}

TEST(saga_shards_label_errors_and_a_failing_shard)
{
	gbml_param_value v[] = {tu_str("loss", "logistic")};
	sg_data		bad = {2000, 3, false, false, 0.5f, false, 0, 0},
				one = {2000, 3, false, false, 0, true, 0, 0},
				good = {2000, 3, false, false, 0, false, 0, 0};
	char		error[512];
	size_t		len;
	uint8_t    *m;

	m = tu_train_sharded("saga", sg_fill, &bad, 2, v, 1, 0, &len, error, sizeof(error));
	CHECK(m == NULL && strstr(error, "label 0.5") != NULL && strstr(error, "shard") != NULL);
	free(m);
	m = tu_train_sharded("saga", sg_fill, &one, 2, v, 1, 0, &len, error, sizeof(error));
	CHECK(m == NULL && strstr(error, "both classes") != NULL);
	free(m);
	m = tu_train_sharded("saga", sg_fill, &good, 2, v, 1, 4, &len, error, sizeof(error));
	CHECK(m == NULL && strstr(error, "shard2") != NULL && strstr(error, "planted failure") != NULL);
	free(m);
}
