/*
 * test_boost_categorical.c — categorical features in boosting (boost_ctr.h,
 * boost_cat.h): a category that decides the label is learned (RMSE,
 * Logloss, YetiRank, MultiClass with a statistic per class); ordered
 * statistics never see a row's own label (the
 * statistics checked directly, and a column of unique ids gives the model
 * nothing); the one-hot path; NULL and unseen values at scoring; the same
 * bytes on 1 and 2 threads, in any row order, in memory or in temporary
 * files; a damaged 'BSTC' section is rejected; the scorer reproduces the
 * trainer's eval-set scores; and a schema without categorical features
 * leaves the model's sections as they were.
 */
#include "harness.h"
#include "boost.h"
#include "boost_ctr.h"
#include "chunk_store_file.h"
#include "metrics.h"
#include "model_format.h"
#include "rng.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

/* ---- rows with a schema ---- */

#define MAX_COLS 12

typedef enum
{
	COL_NUMERIC,
	COL_CATEGORY,				/* n_categories ids, drawn uniformly (NULL at null_rate) */
	COL_UNIQUE					/* every row its own category (n_categories = rows) */
} col_kind;

typedef struct col_spec
{
	col_kind	kind;
	int			n_categories;
	double		null_rate;
} col_spec;

typedef enum
{
	LABEL_REGRESSION,			/* effect of column 1's category + 0.5 * [column 2 = 1] + noise */
	LABEL_BINARY,				/* [effect of column 1's category + noise > 0] */
	LABEL_RANKING,				/* relevance 0..4 from column 1's category, groups of 10 */
	LABEL_NOISE,				/* uniform 0..4, nothing to learn */
	LABEL_CLASSES				/* class 0..3 from column 1's category, one row in ten another class */
} label_kind;

/* Rows (and their schema) kept apart from any dataset, to be appended in any order. */
typedef struct cat_rows
{
	int64_t		n;
	int			d;
	float	   *x;
	gbml_row   *row;
	gbml_feature_schema schema;
	gbml_feature_def def[MAX_COLS];
} cat_rows;

/* The effect of category c (deterministic, spread over about -3 .. 3). */
static double
effect(int c)
{
	return (double) ((c * 7) % 13) / 2.0 - 3.0;
}

static void
make_schema(cat_rows *s, const col_spec *cols)
{
	s->schema.n_features = s->d;
	s->schema.features = s->def;
	for (int j = 0; j < s->d; j++)
	{
		gbml_feature_def *f = &s->def[j];
		char		name[32];

		snprintf(name, sizeof(name), "col%d", j + 1);
		f->name = strdup(name);
		f->source_type = strdup(cols[j].kind == COL_NUMERIC ? "real" : "text");
		f->kind = cols[j].kind == COL_NUMERIC ? GBML_FEATURE_NUMERIC : GBML_FEATURE_CATEGORICAL;
		f->n_categories = cols[j].kind == COL_UNIQUE ? (int32_t) s->n : cols[j].kind == COL_CATEGORY ? cols[j].n_categories : 0;
		f->categories = f->n_categories ? malloc(sizeof(char *) * (size_t) f->n_categories) : NULL;
		for (int32_t c = 0; c < f->n_categories; c++)
		{
			snprintf(name, sizeof(name), "v%07d", c);	/* zero-padded: bytewise order is id order */
			f->categories[c] = strdup(name);
		}
	}
}

static double
make_label(label_kind kind, const float *x, gbml_rng *rng)
{
	double		noise = gbml_rng_uniform(rng) - 0.5;
	int			c = isnan(x[1]) ? 0 : (int) x[1];

	switch (kind)
	{
		case LABEL_REGRESSION:
			return effect(c) + (x[2] == 1.0f ? 0.5 : 0.0) + 0.2 * noise;
		case LABEL_BINARY:
			return effect(c) + 1.5 * noise > 0 ? 1.0 : 0.0;
		case LABEL_RANKING:
			return (double) ((c * 3) % 5);
		case LABEL_NOISE:
			return floor(gbml_rng_uniform(rng) * 5);
		case LABEL_CLASSES:
			return noise < -0.4 ? (double) gbml_rng_below(rng, 4) : (double) ((c * 3) % 4);
	}
	return 0;
}

static void
make_rows(cat_rows *s, const col_spec *cols, int d, int64_t n, label_kind kind, uint64_t seed)
{
	gbml_rng	rng;

	memset(s, 0, sizeof(*s));
	gbml_rng_seed(&rng, seed);
	s->n = n;
	s->d = d;
	s->x = malloc(sizeof(float) * (size_t) (n * d));
	s->row = calloc((size_t) n, sizeof(gbml_row));
	make_schema(s, cols);
	for (int64_t i = 0; i < n; i++)
	{
		float	   *x = s->x + i * d;
		gbml_row   *row = &s->row[i];

		for (int j = 0; j < d; j++)
		{
			if (cols[j].kind == COL_NUMERIC)
				x[j] = (float) gbml_rng_uniform(&rng);
			else if (cols[j].kind == COL_UNIQUE)
				x[j] = (float) i;
			else
				x[j] = (float) gbml_rng_below(&rng, (uint64_t) cols[j].n_categories);
			if (cols[j].kind == COL_CATEGORY && gbml_rng_uniform(&rng) < cols[j].null_rate)
				x[j] = NAN;
		}
		row->x = x;
		row->n_features = d;
		row->label = (float) make_label(kind, x, &rng);
		row->group = i / 10;
		row->group_is_null = kind != LABEL_RANKING;
		row->weight_is_null = true;
	}
}

static void
free_rows(cat_rows *s)
{
	for (int j = 0; j < s->d; j++)
	{
		for (int32_t c = 0; c < s->def[j].n_categories; c++)
			free(s->def[j].categories[c]);
		free(s->def[j].categories);
		free(s->def[j].name);
		free(s->def[j].source_type);
	}
	free(s->x);
	free(s->row);
}

/*
 * The rows as a dataset with their schema: in their order, or in an order
 * shuffled by `shuffle` (0: none); in host memory or streamed to temporary
 * files in small chunks.
 */
static void
load(gbml_dataset *ds, gbml_env *env, const cat_rows *s, uint64_t shuffle, bool stored)
{
	int64_t    *order = shuffle ? tu_shuffled(s->n, shuffle) : NULL;

	gbml_dataset_init(ds, true);
	ds->schema = &s->schema;
	if (stored)
	{
		ds->chunk_rows = 700;
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	}
	for (int64_t i = 0; i < s->n; i++)
		CHECK(gbml_dataset_append(ds, env, &s->row[order ? order[i] : i], true) == GBML_OK);
	CHECK(!stored || ds->store != NULL);
	free(order);
}

/* Trains s's rows (eval rows: an eval set of its own, or NULL); the model (malloc'd copy) or NULL. */
static uint8_t *
fit(const cat_rows *s, const cat_rows *eval, const gbml_param_value *v, int nv, int threads, uint64_t shuffle,
	bool stored, size_t *len)
{
	gbml_env	env;
	gbml_dataset ds,
				ev;
	uint8_t    *model = NULL,
			   *copy = NULL;
	int			rc;

	gbml_env_init_malloc(&env, threads);
	load(&ds, &env, s, shuffle, stored);
	if (eval)
		load(&ev, &env, eval, shuffle ? shuffle + 1 : 0, stored);
	rc = gbml_train_values(&env, "boost", v, nv, &ds, eval ? &ev : NULL, &model, len);
	if (rc != GBML_OK)
		printf("# training: %s\n", env.error);
	CHECK(rc == GBML_OK);
	gbml_dataset_free(&ds, &env);
	if (eval)
		gbml_dataset_free(&ev, &env);
	if (model)
	{
		copy = malloc(*len);
		memcpy(copy, model, *len);
		gbml_free(&env, model);
	}
	CHECK(env.memory_used == 0);
	return copy;
}

