/*
 * test_boost_shards_categorical.c — boosting with categorical inputs when
 * the rows are on other servers (boost_shards_cat.c, boost_shard_cat.c):
 * the derived features (one-hot, ordered target statistics, counters) give
 * one server's model bytes with 2 and 3 in-process shards (one of them in
 * files, one empty) for RMSE, Logloss, YetiRank's queries and MultiClass;
 * with a border sample smaller than the union, subsample, eval_fraction
 * (the shards bin their eval rows with the final statistics) and an
 * eval_source of the coordinator's own; the pages of ids and bins are
 * small here, so every training takes several; Depthwise trees that split
 * categories as sets (each set split's mask sent with its level); a
 * pointwise loss with query ids whose queries span shards (the statistics
 * along the union's grouped order).
 */
#include "harness.h"
#include "boost.h"
#include "boost_ctr.h"
#include "chunk_store_file.h"
#include "model_format.h"
#include "rng.h"
#include "test_shards_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SC_COLS 4

typedef enum
{
	SC_REGRESSION,
	SC_BINARY,
	SC_RANKING,					/* queries of 10 rows, relevance 0..4 */
	SC_CLASSES					/* 4 classes */
} sc_label;

typedef struct sc_data
{
	int64_t		n;
	sc_label	label;
	int64_t		first;			/* rows from this index on (an eval set's: other rows) */
	bool		constant;		/* every categorical value category 0: no derived feature at all */
	int64_t		lone;			/* > 0: the row lone - 1 (its query) alone on the last shard */
	bool		groups;			/* a pointwise label with query ids (queries of 10 rows), dealt row by row */
} sc_data;

/* numeric; 40 categories (a tenth NULL); 3 categories (one-hot); 300 categories (almost an id) */
static const int sc_categories[SC_COLS] = {0, 40, 3, 300};
static gbml_feature_schema sc_schema;
static gbml_feature_def sc_def[SC_COLS];

static void
sc_make_schema(void)
{
	sc_schema.n_features = SC_COLS;
	sc_schema.features = sc_def;
	for (int j = 0; j < SC_COLS; j++)
	{
		gbml_feature_def *f = &sc_def[j];
		char		name[32];

		snprintf(name, sizeof(name), "c%d", j);
		f->name = f->column = strdup(name);
		f->source_type = strdup(sc_categories[j] ? "text" : "real");
		f->kind = sc_categories[j] ? GBML_FEATURE_CATEGORICAL : GBML_FEATURE_NUMERIC;
		f->n_categories = sc_categories[j];
		f->categories = f->n_categories ? malloc(sizeof(char *) * (size_t) f->n_categories) : NULL;
		for (int c = 0; c < f->n_categories; c++)
		{
			snprintf(name, sizeof(name), "v%05d", c);
			f->categories[c] = strdup(name);
		}
	}
}

static void
sc_free_schema(void)
{
	for (int j = 0; j < SC_COLS; j++)
	{
		for (int c = 0; c < sc_def[j].n_categories; c++)
			free(sc_def[j].categories[c]);
		free(sc_def[j].categories);
		free(sc_def[j].name);
		free(sc_def[j].source_type);
	}
	memset(sc_def, 0, sizeof(sc_def));
}

static void
sc_row(const sc_data *s, int64_t i, float *x, float *label)
{
	int64_t		p = s->first + i;
	gbml_rng	rng;
	double		noise;
	int			c;

	gbml_rng_seed(&rng, 777 + (uint64_t) p);
	x[0] = (float) gbml_rng_uniform(&rng);
	x[1] = (float) gbml_rng_below(&rng, 40);
	x[2] = (float) gbml_rng_below(&rng, 3);
	x[3] = (float) gbml_rng_below(&rng, 300);
	noise = gbml_rng_uniform(&rng) - 0.5;
	c = (int) x[1];
	if (gbml_rng_uniform(&rng) < 0.1)
		x[1] = NAN;
	if (s->constant)
		x[1] = x[2] = x[3] = 0;
	switch (s->label)
	{
		case SC_REGRESSION:
			*label = (float) (((c * 7) % 13) / 2.0 - 3.0 + (x[2] == 1 ? 0.5 : 0) + x[0] + 0.3 * noise);
			break;
		case SC_BINARY:
			*label = ((c * 7) % 13) / 2.0 - 3.0 + x[0] + 2 * noise > 0 ? 1.0f : 0.0f;
			break;
		case SC_RANKING:
			*label = (float) (((c * 3) % 5 + (noise > 0.3)) % 5);
			break;
		case SC_CLASSES:
			*label = (float) (noise < -0.4 ? (int) x[2] : (c * 3) % 4);
			break;
	}
}

