/*
 * test_onehot_shards.c — K-Means (one_hot) and the linear models on
 * categorical features across in-process shards (2 and 3, one empty, one
 * in files): every shard counts its training rows' categories, the
 * coordinator sums them into the union's and sends them back
 * (onehot_counts.h, exchanged by the harness as the glue does), and every
 * shard one-hot encodes its rows by them as the coordinator does — so
 * K-Means gives one server's model bytes, with eval_fraction too, and the
 * linear model one server's encoding ('ONEH') at its optimum.  The counts'
 * messages are checked whole: a damaged or foreign one adds nothing.
 */
#include "harness.h"
#include "chunk_store_file.h"
#include "onehot.h"
#include "onehot_counts.h"
#include "rng.h"
#include "test_shards_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OS_COLS 3
#define OS_ROWS 3000

/* a number; 12 categories, skewed, a tenth NULL; 4 categories */
static const int os_categories[OS_COLS] = {0, 12, 4};

typedef struct os_data
{
	gbml_feature_schema *schema;
	bool		squared;		/* regression labels for the linear model */
	int64_t		lone;			/* > 0: row lone - 1 alone on the first of two shards */
} os_data;

static void
os_row(int64_t i, float *x, float *label)
{
	gbml_rng	rng;
	double		u;

	gbml_rng_seed(&rng, 4242 + (uint64_t) i);
	x[0] = (float) (gbml_rng_uniform(&rng) * 3);
	u = gbml_rng_uniform(&rng);
	/* skewed: category c about twice as frequent as c + 1 */
	x[1] = (float) (u < 0.5 ? 0 : u < 0.75 ? 1 : u < 0.87 ? 2 : u < 0.93 ? 3 + gbml_rng_below(&rng, 3) :
					6 + gbml_rng_below(&rng, 6));
	x[2] = (float) gbml_rng_below(&rng, 4);
	*label = (float) (x[0] + ((int) x[1] % 5) * 0.8 - x[2] * 0.5 + gbml_rng_uniform(&rng) * 0.2);
	if (gbml_rng_uniform(&rng) < 0.1)
		x[1] = NAN;
}

static gbml_feature_schema *
os_schema(void)
{
	const char *const names[OS_COLS] = {"price", "region", "device"};

	return tu_schema(OS_COLS, names, os_categories);
}

static void
os_fill(gbml_dataset *ds, gbml_env *env, int shard, int n_shards, bool to_files, void *arg)
{
	const os_data *d = arg;
	float		x[OS_COLS];

	gbml_dataset_init(ds, true);
	ds->schema = d->schema;
	ds->chunk_rows = 400;
	if (to_files)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t i = 0; i < OS_ROWS; i++)
	{
		gbml_row	row = {0};
		/* 3 shards: the first empty; 2: a third of the rows on the first */
		int			owner = n_shards == 3 ? 1 + (int) ((i * 7) % 5 < 2) : (int) ((i * 13) % 3 == 0);

		if (d->lone > 0)
			owner = i == d->lone - 1 ? 0 : 1;

		if (shard >= 0 && owner != shard)
			continue;
		os_row(i, x, &row.label);
		row.x = x;
		row.n_features = OS_COLS;
		row.weight = 1.0f;
		row.group_is_null = true;
		CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK);
	}
}

TEST(onehot_shards_kmeans_gives_one_servers_bytes)
{
	os_data		d = {os_schema(), false, 0};
	gbml_param_value v[] = {tu_num("k", 4), tu_bool("one_hot", true), tu_num("random_seed", 5)};

	gbml_param_value ve[] = {tu_num("k", 4), tu_bool("one_hot", true), tu_num("eval_fraction", 0.2)};

	tu_check_same_bytes("kmeans", "one-hot K-Means", os_fill, &d, v, 3);
	/* the counts are the training rows' (after each shard's split), the eval rows gathered raw and encoded here */
	tu_check_same_bytes("kmeans", "one-hot K-Means, eval_fraction", os_fill, &d, ve, 3);
	tu_schema_free(d.schema);
}