/*
 * Scores every row of s (in s's order) with the model; *fast_used (when
 * asked for): the used features of the fast scorer's layout, 0 without one.
 */
static double *
score_rows_fast(const uint8_t *model, size_t len, const cat_rows *s, int *fast_used)
{
	gbml_env	env;
	gbml_scorer sc;
	double	   *out = calloc((size_t) s->n, sizeof(double));

	gbml_env_init_malloc(&env, 1);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	if (fast_used)
	{
		const gbml_boost_forest *f = &((const gbml_boost_model *) sc.handle)->forest;

		*fast_used = f->fast != NULL ? f->n_used : 0;
	}
	for (int64_t i = 0; i < s->n; i++)
		CHECK(gbml_scorer_predict(&sc, &env, s->row[i].x, s->d, GBML_OUT_SCORE, &out[i]) == GBML_OK);
	gbml_scorer_free(&sc, &env);
	CHECK(env.memory_used == 0);
	return out;
}

static double *
score_rows(const uint8_t *model, size_t len, const cat_rows *s)
{
	return score_rows_fast(model, len, s, NULL);
}

static float *
labels_of(const cat_rows *s)
{
	float	   *l = malloc(sizeof(float) * (size_t) s->n);

	for (int64_t i = 0; i < s->n; i++)
		l[i] = s->row[i].label;
	return l;
}

/* Importance of input j. */
static double
importance_of(const uint8_t *model, size_t len, int j, int d)
{
	gbml_env	env;
	gbml_scorer sc;
	double		imp[MAX_COLS] = {0};

	gbml_env_init_malloc(&env, 1);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	CHECK(gbml_algorithm_boost.importance(sc.handle, imp) == GBML_OK);
	gbml_scorer_free(&sc, &env);
	return j < d ? imp[j] : NAN;
}

/* The model's json dump (malloc'd). */
static char *
model_json(const uint8_t *model, size_t len)
{
	gbml_env	env;
	gbml_scorer sc;
	gbml_strbuf sb;
	char	   *out;

	gbml_env_init_malloc(&env, 1);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	gbml_sb_init(&sb, &env);
	CHECK(gbml_algorithm_boost.to_json(sc.handle, &sb) == GBML_OK);
	out = malloc(sb.len + 1);
	memcpy(out, sb.data, sb.len);
	out[sb.len] = '\0';
	gbml_sb_free(&sb);
	gbml_scorer_free(&sc, &env);
	return out;
}

static const col_spec mixed_cols[3] = {{COL_NUMERIC, 0, 0}, {COL_CATEGORY, 40, 0.05}, {COL_CATEGORY, 3, 0.1}};

/* ---- (a) learning ---- */

TEST(boost_categorical_regression_learns_the_category)
{
	cat_rows	tr,
				te;
	gbml_param_value v[] = {tu_num("iterations", 80), tu_num("depth", 4), tu_num("learning_rate", 0.3)};
	size_t		len;
	uint8_t    *m;
	double	   *pred;
	float	   *lab;

	make_rows(&tr, mixed_cols, 3, 6000, LABEL_REGRESSION, 1);
	make_rows(&te, mixed_cols, 3, 2000, LABEL_REGRESSION, 2);
	m = fit(&tr, NULL, v, 3, 2, 0, false, &len);
	pred = score_rows(m, len, &te);
	lab = labels_of(&te);
	/* label std is about 2: held-out rows scored with the final statistics come close */
	CHECK(gbml_rmse(pred, lab, NULL, te.n) < 0.3);
	CHECK(importance_of(m, len, 1, 3) > 0.8);
	CHECK(importance_of(m, len, 2, 3) > 0.005);
	{
		gbml_env	env;

		/* both columns have more slots than one_hot_max_size (2): ctr_mean and ctr_counter each */
		gbml_env_init_malloc(&env, 1);
		CHECK(tu_meta_number(&env, m, len, "ctr") == 4);
		CHECK(tu_meta_number(&env, m, len, "one_hot") == 0);
	}
	free(pred);
	free(lab);
	free(m);
	free_rows(&tr);
	free_rows(&te);
}

TEST(boost_categorical_logloss_learns_the_category)
{
	cat_rows	tr,
				te;
	gbml_param_value v[] = {tu_num("iterations", 60), tu_num("depth", 4), tu_str("loss", "Logloss"),
	tu_num("learning_rate", 0.2)};
	size_t		len;
	uint8_t    *m;
	double	   *pred;
	float	   *lab;

	make_rows(&tr, mixed_cols, 3, 6000, LABEL_BINARY, 3);
	make_rows(&te, mixed_cols, 3, 3000, LABEL_BINARY, 4);
	m = fit(&tr, NULL, v, 4, 2, 0, false, &len);
	pred = score_rows(m, len, &te);
	lab = labels_of(&te);
	CHECK(gbml_auc(pred, lab, NULL, te.n) > 0.85);
	CHECK(importance_of(m, len, 1, 3) > 0.8);
	free(pred);
	free(lab);
	free(m);
	free_rows(&tr);
	free_rows(&te);
}

TEST(boost_categorical_yetirank_learns_the_category)
{
	cat_rows	tr,
				te;
	gbml_param_value v[] = {tu_num("iterations", 40), tu_num("depth", 4), tu_str("loss", "YetiRank")};
	size_t		len;
	uint8_t    *m;
	double	   *pred;
	float	   *lab;
	int64_t		off[301];

	make_rows(&tr, mixed_cols, 3, 5000, LABEL_RANKING, 5);
	make_rows(&te, mixed_cols, 3, 3000, LABEL_RANKING, 6);
	m = fit(&tr, NULL, v, 3, 2, 0, false, &len);
	pred = score_rows(m, len, &te);
	lab = labels_of(&te);
	for (int g = 0; g <= 300; g++)
		off[g] = g * 10;
	/* the relevance is a function of the category: the ranking is nearly perfect */
	CHECK(gbml_mean_ndcg(pred, lab, 300, off, 10) > 0.97);
	CHECK(importance_of(m, len, 1, 3) > 0.8);
	free(pred);
	free(lab);
	free(m);
	free_rows(&tr);
	free_rows(&te);
}

/* ---- (b) no target leak ---- */

/* The naive statistic of row perm[k]: the rows before it in perm with its id. */
static float
naive_ctr(const float *ids, const float *label, const int64_t *perm, int64_t k, double prior, double w)
{
	double		sum = 0;
	int64_t		count = 0;
	float		id = ids[perm[k]];

	for (int64_t j = 0; j < k; j++)
		if (ids[perm[j]] == id || (isnan(ids[perm[j]]) && isnan(id)))
		{
			sum += label[perm[j]];
			count++;
		}
	return (float) ((sum + prior * w) / ((double) count + w));
}

