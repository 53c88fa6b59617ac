/*
 * test_onehot_shards.c — K-Means (one_hot) and the linear models on
 * categorical features across in-process shards (2 and 3, one empty, one
 * in files): every shard one-hot encodes its rows by the union's rows per
 * category (the schema's category_counts, which the glue's probe counts),
 * as the coordinator does, so K-Means gives one server's model bytes and
 * the linear model one server's encoding ('ONEH') at its optimum.  A shard
 * given no counts, or counts that differ from the rows' (a category
 * missing), must not train to one server's model.
 */
#include "harness.h"
#include "chunk_store_file.h"
#include "onehot.h"
#include "rng.h"
#include "test_shards_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OS_COLS 3
#define OS_ROWS 3000

/* a number; 12 categories, skewed, a tenth NULL; 4 categories */
static const int os_categories[OS_COLS] = {0, 12, 4};
static int64_t os_counts[OS_COLS][13];

typedef struct os_data
{
	gbml_feature_schema *schema;
	bool		squared;		/* regression labels for the linear model */
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

/* The schema, its counts the union's (every row's) as the glue's probe gives them. */
static gbml_feature_schema *
os_schema(void)
{
	const char *const names[OS_COLS] = {"price", "region", "device"};
	gbml_feature_schema *s = tu_schema(OS_COLS, names, os_categories);
	float		x[OS_COLS],
				y;

	memset(os_counts, 0, sizeof(os_counts));
	for (int64_t i = 0; i < OS_ROWS; i++)
	{
		os_row(i, x, &y);
		for (int j = 1; j < OS_COLS; j++)
			os_counts[j][isnan(x[j]) ? os_categories[j] : (int) x[j]]++;
	}
	for (int j = 1; j < OS_COLS; j++)
		s->features[j].category_counts = os_counts[j];
	return s;
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
	os_data		d = {os_schema(), false};
	gbml_param_value v[] = {tu_num("k", 4), tu_bool("one_hot", true), tu_num("random_seed", 5)};

	tu_check_same_bytes("kmeans", "one-hot K-Means", os_fill, &d, v, 3);
	tu_schema_free(d.schema);
}

/* The linear model: one server's encoding (the 5 most frequent of each input, by the union's counts), its optimum. */
TEST(onehot_shards_saga_keeps_one_servers_categories)
{
	os_data		d = {os_schema(), true};
	gbml_param_value v[] = {tu_str("loss", "squared"), tu_num("alpha", 1e-2), tu_bool("standardize", true),
	tu_num("max_categories", 5), tu_num("tol", 1e-12), tu_num("max_iter", 20000)};
	const uint32_t onehot_tag = GBML_SECTION_ONEHOT;
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *ref;
	size_t		ref_len;
	char		error[512];

	gbml_env_init_malloc(&env, 2);
	os_fill(&ds, &env, -1, 1, false, &d);
	CHECK(tu_train("saga", &ds, &env, v, 6, &ref, &ref_len) == GBML_OK);
	gbml_dataset_free(&ds, &env);
	for (int n_shards = 2; n_shards <= 3; n_shards++)
	{
		size_t		len = 0;
		uint8_t    *m = tu_train_sharded("saga", os_fill, &d, n_shards, v, 4, 0, &len, error, sizeof(error));
		double		f,
					f_ref;

		CHECK(m != NULL);
		if (m == NULL)
		{
			fprintf(stderr, "one-hot saga, %d shards: %s\n", n_shards, error);
			continue;
		}
		CHECK(tu_same_sections(&env, m, len, ref, ref_len, &onehot_tag, 1));
		f = tu_meta_number(&env, m, len, "objective");
		f_ref = tu_meta_number(&env, ref, ref_len, "objective");
		CHECK(fabs(f - f_ref) <= 1e-6 * fabs(f_ref));
		if (!(fabs(f - f_ref) <= 1e-6 * fabs(f_ref)))
			fprintf(stderr, "one-hot saga, %d shards: objective %.12g, one server's %.12g\n", n_shards, f, f_ref);
		free(m);
	}
	free(ref);
	tu_schema_free(d.schema);
}

/* Shards without the union's counts are refused; counts that miss a category give another model. */
TEST(onehot_shards_need_the_unions_counts)
{
	os_data		d = {os_schema(), false};
	gbml_param_value v[] = {tu_num("k", 4), tu_bool("one_hot", true), tu_num("random_seed", 5)};
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *ref,
			   *m;
	size_t		ref_len,
				len = 0;
	char		error[512] = "";

	gbml_env_init_malloc(&env, 2);
	os_fill(&ds, &env, -1, 1, false, &d);
	CHECK(tu_train("kmeans", &ds, &env, v, 3, &ref, &ref_len) == GBML_OK);
	gbml_dataset_free(&ds, &env);

	d.schema->features[2].category_counts = NULL;
	m = tu_train_sharded("kmeans", os_fill, &d, 2, v, 3, 0, &len, error, sizeof(error));
	CHECK(m == NULL);
	CHECK(strstr(error, "column \"device\" has no category counts") != NULL);
	free(m);

	/* category 3 counted as absent: the shards and the coordinator leave it out alike, unlike one server */
	d.schema->features[2].category_counts = os_counts[2];
	os_counts[2][3] = 0;
	m = tu_train_sharded("kmeans", os_fill, &d, 2, v, 3, 0, &len, error, sizeof(error));
	CHECK(m != NULL);
	CHECK(m == NULL || len != ref_len || memcmp(m, ref, len) != 0);
	free(m);
	free(ref);
	tu_schema_free(d.schema);
}