static void
sc_fill(gbml_dataset *ds, gbml_env *env, int shard, int n_shards, bool to_files, void *arg)
{
	const sc_data *s = arg;
	float		x[SC_COLS];

	gbml_dataset_init(ds, true);
	ds->schema = &sc_schema;
	ds->chunk_rows = 500;
	if (to_files)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t i = 0; i < s->n; i++)
	{
		gbml_row	row = {0};
		int64_t		unit = s->label == SC_RANKING ? i / 10 : i;
		/* uneven shares; the last of three shards gets nothing */
		int			owner = n_shards == 3 ? (int) ((unit * 7) % 5 < 3 ? 0 : 1) : (int) ((unit * 13) % 3 == 0);

		if (s->lone > 0)
			owner = unit == (s->label == SC_RANKING ? (s->lone - 1) / 10 : s->lone - 1) ? n_shards - 1
				: owner == n_shards - 1 ? 0 : owner;
		if (shard >= 0 && owner != shard)
			continue;
		sc_row(s, i, x, &row.label);
		row.group = 500 + (i / 10) * 7;
		row.group_is_null = s->label != SC_RANKING && !s->groups;
		row.weight_is_null = true;
		row.x = x;
		row.n_features = SC_COLS;
		CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK);
	}
}

/* Whether a model holds derived features of kind `kind` (the test exercises what it means to). */
static bool
sc_has_derived(const uint8_t *model, size_t len, int kind)
{
	gbml_env	env;
	gbml_scorer sc;
	bool		has = false;

	gbml_env_init_malloc(&env, 1);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	for (int k = 0; k < ((const gbml_boost_model *) sc.handle)->inputs.n_derived; k++)
		has = has || ((const gbml_boost_model *) sc.handle)->inputs.derived[k].kind == kind;
	gbml_scorer_free(&sc, &env);
	return has;
}

/* One server's model of s's rows with v, checked to hold ordered statistics. */
static void
sc_check_statistics_used(const sc_data *s, const gbml_param_value *v, int nv)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *m = NULL;
	size_t		len = 0;

	gbml_env_init_malloc(&env, 2);
	sc_fill(&ds, &env, -1, 1, false, (void *) s);
	CHECK(tu_train("boost", &ds, &env, v, nv, &m, &len) == GBML_OK);
	CHECK(m != NULL && sc_has_derived(m, len, GBML_BOOST_CTR_MEAN) && sc_has_derived(m, len, GBML_BOOST_ONE_HOT));
	gbml_dataset_free(&ds, &env);
	free(m);
}

TEST(boost_shards_categorical_rmse_is_one_servers_bytes)
{
	sc_data		s = {.n = 3000, .label = SC_REGRESSION};
	gbml_param_value v[] = {tu_num("iterations", 12), tu_num("depth", 4), tu_bool("ctr_counter", true),
	tu_num("one_hot_max_size", 4)};
	/* a border sample smaller than the union: the sample's merge also places every row */
	gbml_param_value small[] = {tu_num("iterations", 12), tu_num("depth", 4), tu_num("border_sample_size", 1000),
	tu_num("subsample", 0.7), tu_num("one_hot_max_size", 4)};

	sc_make_schema();
	sc_check_statistics_used(&s, v, 4);
	tu_check_same_bytes("boost", "categorical RMSE", sc_fill, &s, v, 4);
	tu_check_same_bytes("boost", "categorical RMSE, small sample, subsample", sc_fill, &s, small, 5);
	sc_free_schema();
}