TEST(boost_ctr_ordered_uses_only_earlier_rows)
{
	gbml_env	env;
	const int64_t n = 600;
	float	   *ids = malloc(sizeof(float) * n),
			   *label = malloc(sizeof(float) * n),
			   *value = malloc(sizeof(float) * n),
			   *again = malloc(sizeof(float) * n),
				table[52];
	int64_t    *perm = malloc(sizeof(int64_t) * n),
				off[61];
	gbml_rng	rng;
	bool		naive_ok = true,
				own_ok = true,
				perm_ok = true;
	int64_t    *seen = calloc((size_t) n, sizeof(int64_t));

	gbml_env_init_malloc(&env, 1);
	gbml_rng_seed(&rng, 8);
	for (int64_t i = 0; i < n; i++)
	{
		ids[i] = i % 17 == 0 ? NAN : (float) gbml_rng_below(&rng, 50);
		label[i] = (float) gbml_rng_below(&rng, 5);
	}
	/* groups of 10: a permutation of whole groups, each group's rows in order */
	for (int g = 0; g <= 60; g++)
		off[g] = g * 10;
	CHECK(gbml_boost_ctr_permutation(n, 60, off, 77, perm, &env) == GBML_OK);
	for (int64_t k = 0; k < n; k++)
	{
		seen[perm[k]]++;
		if (k % 10 != 0 && perm[k] != perm[k - 1] + 1)
			perm_ok = false;
	}
	for (int64_t i = 0; i < n; i++)
		perm_ok = perm_ok && seen[i] == 1;
	CHECK(perm_ok);
	/* rows in any order now */
	CHECK(gbml_boost_ctr_permutation(n, 0, NULL, 78, perm, &env) == GBML_OK);
	CHECK(gbml_boost_ctr_ordered(ids, 50, label, GBML_CTR_LABEL, perm, n, 2.0, 1.0, value, table, &env) == GBML_OK);
	for (int64_t k = 0; k < n; k++)
		if (value[perm[k]] != naive_ctr(ids, label, perm, k, 2.0, 1.0))
			naive_ok = false;
	CHECK(naive_ok);
	/* a row's own label never enters its statistic: change it, and its value stays */
	for (int64_t i = 0; i < n; i += 7)
	{
		float		keep = label[i];

		label[i] = keep + 100;
		CHECK(gbml_boost_ctr_ordered(ids, 50, label, GBML_CTR_LABEL, perm, n, 2.0, 1.0, again, table, &env) == GBML_OK);
		if (again[i] != value[i])
			own_ok = false;
		label[i] = keep;
	}
	CHECK(own_ok);
	/* the final table: every row of the slot; NULL its own slot; unseen the prior */
	CHECK(gbml_boost_ctr_ordered(ids, 50, label, GBML_CTR_LABEL, perm, n, 2.0, 1.0, NULL, table, &env) == GBML_OK);
	{
		double		sum = 0;
		int64_t		count = 0;

		for (int64_t i = 0; i < n; i++)
			if (isnan(ids[i]))
			{
				sum += label[i];
				count++;
			}
		CHECK(table[50] == (float) ((sum + 2.0) / ((double) count + 1.0)));
		CHECK(table[51] == 2.0f);
	}
	free(ids);
	free(label);
	free(value);
	free(again);
	free(perm);
	free(seen);
	CHECK(env.memory_used == 0);
}

TEST(boost_ctr_unique_ids_see_only_the_prior)
{
	gbml_env	env;
	const int64_t n = 1000;
	float	   *ids = malloc(sizeof(float) * n),
			   *label = malloc(sizeof(float) * n),
			   *value = malloc(sizeof(float) * n),
			   *table = malloc(sizeof(float) * (n + 2));
	int64_t    *perm = malloc(sizeof(int64_t) * n);
	bool		all_prior = true;

	gbml_env_init_malloc(&env, 1);
	for (int64_t i = 0; i < n; i++)
	{
		ids[i] = (float) i;
		label[i] = (float) (i % 2);
	}
	CHECK(gbml_boost_ctr_permutation(n, 0, NULL, 1, perm, &env) == GBML_OK);
	CHECK(gbml_boost_ctr_ordered(ids, (int32_t) n, label, GBML_CTR_BINARY, perm, n, 0.5, 1.0, value, table, &env) == GBML_OK);
	for (int64_t i = 0; i < n; i++)
		if (value[i] != 0.5f)
			all_prior = false;
	CHECK(all_prior);
	/* ... while the final statistics (scoring's) do include each row's own label */
	CHECK(table[0] == 0.25f && table[1] == 0.75f);
	free(ids);
	free(label);
	free(value);
	free(table);
	free(perm);
	CHECK(env.memory_used == 0);
}

TEST(boost_categorical_unique_ids_do_not_fit_the_labels)
{
	static const col_spec cols[2] = {{COL_UNIQUE, 0, 0}, {COL_NUMERIC, 0, 0}};
	cat_rows	tr;
	gbml_param_value v[] = {tu_num("iterations", 30), tu_num("depth", 4), tu_num("learning_rate", 0.5),
	tu_num("l2_leaf_reg", 0)};
	size_t		len;
	uint8_t    *m;
	gbml_env	env;
	double		train_rmse;

	gbml_env_init_malloc(&env, 1);
	/* labels are noise; column 1 is each row's own id, column 2 a numeric decoy */
	make_rows(&tr, cols, 2, 3000, LABEL_NOISE, 9);
	for (int64_t i = 0; i < tr.n; i++)
		tr.x[i * 2 + 1] = 0.25f;	/* constant: nothing can split on it */
	m = fit(&tr, NULL, v, 4, 2, 0, false, &len);
	/*
	 * Every row sees only the prior, its count is 1 for all: both derived
	 * features are constant, so no tree can split and the model is the
	 * mean.  Had a row's own label entered its statistic, the trees would
	 * reproduce the training labels through it.
	 */
	CHECK(tu_meta_number(&env, m, len, "no_split_possible") == 1);
	CHECK(tu_meta_number(&env, m, len, "trees") == 0);
	train_rmse = tu_meta_number(&env, m, len, "train_RMSE");
	CHECK(train_rmse > 1.3);		/* labels uniform over 0..4: std sqrt(2) */
	free(m);
	free_rows(&tr);
}

/* MultiClass: one statistic a class (of [label = c]), and the noise labels still give a constant model. */
TEST(boost_categorical_multiclass_learns_the_category)
{
	static const col_spec unique_cols[2] = {{COL_UNIQUE, 0, 0}, {COL_NUMERIC, 0, 0}};
	cat_rows	tr,
				te;
	gbml_param_value v[] = {tu_num("iterations", 40), tu_num("depth", 4), tu_num("learning_rate", 0.3),
	tu_str("loss", "MultiClass")};
	gbml_env	env;
	gbml_scorer sc;
	size_t		len;
	uint8_t    *m;
	int64_t		hits = 0;

	gbml_env_init_malloc(&env, 1);
	make_rows(&tr, mixed_cols, 3, 6000, LABEL_CLASSES, 1);
	make_rows(&te, mixed_cols, 3, 2000, LABEL_CLASSES, 2);
	m = fit(&tr, NULL, v, 4, 2, 0, false, &len);
	/* both columns past one_hot_max_size: 4 class statistics and a counter each */
	CHECK(tu_meta_number(&env, m, len, "ctr") == 10);
	CHECK(gbml_scorer_load(&sc, &env, m, len) == GBML_OK);
	for (int64_t i = 0; i < te.n; i++)
	{
		double		cls;

		CHECK(gbml_scorer_predict(&sc, &env, te.row[i].x, 3, GBML_OUT_SCORE, &cls) == GBML_OK);
		hits += cls == te.row[i].label;
	}
	/* nine rows in ten follow the category (and a tenth of the rest by chance) */
	CHECK(hits > 0.88 * (double) te.n);
	gbml_scorer_free(&sc, &env);
	CHECK(importance_of(m, len, 1, 3) > 0.8);
	free(m);
	free_rows(&tr);
	free_rows(&te);

	/* labels that are noise, a column of unique ids: every statistic is its prior, no tree splits */
	make_rows(&tr, unique_cols, 2, 3000, LABEL_NOISE, 9);
	for (int64_t i = 0; i < tr.n; i++)
		tr.x[i * 2 + 1] = 0.25f;
	m = fit(&tr, NULL, v, 4, 2, 0, false, &len);
	CHECK(tu_meta_number(&env, m, len, "classes") == 5);
	CHECK(tu_meta_number(&env, m, len, "no_split_possible") == 1);
	CHECK(tu_meta_number(&env, m, len, "trees") == 0);
	free(m);
	free_rows(&tr);
	CHECK(env.memory_used == 0);
}