/* The two models score every row alike (within 1e-4 of the scores' spread): the intercept is one server's form. */
static void
os_check_scores(const char *name, os_data *d, const uint8_t *m, size_t len, const uint8_t *ref, size_t ref_len)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_scorer a,
				b;
	double	   *pa = malloc(sizeof(double) * OS_ROWS),
			   *pb = malloc(sizeof(double) * OS_ROWS),
				worst = 0,
				spread = 0;

	gbml_env_init_malloc(&env, 1);
	os_fill(&ds, &env, -1, 1, false, d);
	CHECK(gbml_scorer_load(&a, &env, m, len) == GBML_OK);
	CHECK(gbml_scorer_load(&b, &env, ref, ref_len) == GBML_OK);
	CHECK(tu_score_dataset(&a, &env, &ds, GBML_OUT_SCORE, pa, NULL) == GBML_OK);
	CHECK(tu_score_dataset(&b, &env, &ds, GBML_OUT_SCORE, pb, NULL) == GBML_OK);
	for (int64_t i = 0; i < ds.n_rows; i++)
	{
		worst = fmax(worst, fabs(pa[i] - pb[i]));
		spread = fmax(spread, fabs(pb[i] - pb[0]));
	}
	CHECK(worst <= 1e-4 * spread);
	if (!(worst <= 1e-4 * spread))
		fprintf(stderr, "%s: scores differ by %g (spread %g)\n", name, worst, spread);
	gbml_scorer_free(&a, &env);
	gbml_scorer_free(&b, &env);
	gbml_dataset_free(&ds, &env);
	free(pa);
	free(pb);
}

/*
 * A sharded linear model against one server's (SAGA at a tight tol and
 * max_iter, which the shards' OWL-QN leaves out): one server's 'ONEH'
 * section and scores, its objective within 1e-6 (and its eval objective,
 * with eval rows, within 1e-4).
 */
static void
os_compare_saga(void *arg, const char *name, int n_shards, const uint8_t *m, size_t len, const uint8_t *ref,
				size_t ref_len)
{
	const uint32_t onehot_tag = GBML_SECTION_ONEHOT;
	const char *const keys[2] = {"objective", "eval_objective"};
	gbml_env	env;

	gbml_env_init_malloc(&env, 1);
	CHECK(tu_same_sections(&env, m, len, ref, ref_len, &onehot_tag, 1));
	os_check_scores(name, arg, m, len, ref, ref_len);
	for (int k = 0; k < 2; k++)
	{
		/* the eval objective is first-order in the weights' error (the solvers stop near 1e-5 of pseudo-gradient) */
		double		f = tu_meta_number(&env, m, len, keys[k]),
					f_ref = tu_meta_number(&env, ref, ref_len, keys[k]),
					tol = k == 0 ? 1e-6 : 1e-4;

		CHECK(isnan(f_ref) == isnan(f));
		CHECK(isnan(f_ref) || fabs(f - f_ref) <= tol * fabs(f_ref));
		if (!isnan(f_ref) && !(fabs(f - f_ref) <= tol * fabs(f_ref)))
			fprintf(stderr, "%s, %d shards: %s %.12g, one server's %.12g\n", name, n_shards, keys[k], f, f_ref);
	}
}

/* The linear model: one server's encoding (the 5 most frequent of each input, by the union's counts), its optimum. */
TEST(onehot_shards_saga_keeps_one_servers_categories)
{
	os_data		d = {os_schema(), true, 0};
	gbml_param_value v[] = {tu_str("loss", "squared"), tu_num("alpha", 1e-2), tu_bool("standardize", true),
	tu_num("max_categories", 5), tu_num("tol", 1e-12), tu_num("max_iter", 20000)};
	gbml_param_value ve[] = {tu_str("loss", "squared"), tu_num("alpha", 1e-2), tu_bool("standardize", true),
	tu_num("max_categories", 5), tu_num("eval_fraction", 0.25), tu_num("tol", 1e-12), tu_num("max_iter", 20000)};

	gbml_param_value vr[] = {tu_str("loss", "squared"), tu_num("alpha", 1e-2), tu_bool("standardize", false),
	tu_num("tol", 1e-12), tu_num("max_iter", 20000)};

	tu_check_sharded("saga", "one-hot saga", os_fill, &d, v, 6, 5, os_compare_saga, &d);
	/* not standardized: every column centred in the shards' solver only, the model's intercept given back */
	tu_check_sharded("saga", "one-hot saga, raw scale", os_fill, &d, vr, 5, 4, os_compare_saga, &d);
	tu_check_sharded("saga", "one-hot saga, eval_fraction", os_fill, &d, ve, 7, 6, os_compare_saga, &d);
	tu_schema_free(d.schema);
}