TEST(boost_shards_categorical_losses_are_one_servers_bytes)
{
	sc_data		bin = {.n = 2500, .label = SC_BINARY},
				rank = {.n = 2500, .label = SC_RANKING},
				cls = {.n = 2400, .label = SC_CLASSES};
	gbml_param_value lv[] = {tu_num("iterations", 10), tu_num("depth", 4), tu_str("loss", "Logloss"),
	tu_num("leaf_estimation_iterations", 3), tu_num("one_hot_max_size", 4)};
	gbml_param_value rv[] = {tu_num("iterations", 8), tu_num("depth", 4), tu_str("loss", "YetiRank")};
	gbml_param_value cv[] = {tu_num("iterations", 6), tu_num("depth", 3), tu_str("loss", "MultiClass")};
	gbml_param_value dv[] = {tu_num("iterations", 8), tu_num("depth", 4), tu_str("loss", "Logloss"),
	tu_str("grow_policy", "Depthwise")};

	sc_make_schema();
	sc_check_statistics_used(&bin, lv, 5);
	tu_check_same_bytes("boost", "categorical Logloss", sc_fill, &bin, lv, 5);
	tu_check_same_bytes("boost", "categorical Logloss, Depthwise", sc_fill, &bin, dv, 4);
	tu_check_same_bytes("boost", "categorical YetiRank", sc_fill, &rank, rv, 3);
	tu_check_same_bytes("boost", "categorical MultiClass", sc_fill, &cls, cv, 3);
	sc_free_schema();
}

TEST(boost_shards_categorical_eval_sets_are_one_servers_bytes)
{
	sc_data		s = {.n = 3000, .label = SC_REGRESSION},
				ev = {.n = 700, .label = SC_REGRESSION, .first = 100000},
				cls = {.n = 2400, .label = SC_CLASSES};
	gbml_param_value v[] = {tu_num("iterations", 40), tu_num("depth", 4), tu_num("learning_rate", 0.4),
	tu_num("eval_fraction", 0.2), tu_num("early_stopping_rounds", 3)};
	gbml_param_value sv[] = {tu_num("iterations", 40), tu_num("depth", 4), tu_num("learning_rate", 0.4),
	tu_num("early_stopping_rounds", 3)};
	gbml_param_value cv[] = {tu_num("iterations", 6), tu_num("depth", 3), tu_str("loss", "MultiClass"),
	tu_num("eval_fraction", 0.25)};

	sc_data		flat = {.n = 1500, .label = SC_REGRESSION, .constant = true};

	sc_make_schema();
	/* categorical inputs that derive nothing (one category each): the shards take an empty section */
	tu_check_same_bytes("boost", "categorical inputs without derived features", sc_fill, &flat, v, 5);
	tu_check_same_bytes("boost", "categorical, eval_fraction", sc_fill, &s, v, 5);
	tu_check_same_bytes("boost", "categorical MultiClass, eval_fraction", sc_fill, &cls, cv, 4);
	tu_check_same_bytes_eval("boost", "categorical, eval_source", sc_fill, &s, sc_fill, &ev, sv, 4);
	sc_free_schema();
}

/*
 * A shard whose every row eval_fraction holds out bins its eval rows with
 * the final statistics as the others do (it sends no ids, takes no bins):
 * one server's bytes for a held-out row and a held-out query.
 */
TEST(boost_shards_categorical_shard_whose_rows_are_all_held_out)
{
	sc_data		s = {.n = 3000, .label = SC_REGRESSION},
				rank = {.n = 2500, .label = SC_RANKING};
	gbml_param_value v[] = {tu_num("iterations", 40), tu_num("depth", 4), tu_num("learning_rate", 0.4),
	tu_num("eval_fraction", 0.2), tu_num("early_stopping_rounds", 3), tu_num("one_hot_max_size", 4)};
	gbml_param_value rv[] = {tu_num("iterations", 8), tu_num("depth", 4), tu_str("loss", "YetiRank"),
	tu_num("eval_fraction", 0.3)};

	sc_make_schema();
	s.lone = tu_first_held_out("boost", v, 6, sc_fill, &s, 0) + 1;
	rank.lone = tu_first_held_out("boost", rv, 4, sc_fill, &rank, 0) + 1;
	CHECK(s.lone > 0 && rank.lone > 0);
	tu_check_same_bytes("boost", "categorical, a lone held-out row", sc_fill, &s, v, 6);
	tu_check_same_bytes("boost", "categorical YetiRank, a lone held-out query", sc_fill, &rank, rv, 4);
	sc_free_schema();
}