/* A class's statistic is the label's statistic of the labels [label = c], and never sees the row's own label. */
TEST(boost_ctr_class_statistics_are_the_binarized_labels)
{
	gbml_env	env;
	const int64_t n = 900;
	float	   *ids = malloc(sizeof(float) * n),
			   *label = malloc(sizeof(float) * n),
			   *is_c = malloc(sizeof(float) * n),
			   *value = malloc(sizeof(float) * n),
			   *expect = malloc(sizeof(float) * n),
			   *table = malloc(sizeof(float) * 32),
			   *expect_table = malloc(sizeof(float) * 32);
	int64_t    *perm = malloc(sizeof(int64_t) * n);
	gbml_rng	rng;
	bool		same = true,
				own_ok = true;

	gbml_env_init_malloc(&env, 1);
	gbml_rng_seed(&rng, 31);
	for (int64_t i = 0; i < n; i++)
	{
		ids[i] = (float) gbml_rng_below(&rng, 30);
		label[i] = (float) gbml_rng_below(&rng, 3);
	}
	CHECK(gbml_boost_ctr_permutation(n, 0, NULL, 5, perm, &env) == GBML_OK);
	for (int c = 0; c < 3; c++)
	{
		for (int64_t i = 0; i < n; i++)
			is_c[i] = label[i] == (float) c;
		CHECK(gbml_boost_ctr_ordered(ids, 30, label, c, perm, n, 1.0 / 3, 1.0, value, table, &env) == GBML_OK);
		CHECK(gbml_boost_ctr_ordered(ids, 30, is_c, GBML_CTR_LABEL, perm, n, 1.0 / 3, 1.0, expect, expect_table,
									 &env) == GBML_OK);
		same = same && memcmp(value, expect, sizeof(float) * n) == 0 &&
			memcmp(table, expect_table, sizeof(float) * 32) == 0;
		/* change rows' own labels to class c: their values do not move */
		for (int64_t i = 0; i < n; i += 11)
		{
			float		keep = label[i];

			label[i] = (float) c;
			CHECK(gbml_boost_ctr_ordered(ids, 30, label, c, perm, n, 1.0 / 3, 1.0, expect, table, &env) == GBML_OK);
			own_ok = own_ok && expect[i] == value[i];
			label[i] = keep;
		}
	}
	CHECK(same);
	CHECK(own_ok);
	free(ids);
	free(label);
	free(is_c);
	free(value);
	free(expect);
	free(table);
	free(expect_table);
	free(perm);
	CHECK(env.memory_used == 0);
}

/* ---- (c) one-hot ---- */

TEST(boost_categorical_two_values_split_one_hot)
{
	static const col_spec cols[3] = {{COL_NUMERIC, 0, 0}, {COL_CATEGORY, 2, 0}, {COL_NUMERIC, 0, 0}};
	cat_rows	tr;
	gbml_param_value v[] = {tu_num("iterations", 30), tu_num("depth", 2), tu_num("learning_rate", 0.5)};
	size_t		len;
	uint8_t    *m;
	char	   *json;
	double		s0,
				s1;
	gbml_env	env;
	gbml_scorer sc;
	float		x0[3] = {0.5f, 0.0f, 0.5f},
				x1[3] = {0.5f, 1.0f, 0.5f},
				xn[8] = {0.5f, NAN, 0.5f},	/* (sized past the row: the compiler cannot tell k >= 3 reads no input) */
				xu[3] = {0.5f, -1.0f, 0.5f};

	make_rows(&tr, cols, 3, 3000, LABEL_REGRESSION, 10);
	/* y = effect(category) + noise: effect(0) = -3, effect(1) = 0.5 */
	m = fit(&tr, NULL, v, 3, 1, 0, false, &len);
	json = model_json(m, len);
	CHECK(strstr(json, "\"transform\":\"one_hot\"") != NULL);
	CHECK(strstr(json, "ctr_mean") == NULL);
	CHECK(strstr(json, "\"category\":\"v0000001\"") != NULL);
	gbml_env_init_malloc(&env, 1);
	CHECK(tu_meta_number(&env, m, len, "one_hot") == 2);
	CHECK(tu_meta_number(&env, m, len, "ctr") == 0);
	CHECK(gbml_scorer_load(&sc, &env, m, len) == GBML_OK);
	CHECK(gbml_scorer_predict(&sc, &env, x0, 3, GBML_OUT_SCORE, &s0) == GBML_OK);
	CHECK(gbml_scorer_predict(&sc, &env, x1, 3, GBML_OUT_SCORE, &s1) == GBML_OK);
	CHECK_NEAR(s1 - s0, 3.5, 0.1);
	/* NULL and unseen match no category: both take the "not equal" side of every split */
	{
		double		sn,
					su;
		const gbml_boost_model *bm = sc.handle;

		CHECK(gbml_scorer_predict(&sc, &env, xn, 3, GBML_OUT_SCORE, &sn) == GBML_OK);
		CHECK(gbml_scorer_predict(&sc, &env, xu, 3, GBML_OUT_SCORE, &su) == GBML_OK);
		CHECK(sn == su && isfinite(sn));
		CHECK(bm->forest.inputs != NULL && bm->inputs.n_derived == 2);
		CHECK(gbml_boost_input_value(&bm->inputs, 3, xn) == 0.0f && gbml_boost_input_value(&bm->inputs, 4, xn) == 0.0f);
	}
	gbml_scorer_free(&sc, &env);
	CHECK(env.memory_used == 0);
	free(json);
	free(m);

	/* the same column with one_hot_max_size 1 goes to the statistics instead */
	{
		gbml_param_value w[] = {tu_num("iterations", 30), tu_num("depth", 2), tu_num("one_hot_max_size", 1)};

		m = fit(&tr, NULL, w, 3, 1, 0, false, &len);
		json = model_json(m, len);
		CHECK(strstr(json, "one_hot") == NULL && strstr(json, "\"transform\":\"ctr_mean\"") != NULL);
		free(json);
		free(m);
	}
	free_rows(&tr);
}

/* ---- (d) NULL and unseen at scoring ---- */