/*
 * A shard whose every row eval_fraction holds out, one with a NULL region:
 * its raw rows' missing-value flag outlived them, and with no row to
 * encode the shard refused to open ("features must be finite"; the
 * differential probe, seed 187).  One server's encoding and optimum.
 */
TEST(onehot_shards_saga_shard_whose_rows_are_all_held_out)
{
	os_data		d = {os_schema(), true, 0};
	gbml_param_value ve[] = {tu_str("loss", "squared"), tu_num("alpha", 1e-2), tu_bool("standardize", true),
	tu_num("max_categories", 5), tu_num("eval_fraction", 0.25), tu_num("tol", 1e-12), tu_num("max_iter", 20000)};
	int64_t		i = -1;
	float		x[OS_COLS],
				label;

	/* the first held-out row whose region is NULL */
	do
	{
		i = tu_first_held_out("saga", ve, 7, os_fill, &d, i + 1);
		if (i >= 0)
			os_row(i, x, &label);
	} while (i >= 0 && !isnan(x[1]));
	CHECK(i >= 0);
	d.lone = i + 1;
	tu_check_sharded("saga", "one-hot saga, a shard's one row held out", os_fill, &d, ve, 7, 6, os_compare_saga, &d);
	tu_schema_free(d.schema);
}

/* A shard's counts message summed; damaged or foreign ones refused whole; encoding by absent counts refused. */
TEST(onehot_shards_counts_messages_are_checked)
{
	os_data		d = {os_schema(), false, 0};
	gbml_env	env;
	gbml_dataset ds;
	gbml_strbuf msg;
	int64_t		region[13] = {0},
				device[5] = {0};
	int64_t    *counts[2] = {region, device};
	gbml_onehot_options o = {.algo = gbml_algorithm_by_name("kmeans"),.union_counts = true};
	gbml_onehot *enc;
	gbml_dataset xds,
				xeval;
	int64_t		rows = 0;

	gbml_env_init_malloc(&env, 1);
	os_fill(&ds, &env, -1, 1, false, &d);
	gbml_sb_init(&msg, &env);
	CHECK(gbml_onehot_counts_of_rows(&ds, "test", &env, &msg) == GBML_OK);
	CHECK(gbml_onehot_counts_add(d.schema, (const uint8_t *) msg.data, msg.len, counts, "s", &env) == GBML_OK);
	for (int c = 0; c <= 12; c++)
		rows += region[c];
	CHECK(rows == OS_ROWS);
	CHECK(region[12] > 0 && region[0] > region[11]);	/* NULLs counted; the skew */
	/* truncated, a count made negative, another feature's categories: errors, nothing added */
	CHECK(gbml_onehot_counts_add(d.schema, (const uint8_t *) msg.data, msg.len - 8, counts, "s", &env) == GBML_EINVAL);
	memset((char *) msg.data + msg.len - 8, 0xff, 8);
	CHECK(gbml_onehot_counts_add(d.schema, (const uint8_t *) msg.data, msg.len, counts, "s", &env) == GBML_EINVAL);
	CHECK(strstr(env.error, "s sent categories' counts of other features") != NULL);
	d.schema->features[2].n_categories = 3;
	CHECK(gbml_onehot_counts_add(d.schema, (const uint8_t *) msg.data, msg.len, counts, "s", &env) == GBML_EINVAL);
	d.schema->features[2].n_categories = 4;
	rows = 0;
	for (int c = 0; c <= 12; c++)
		rows += region[c];
	CHECK(rows == OS_ROWS);
	CHECK(!gbml_onehot_counts_is((const uint8_t *) "GBKM", 4));
	gbml_sb_free(&msg);
	/* the encoding by the union's counts, where a feature has none: an error naming it */
	d.schema->features[1].category_counts = region;
	CHECK(gbml_onehot_prepare(&ds, NULL, &o, &env, &enc, &xds, &xeval) == GBML_EINVAL);
	CHECK(strstr(env.error, "column \"device\" has no category counts") != NULL);
	d.schema->features[1].category_counts = NULL;
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
	tu_schema_free(d.schema);
}