TEST(boost_shards_categorical_sets_are_one_servers_bytes)
{
	sc_data		s = {.n = 3000, .label = SC_REGRESSION},
				bin = {.n = 2500, .label = SC_BINARY};
	/* 40 categories split as sets, 3 one-hot, 300 (beyond a set's limit) a statistic */
	gbml_param_value v[] = {tu_num("iterations", 10), tu_num("depth", 4), tu_str("grow_policy", "Depthwise"),
	tu_str("categorical_split", "sets"), tu_num("one_hot_max_size", 4), tu_num("eval_fraction", 0.2)};
	gbml_param_value lv[] = {tu_num("iterations", 8), tu_num("depth", 5), tu_str("grow_policy", "Depthwise"),
	tu_str("categorical_split", "sets"), tu_str("loss", "Logloss"), tu_num("leaf_estimation_iterations", 2)};
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *m = NULL;
	size_t		len = 0;

	sc_make_schema();
	/* the model splits sets (a set feature of its own), and a statistic for the widest column */
	gbml_env_init_malloc(&env, 2);
	sc_fill(&ds, &env, -1, 1, false, &s);
	CHECK(tu_train("boost", &ds, &env, v, 6, &m, &len) == GBML_OK);
	CHECK(m != NULL && sc_has_derived(m, len, GBML_BOOST_CAT_SET) && sc_has_derived(m, len, GBML_BOOST_CTR_MEAN));
	gbml_dataset_free(&ds, &env);
	free(m);
	tu_check_same_bytes("boost", "categorical sets, eval_fraction", sc_fill, &s, v, 6);
	tu_check_same_bytes("boost", "categorical sets, Logloss", sc_fill, &bin, lv, 6);
	sc_free_schema();
}

/*
 * A pointwise loss with query ids, each query's rows dealt to several
 * shards: the ordered statistics run by query along the union's training
 * order (by query id, then canonical), which the grouped merge gives the
 * coordinator; with subsample the same merge sends the shards their ranks.
 */
TEST(boost_shards_categorical_queries_on_several_shards)
{
	sc_data		s = {.n = 3000, .label = SC_REGRESSION, .groups = true},
				bin = {.n = 2500, .label = SC_BINARY, .groups = true};
	/* (with query ids the default loss is a ranking one) */
	gbml_param_value v[] = {tu_num("iterations", 12), tu_num("depth", 4), tu_num("one_hot_max_size", 4),
	tu_str("loss", "RMSE")};
	gbml_param_value sv[] = {tu_num("iterations", 12), tu_num("depth", 4), tu_num("subsample", 0.7),
	tu_num("border_sample_size", 1000), tu_str("loss", "RMSE")};
	gbml_param_value ev[] = {tu_num("iterations", 40), tu_num("depth", 4), tu_num("learning_rate", 0.4),
	tu_num("eval_fraction", 0.2), tu_num("early_stopping_rounds", 3), tu_str("loss", "RMSE")};
	gbml_param_value lv[] = {tu_num("iterations", 10), tu_num("depth", 4), tu_str("loss", "Logloss"),
	tu_num("leaf_estimation_iterations", 2)};

	sc_make_schema();
	sc_check_statistics_used(&s, v, 4);
	tu_check_same_bytes("boost", "categorical RMSE, queries on several shards", sc_fill, &s, v, 4);
	tu_check_same_bytes("boost", "categorical RMSE, queries on several shards, subsample", sc_fill, &s, sv, 5);
	tu_check_same_bytes("boost", "categorical RMSE, queries on several shards, eval by query", sc_fill, &s, ev, 6);
	tu_check_same_bytes("boost", "categorical Logloss, queries on several shards", sc_fill, &bin, lv, 4);
	sc_free_schema();
}