TEST(boost_categorical_null_and_unseen_use_stored_statistics)
{
	static const col_spec cols[2] = {{COL_NUMERIC, 0, 0}, {COL_CATEGORY, 9, 0.2}};
	cat_rows	tr;
	gbml_param_value v[] = {tu_num("iterations", 20), tu_num("depth", 3), tu_num("ctr_prior_weight", 2)};
	size_t		len;
	uint8_t    *m;
	gbml_env	env;
	gbml_scorer sc;
	const gbml_boost_model *bm;
	const gbml_boost_derived *mean = NULL;
	double		sum[11] = {0},
				total = 0,
				prior;
	int64_t		count[11] = {0};

	make_rows(&tr, cols, 2, 4000, LABEL_RANKING, 11);	/* integer labels: every sum is exact */
	for (int64_t i = 0; i < tr.n; i++)
		tr.row[i].group_is_null = true;
	m = fit(&tr, NULL, v, 3, 2, 0, false, &len);
	gbml_env_init_malloc(&env, 1);
	CHECK(gbml_scorer_load(&sc, &env, m, len) == GBML_OK);
	bm = sc.handle;
	for (int k = 0; bm->forest.inputs != NULL && k < bm->inputs.n_derived; k++)
		if (bm->inputs.derived[k].kind == GBML_BOOST_CTR_MEAN)
			mean = &bm->inputs.derived[k];
	CHECK(mean != NULL && mean->source == 1 && mean->n_categories == 9);
	for (int64_t i = 0; i < tr.n; i++)
	{
		int			s = gbml_boost_cat_slot(tr.x[i * 2 + 1], 9);

		sum[s] += tr.row[i].label;
		count[s]++;
		total += tr.row[i].label;
	}
	prior = total / (double) tr.n;
	CHECK(bm->inputs.prior == prior && bm->inputs.prior_weight == 2);
	for (int s = 0; mean && s < 11; s++)
		CHECK(mean->table[s] == (float) ((sum[s] + prior * 2) / ((double) count[s] + 2)));
	CHECK(count[9] > 0 && count[10] == 0);
	if (mean)
	{
		float		xn[8] = {0.5f, NAN},
					xu[8] = {0.5f, GBML_CATEGORY_UNSEEN},
					xodd[8] = {0.5f, 3.5f};
		int			k = mean - bm->inputs.derived + 2;
		double		su,
					sodd;

		/* NULL gets the statistic of the NULL rows, unseen (and a non-id) the prior */
		CHECK(gbml_boost_input_value(&bm->inputs, k, xn) == mean->table[9]);
		CHECK(gbml_boost_input_value(&bm->inputs, k, xu) == (float) (prior * 2 / 2));
		CHECK(gbml_boost_input_value(&bm->inputs, k, xodd) == mean->table[10]);
		CHECK(gbml_scorer_predict(&sc, &env, xu, 2, GBML_OUT_SCORE, &su) == GBML_OK);
		CHECK(gbml_scorer_predict(&sc, &env, xodd, 2, GBML_OUT_SCORE, &sodd) == GBML_OK);
		CHECK(su == sodd);
	}
	gbml_scorer_free(&sc, &env);
	CHECK(env.memory_used == 0);
	free(m);
	free_rows(&tr);
}

/* ---- (e) determinism ---- */

static void
same_bytes_case(label_kind kind, const char *loss, bool eval_set)
{
	cat_rows	tr,
				ev;
	gbml_param_value v[] = {tu_num("iterations", 15), tu_num("depth", 4), tu_str("loss", loss),
		tu_num("subsample", 0.8), tu_num("random_seed", 4), tu_num("border_count", 64),
	tu_num("eval_fraction", eval_set ? 0 : 0.2)};
	uint8_t    *m[4];
	size_t		len[4];
	bool		same;

	/* 3 blocks of bins; groups scatter each chunk's rows (YetiRank) */
	make_rows(&tr, mixed_cols, 3, 20000, kind, 12);
	if (eval_set)
		make_rows(&ev, mixed_cols, 3, 3000, kind, 13);
	m[0] = fit(&tr, eval_set ? &ev : NULL, v, 7, 1, 0, false, &len[0]);
	m[1] = fit(&tr, eval_set ? &ev : NULL, v, 7, 2, 99, false, &len[1]);
	m[2] = fit(&tr, eval_set ? &ev : NULL, v, 7, 1, 5, true, &len[2]);
	m[3] = fit(&tr, eval_set ? &ev : NULL, v, 7, 2, 6, true, &len[3]);
	same = m[0] && m[1] && m[2] && m[3];
	for (int i = 1; same && i < 4; i++)
		same = len[i] == len[0] && memcmp(m[i], m[0], len[0]) == 0;
	if (!same)
		printf("# %s: categorical models differ across threads, row order or residence\n", loss);
	CHECK(same);
	for (int i = 0; i < 4; i++)
		free(m[i]);
	free_rows(&tr);
	if (eval_set)
		free_rows(&ev);
}

TEST(boost_categorical_same_bytes_threads_order_spill_rmse)
{
	same_bytes_case(LABEL_REGRESSION, "RMSE", false);
}

TEST(boost_categorical_same_bytes_threads_order_spill_yetirank_eval_set)
{
	same_bytes_case(LABEL_RANKING, "YetiRank", true);
}

TEST(boost_categorical_same_bytes_threads_order_spill_multiclass_eval_set)
{
	same_bytes_case(LABEL_CLASSES, "MultiClass", true);
}

TEST(boost_categorical_batch_and_fast_scorers_agree)
{
	cat_rows	tr;
	gbml_param_value v[] = {tu_num("iterations", 40), tu_num("depth", 5), tu_num("one_hot_max_size", 4)};
	size_t		len;
	uint8_t    *m;
	double	   *single,
			   *batch;
	gbml_env	env;
	gbml_scorer sc;
	bool		same = true;

	make_rows(&tr, mixed_cols, 3, 3000, LABEL_REGRESSION, 14);
	m = fit(&tr, NULL, v, 3, 2, 0, false, &len);
	single = score_rows(m, len, &tr);
	batch = malloc(sizeof(double) * (size_t) tr.n);
	gbml_env_init_malloc(&env, 2);
	CHECK(gbml_scorer_load(&sc, &env, m, len) == GBML_OK);
	CHECK(gbml_boost_forest_predict_batch(&((const gbml_boost_model *) sc.handle)->forest, tr.x, tr.n, tr.d,
										  batch, &env) == GBML_OK);
	for (int64_t i = 0; i < tr.n; i++)
		same = same && memcmp(&single[i], &batch[i], sizeof(double)) == 0;
	CHECK(same);
	/* the fast path (when the CPU has it) against the scalar scorer */
	{
		gbml_boost_forest plain = ((const gbml_boost_model *) sc.handle)->forest;
		bool		same_fast = true;

		plain.fast = NULL;
		for (int64_t i = 0; i < tr.n; i++)
		{
			double		a = gbml_boost_forest_predict(&plain, tr.row[i].x);

			same_fast = same_fast && memcmp(&a, &single[i], sizeof(double)) == 0;
		}
		CHECK(same_fast);
	}
	gbml_scorer_free(&sc, &env);
	CHECK(env.memory_used == 0);
	free(single);
	free(batch);
	free(m);
	free_rows(&tr);
}

/* ---- (f) damaged sections ---- */

/* Loads the model with section `tag` replaced by body (NULL: dropped); the status and env's error. */
static int
load_patched(gbml_env *env, const gbml_model_reader *r, uint32_t tag, const uint8_t *body, size_t blen)
{
	uint8_t    *bad;
	size_t		len;
	gbml_scorer sc;
	int			rc;

	CHECK(tu_rebuild(env, r, tag, body, blen, &bad, &len) == GBML_OK);
	rc = gbml_scorer_load(&sc, env, bad, len);
	if (rc == GBML_OK)
	{
		float		x[3] = {0.5f, 3.0f, NAN};
		double		out,
					imp[3];
		gbml_strbuf sb;

		CHECK(gbml_scorer_predict(&sc, env, x, 3, GBML_OUT_SCORE, &out) == GBML_OK);
		gbml_sb_init(&sb, env);
		CHECK(gbml_algorithm_boost.to_json(sc.handle, &sb) == GBML_OK);
		CHECK(gbml_algorithm_boost.importance(sc.handle, imp) == GBML_OK);
		gbml_sb_free(&sb);
	}
	gbml_scorer_free(&sc, env);
	gbml_free(env, bad);
	return rc;
}

/* The section's bytes with a u32 at `at` set to v (malloc'd). */
static uint8_t *
patched_u32(const uint8_t *data, size_t len, size_t at, uint32_t v)
{
	uint8_t    *copy = malloc(len + 4);

	memcpy(copy, data, len);
	memcpy(copy + at, &v, 4);
	return copy;
}

TEST(boost_categorical_damaged_section_is_rejected)
{
	cat_rows	tr;
	gbml_param_value v[] = {tu_num("iterations", 4), tu_num("depth", 3), tu_num("one_hot_max_size", 4)};
	size_t		len,
				clen;
	uint8_t    *m,
			   *p;
	gbml_env	env;
	gbml_model_reader r;
	const uint8_t *cat;
	gbml_rng	rng;
	int			rejected = 0;

	/* column 1: 40 categories (ctr_mean, ctr_counter); column 2: 3 + NULL (one-hot x 4) */
	make_rows(&tr, mixed_cols, 3, 2000, LABEL_REGRESSION, 15);
	m = fit(&tr, NULL, v, 3, 1, 0, false, &len);
	gbml_env_init_malloc(&env, 1);
	CHECK(gbml_model_open(&r, &env, m, len) == GBML_OK);
	CHECK(gbml_model_find(&r, GBML_SECTION_BOOST_CATEGORICAL, &cat, &clen));
	/*
	 * header: version, n_inputs, n_derived (6), prior, prior_weight (28 bytes); then the first derived
	 * feature (column 1's ctr_mean): source, kind, n_categories, its table from byte 40
	 */
	CHECK(clen > 40 && memcmp(cat + 8, &(uint32_t) {6}, 4) == 0);

	CHECK(load_patched(&env, &r, GBML_SECTION_BOOST_CATEGORICAL, NULL, 0) == GBML_ECORRUPT);
	CHECK(strstr(env.error, "categorical features without their section") != NULL);
	{
		struct
		{
			size_t		at;
			uint32_t	v;
			const char *why;
		}			cases[] = {
			{0, 2, "layout version"},
			{4, 4, "feature count"},
			{8, 1000000, "exceeds the section"},
			{28, 0, "not a categorical input"},	/* source: the numeric column */
			{28, 7, "not a categorical input"},
			{32, 9, "unknown derived feature kind"},
			{36, 41, "category count"},
		};

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		{
			p = patched_u32(cat, clen, cases[i].at, cases[i].v);
			CHECK(load_patched(&env, &r, GBML_SECTION_BOOST_CATEGORICAL, p, clen) == GBML_ECORRUPT);
			if (strstr(env.error, cases[i].why) == NULL)
				printf("# case %zu: %s\n", i, env.error);
			CHECK(strstr(env.error, cases[i].why) != NULL);
			free(p);
		}
	}
	/* a NaN statistic; a truncated table; trailing bytes */
	p = patched_u32(cat, clen, 40, 0x7fc00000u);
	CHECK(load_patched(&env, &r, GBML_SECTION_BOOST_CATEGORICAL, p, clen) == GBML_ECORRUPT);
	CHECK(strstr(env.error, "not finite") != NULL);
	CHECK(load_patched(&env, &r, GBML_SECTION_BOOST_CATEGORICAL, p, 100) == GBML_ECORRUPT);
	free(p);
	p = malloc(clen + 4);
	memcpy(p, cat, clen);
	CHECK(load_patched(&env, &r, GBML_SECTION_BOOST_CATEGORICAL, p, clen + 4) == GBML_ECORRUPT);
	CHECK(strstr(env.error, "trailing") != NULL);
	free(p);
	/* a split on the categorical input's raw id (tree 0, level 0: feature 1) */
	{
		const uint8_t *trees;
		size_t		tlen;

		CHECK(gbml_model_find(&r, GBML_SECTION_BOOST_TREES, &trees, &tlen));
		p = patched_u32(trees, tlen, 4, 1);
		CHECK(load_patched(&env, &r, GBML_SECTION_BOOST_TREES, p, tlen) == GBML_ECORRUPT);
		CHECK(strstr(env.error, "raw id") != NULL);
		free(p);
		p = patched_u32(trees, tlen, 4, 9);	/* past the 3 inputs + 6 derived */
		CHECK(load_patched(&env, &r, GBML_SECTION_BOOST_TREES, p, tlen) == GBML_ECORRUPT);
		free(p);
	}
	/* without the schema the sources cannot be checked: rejected */
	CHECK(load_patched(&env, &r, GBML_SECTION_SCHEMA, NULL, 0) == GBML_ECORRUPT);

	/* fuzz: random changes and truncations; every load is fine or ECORRUPT, never a crash */
	gbml_rng_seed(&rng, 16);
	for (int it = 0; it < 2000; it++)
	{
		size_t		nlen = clen;
		int			rc;

		p = malloc(clen);
		memcpy(p, cat, clen);
		switch (gbml_rng_below(&rng, 3))
		{
			case 0:
				nlen = gbml_rng_below(&rng, clen + 1);
				break;
			case 1:
				for (int k = 0; k < 3; k++)
					p[gbml_rng_below(&rng, clen)] = (uint8_t) gbml_rng_next(&rng);
				break;
			default:
				{
					uint32_t	w = (uint32_t) gbml_rng_next(&rng) % (it % 2 ? 64 : 0xffffffffu);

					memcpy(p + (gbml_rng_below(&rng, clen - 3) & ~(size_t) 3), &w, 4);
				}
		}
		rc = load_patched(&env, &r, GBML_SECTION_BOOST_CATEGORICAL, p, nlen);
		CHECK(rc == GBML_OK || rc == GBML_ECORRUPT);
		rejected += rc == GBML_ECORRUPT;
		free(p);
	}
	CHECK(rejected > 500);
	CHECK(env.memory_used == 0);
	free(m);
	free_rows(&tr);
}

/* ---- (g) the scorer reproduces the trainer's eval scores ---- */

TEST(boost_categorical_scorer_matches_the_trainers_eval_set)
{
	cat_rows	tr,
				ev;
	gbml_param_value v[] = {tu_num("iterations", 30), tu_num("depth", 4), tu_bool("use_best_model", false),
	tu_num("one_hot_max_size", 4)};
	size_t		len;
	uint8_t    *m;
	double	   *pred,
				rmse,
				eval_rmse,
				train_rmse;
	float	   *lab;
	gbml_env	env;

	/* the eval set: the training rows themselves, binned with the final statistics */
	make_rows(&tr, mixed_cols, 3, 5000, LABEL_REGRESSION, 17);
	make_rows(&ev, mixed_cols, 3, 5000, LABEL_REGRESSION, 17);
	m = fit(&tr, &ev, v, 4, 2, 0, false, &len);
	pred = score_rows(m, len, &ev);
	lab = labels_of(&ev);
	rmse = gbml_rmse(pred, lab, NULL, ev.n);
	gbml_env_init_malloc(&env, 1);
	eval_rmse = tu_meta_number(&env, m, len, "eval_value");
	train_rmse = tu_meta_number(&env, m, len, "train_RMSE");
	CHECK_NEAR(eval_rmse, rmse, 1e-12 * (1 + rmse));
	/* the training rows' own (ordered) statistics score them differently */
	CHECK(fabs(train_rmse - eval_rmse) > 1e-6);
	free(pred);
	free(lab);
	free(m);
	free_rows(&tr);
	free_rows(&ev);
}

/* ---- the numeric path and bad input ---- */

TEST(boost_categorical_numeric_schema_keeps_the_sections)
{
	static const col_spec cols[3] = {{COL_NUMERIC, 0, 0}, {COL_NUMERIC, 0, 0}, {COL_NUMERIC, 0, 0}};
	static const uint32_t tags[] = {GBML_SECTION_BOOST_HEADER, GBML_SECTION_BOOST_TREES,
	GBML_SECTION_BOOST_BORDERS, GBML_SECTION_PARAMS, GBML_SECTION_META};
	cat_rows	tr;
	gbml_param_value v[] = {tu_num("iterations", 10), tu_num("depth", 3)};
	size_t		l1,
				l2;
	uint8_t    *with,
			   *without;
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model;
	gbml_model_reader r;
	const uint8_t *d;
	size_t		dl;

	make_rows(&tr, cols, 3, 2000, LABEL_REGRESSION, 18);
	with = fit(&tr, NULL, v, 2, 1, 0, false, &l1);
	gbml_env_init_malloc(&env, 1);
	load(&ds, &env, &tr, 0, false);
	ds.schema = NULL;
	CHECK(gbml_train_values(&env, "boost", v, 2, &ds, NULL, &model, &l2) == GBML_OK);
	without = model;
	CHECK(tu_same_sections(&env, with, l1, without, l2, tags, 5));
	CHECK(gbml_model_open(&r, &env, with, l1) == GBML_OK);
	CHECK(!gbml_model_find(&r, GBML_SECTION_BOOST_CATEGORICAL, &d, &dl));
	CHECK(gbml_model_find(&r, GBML_SECTION_PARAMS, &d, &dl));
	for (size_t i = 0; i + 9 <= dl; i++)
		CHECK(memcmp(d + i, "ctr_prior", 9) != 0);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
	free(with);
	free_rows(&tr);
}

TEST(boost_categorical_bad_ids_are_an_error)
{
	cat_rows	tr;
	gbml_param_value v[] = {tu_num("iterations", 3)};
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;

	make_rows(&tr, mixed_cols, 3, 500, LABEL_REGRESSION, 19);
	tr.x[100 * 3 + 1] = 2.5f;	/* not an id */
	gbml_env_init_malloc(&env, 1);
	load(&ds, &env, &tr, 0, false);
	CHECK(gbml_train_values(&env, "boost", v, 1, &ds, NULL, &model, &len) == GBML_EINVAL);
	CHECK(strstr(env.error, "col2") != NULL && strstr(env.error, "2.5") != NULL);
	gbml_dataset_free(&ds, &env);
	tr.x[100 * 3 + 1] = GBML_CATEGORY_UNSEEN;	/* only scoring may see it */
	load(&ds, &env, &tr, 0, false);
	CHECK(gbml_train_values(&env, "boost", v, 1, &ds, NULL, &model, &len) == GBML_EINVAL);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
	free_rows(&tr);
}

/* ---- categories split as sets (grow_policy Depthwise, categorical_split sets) ---- */

/* The scattered set of slots the set-split rows' label marks (slot 12: NULL). */
static bool
in_marked_set(int slot)
{
	return slot == 1 || slot == 4 || slot == 6 || slot == 9 || slot == 11 || slot == 12;
}

/*
 * Label 2 for the categories of a scattered set (NULL in it), 0 for the
 * others: one Depthwise split of depth 1 finds the set exactly (a split
 * by a statistic's order would too, but this one is the set itself), the
 * model stores it as a set feature (0/1 by slot), the scorer reproduces
 * the trainer's predictions, and an unseen category (no rows: value 0,
 * between the set's negative gradients and the others' positive ones) goes
 * with the categories outside the set.
 */
TEST(boost_categorical_sets_split_a_scattered_set)
{
	static const col_spec cols[2] = {{COL_NUMERIC, 0, 0}, {COL_CATEGORY, 12, 0.1}};
	cat_rows	tr;
	gbml_param_value v[] = {tu_num("iterations", 1), tu_num("depth", 1), tu_num("learning_rate", 1),
		tu_num("l2_leaf_reg", 0), tu_str("grow_policy", "Depthwise"), tu_str("categorical_split", "sets"),
	tu_num("one_hot_max_size", 2)};
	size_t		len;
	uint8_t    *m;
	gbml_env	env;
	gbml_scorer sc;
	const gbml_boost_model *bm;
	double	   *pred;
	float	   *lab;

	make_rows(&tr, cols, 2, 3000, LABEL_NOISE, 21);	/* (relabelled below; LABEL_REGRESSION reads a third column) */
	for (int64_t i = 0; i < tr.n; i++)
		tr.row[i].label = in_marked_set(gbml_boost_cat_slot(tr.x[i * 2 + 1], 12)) ? 2.0f : 0.0f;
	m = fit(&tr, NULL, v, 7, 2, 0, false, &len);
	gbml_env_init_malloc(&env, 1);
	CHECK(m != NULL && gbml_scorer_load(&sc, &env, m, len) == GBML_OK);
	bm = sc.handle;
	CHECK(bm->forest.n_trees == 1 && bm->forest.feature[0] == 2 && bm->forest.border[0] == 0.5f);
	CHECK(bm->inputs.n_derived == 1 && bm->inputs.derived[0].kind == GBML_BOOST_CAT_SET);
	{
		const float *t = bm->inputs.derived[0].table;
		bool		set = true,
					complement = true;

		for (int s = 0; s <= 12; s++)
		{
			set = set && t[s] == (in_marked_set(s) ? 1.0f : 0.0f);
			complement = complement && t[s] == (in_marked_set(s) ? 0.0f : 1.0f);
		}
		CHECK(set != complement);
		CHECK(t[13] == (set ? 0.0f : 1.0f));	/* unseen: with those outside the set */
	}
	pred = score_rows(m, len, &tr);
	lab = labels_of(&tr);
	CHECK(gbml_rmse(pred, lab, NULL, tr.n) < 1e-6);
	CHECK_NEAR(tu_meta_number(&env, m, len, "train_RMSE"), gbml_rmse(pred, lab, NULL, tr.n), 1e-12);
	{
		float		xu[2] = {0.5f, GBML_CATEGORY_UNSEEN};
		double		su,
					s_out;
		int64_t		i = 0;

		/* a row whose category is on the unseen side: not in the stored set */
		while (bm->inputs.derived[0].table[gbml_boost_cat_slot(tr.x[i * 2 + 1], 12)] != 0.0f)
			i++;
		CHECK(gbml_scorer_predict(&sc, &env, xu, 2, GBML_OUT_SCORE, &su) == GBML_OK);
		CHECK(gbml_scorer_predict(&sc, &env, tr.row[i].x, 2, GBML_OUT_SCORE, &s_out) == GBML_OK);
		CHECK(su == s_out);
	}
	{
		gbml_strbuf sb;

		gbml_sb_init(&sb, &env);
		CHECK(gbml_algorithm_boost.to_json(sc.handle, &sb) == GBML_OK);
		gbml_sb_append(&sb, "", 1);
		CHECK(strstr(sb.data, "\"transform\":\"set\"") != NULL);
		gbml_sb_free(&sb);
	}
	{
		/* a set's table holds 0s and 1s only: one 0.5 in it is a damaged section */
		gbml_model_reader r;
		const uint8_t *data;
		size_t		dlen;
		uint8_t    *body;
		float		half = 0.5f;

		CHECK(gbml_model_open(&r, &env, m, len) == GBML_OK);
		CHECK(gbml_model_find(&r, GBML_SECTION_BOOST_CATEGORICAL, &data, &dlen) && dlen == 40 + 14 * 4);
		body = malloc(dlen);
		memcpy(body, data, dlen);
		memcpy(body + 40, &half, 4);	/* header 28 bytes, the set's source, kind, count 12, then its table */
		CHECK(load_patched(&env, &r, GBML_SECTION_BOOST_CATEGORICAL, body, dlen) == GBML_ECORRUPT &&
			  strstr(env.error, "not 0 or 1") != NULL);
		free(body);
	}
	gbml_scorer_free(&sc, &env);
	CHECK(env.memory_used == 0);
	free(pred);
	free(lab);
	free(m);
	free_rows(&tr);
}

/*
 * random_strength noises the set splits too: on two columns split as sets
 * and nothing else (no ordinal candidate to take the noise), trees grown
 * with it differ from trees grown without, and are the same on 1 and 2
 * threads and in another row order (each candidate a draw, in order, from
 * the stream of its leaf and feature).
 */
TEST(boost_categorical_sets_take_random_strength)
{
	static const col_spec cols[2] = {{COL_CATEGORY, 30, 0.05}, {COL_CATEGORY, 40, 0.05}};
	cat_rows	tr;
	gbml_param_value v[] = {tu_num("iterations", 8), tu_num("depth", 3), tu_str("loss", "Logloss"),
		tu_str("grow_policy", "Depthwise"), tu_str("categorical_split", "sets"), tu_num("one_hot_max_size", 2),
	tu_num("random_seed", 3), tu_num("random_strength", 5)};
	static const uint32_t trees[] = {GBML_SECTION_BOOST_TREES};
	uint8_t    *m[3];
	size_t		len[3];
	gbml_env	env;

	make_rows(&tr, cols, 2, 4000, LABEL_BINARY, 27);
	m[0] = fit(&tr, NULL, v, 7, 1, 0, false, &len[0]);	/* without random_strength */
	m[1] = fit(&tr, NULL, v, 8, 1, 0, false, &len[1]);
	m[2] = fit(&tr, NULL, v, 8, 2, 31, false, &len[2]);
	gbml_env_init_malloc(&env, 1);
	CHECK(m[0] && m[1] && m[2]);
	CHECK(m[0] && m[1] && !tu_same_sections(&env, m[0], len[0], m[1], len[1], trees, 1));
	CHECK(m[1] && m[2] && tu_same_sections(&env, m[1], len[1], m[2], len[2], trees, 1));
	CHECK(m[1] && m[2] && len[1] == len[2] && memcmp(m[1], m[2], len[1]) == 0);
	for (int i = 0; i < 3; i++)
		free(m[i]);
	free_rows(&tr);
}

/*
 * Sets on mixed columns (40 categories split as sets, 3 one-hot), deeper
 * trees: the same bytes on 1 and 2 threads, in any row order, with the rows
 * in memory or in files; the scorer gives the trainer's eval-set RMSE; the
 * model has set features and no slot column; the symmetric trees refuse
 * sets.
 */
TEST(boost_categorical_sets_same_bytes_and_scorer)
{
	cat_rows	tr,
				ev;
	gbml_param_value v[] = {tu_num("iterations", 15), tu_num("depth", 4), tu_str("loss", "RMSE"),
		tu_num("subsample", 0.8), tu_num("random_seed", 4), tu_bool("use_best_model", false),
	tu_str("grow_policy", "Depthwise"), tu_str("categorical_split", "sets")};
	uint8_t    *m[4];
	size_t		len[4];
	bool		same,
				has_set = false;
	gbml_env	env;
	gbml_scorer sc;
	double	   *pred;
	float	   *lab;

	make_rows(&tr, mixed_cols, 3, 20000, LABEL_REGRESSION, 12);
	make_rows(&ev, mixed_cols, 3, 3000, LABEL_REGRESSION, 13);
	m[0] = fit(&tr, &ev, v, 8, 1, 0, false, &len[0]);
	m[1] = fit(&tr, &ev, v, 8, 2, 99, false, &len[1]);
	m[2] = fit(&tr, &ev, v, 8, 1, 5, true, &len[2]);
	m[3] = fit(&tr, &ev, v, 8, 2, 6, true, &len[3]);
	same = m[0] && m[1] && m[2] && m[3];
	for (int i = 1; same && i < 4; i++)
		same = len[i] == len[0] && memcmp(m[i], m[0], len[0]) == 0;
	CHECK(same);
	gbml_env_init_malloc(&env, 1);
	CHECK(m[0] != NULL && gbml_scorer_load(&sc, &env, m[0], len[0]) == GBML_OK);
	for (int k = 0; k < ((const gbml_boost_model *) sc.handle)->inputs.n_derived; k++)
	{
		int			kind = ((const gbml_boost_model *) sc.handle)->inputs.derived[k].kind;

		CHECK(kind != GBML_BOOST_CAT_SLOT && kind != GBML_BOOST_CTR_MEAN);
		has_set = has_set || kind == GBML_BOOST_CAT_SET;
	}
	CHECK(has_set);
	gbml_scorer_free(&sc, &env);
	pred = score_rows(m[0], len[0], &ev);
	lab = labels_of(&ev);
	CHECK_NEAR(tu_meta_number(&env, m[0], len[0], "eval_value"), gbml_rmse(pred, lab, NULL, ev.n), 1e-9);
	CHECK(gbml_rmse(pred, lab, NULL, ev.n) < 0.5);
	for (int i = 0; i < 4; i++)
		free(m[i]);
	free(pred);
	free(lab);
	{
		gbml_dataset ds;
		uint8_t    *bad = NULL;
		size_t		blen;

		load(&ds, &env, &tr, 0, false);
		CHECK(gbml_train_values(&env, "boost", v + 7, 1, &ds, NULL, &bad, &blen) == GBML_EINVAL);
		CHECK(strstr(env.error, "categorical_split sets needs grow_policy Depthwise") != NULL);
		gbml_dataset_free(&ds, &env);
	}
	CHECK(env.memory_used == 0);
	free_rows(&tr);
	free_rows(&ev);
}

/* ---- (e) the single-row fast scorer on computed inputs ---- */

/* Scores of s's rows with the scorer the environment picks (GBML_FAST_SCORER, GBML_NO_FAST_SCORER). */
static double *
score_rows_with(const uint8_t *model, size_t len, const cat_rows *s, const char *var, const char *value, int *n_used)
{
	double	   *out;

	if (var)
		setenv(var, value, 1);
	out = score_rows_fast(model, len, s, n_used);
	if (var)
		unsetenv(var);
	return out;
}

TEST(boost_categorical_fast_scorer_matches_scalar)
{
	/* statistics of two categorical columns and two numbers: more than 8 computed inputs, so the AVX2 kernel
	 * loads a group of 8 in one piece and gathers the rest */
	static const col_spec cols[10] = {{COL_NUMERIC, 0, 0}, {COL_CATEGORY, 40, 0.05}, {COL_CATEGORY, 7, 0.1},
	{COL_NUMERIC, 0, 0.05}, {COL_CATEGORY, 12, 0}, {COL_NUMERIC, 0, 0}, {COL_CATEGORY, 25, 0.02}, {COL_NUMERIC, 0, 0},
	{COL_CATEGORY, 5, 0}, {COL_NUMERIC, 0, 0.1}};
	cat_rows	tr;
	gbml_param_value v[] = {tu_num("iterations", 90), tu_num("depth", 6), tu_num("learning_rate", 0.3)};
	size_t		len;
	uint8_t    *m;
	double	   *fast,
			   *avx2,
			   *scalar;
	int			used_fast,
				used_avx2,
				used_scalar;

	make_rows(&tr, cols, 10, 3000, LABEL_REGRESSION, 29);
	m = fit(&tr, NULL, v, 3, 2, 0, false, &len);
	fast = score_rows_with(m, len, &tr, NULL, NULL, &used_fast);
	avx2 = score_rows_with(m, len, &tr, "GBML_FAST_SCORER", "avx2", &used_avx2);
	scalar = score_rows_with(m, len, &tr, "GBML_NO_FAST_SCORER", "1", &used_scalar);
	printf("# %d computed inputs used\n", used_fast);
	CHECK(used_fast > 8 && used_avx2 == used_fast && used_scalar == 0);	/* (0: no fast path) */
	CHECK(memcmp(fast, scalar, sizeof(double) * (size_t) tr.n) == 0);
	CHECK(memcmp(avx2, scalar, sizeof(double) * (size_t) tr.n) == 0);
	free(fast);
	free(avx2);
	free(scalar);
	free(m);
	free_rows(&tr);
}
