/*
 * make_seeds.c — writes the seed corpus of fuzz_params and fuzz_dataset
 * (corpus/<harness>/seed-*), and of fuzz_model from tests/models/<name>.gbml.
 * Run by `make seeds` (the corpus is kept in git; rerun only when a format
 * changes).  Encodings: see the header comments of the harnesses.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "dataset.h"

static const char *dir;

static void
write_file(const char *harness, const char *name, const void *data, size_t len)
{
	char		path[512];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/%s/%s", dir, harness, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0)
	{
		perror(path);
		exit(1);
	}
}

/* ---- fuzz_params ---- */

typedef struct enc
{
	uint8_t		b[1024];
	size_t		n;
} enc;

static void
put(enc *e, const void *p, size_t n)
{
	if (e->n + n > sizeof(e->b))
		abort();
	memcpy(e->b + e->n, p, n);
	e->n += n;
}

static void
put_u8(enc *e, int v)
{
	uint8_t		b = (uint8_t) v;

	put(e, &b, 1);
}

static void
put_key(enc *e, int kind, const char *key)
{
	put_u8(e, kind);
	put_u8(e, (int) strlen(key));
	put(e, key, strlen(key));
}

static void
p_num(enc *e, const char *key, double v)
{
	put_key(e, 1, key);
	put(e, &v, 8);
}

static void
p_str(enc *e, const char *key, const char *v)
{
	put_key(e, 2, key);
	put_u8(e, (int) strlen(v));
	put(e, v, strlen(v));
}

static void
p_bool(enc *e, const char *key, int v)
{
	put_key(e, 3, key);
	put_u8(e, v);
}

static void
p_null(enc *e, const char *key)
{
	put_key(e, 0, key);
}

/* rows x cols matrix, every value raw (0xff + 8 bytes) */
static void
p_matrix(enc *e, const char *key, int rows, int cols, const double *v)
{
	put_key(e, 4, key);
	put_u8(e, rows - 1);
	put_u8(e, cols);
	for (int i = 0; i < rows * cols; i++)
	{
		put_u8(e, 0xff);
		put(e, &v[i], 8);
	}
}

static void
params_seed(const char *name, enc *e)
{
	write_file("fuzz_params", name, e->b, e->n);
}

enum
{
	A_BOOST = 0, A_KMEANS = 1, A_SAGA = 2, A_MEAN = 3
};

static void
params_seeds(void)
{
	enc			e;
	static const double init[] = {0, 0, 1, 1, 2, 2};

	for (int a = 0; a < 4; a++)
	{
		char		name[64];

		memset(&e, 0, sizeof(e));
		put_u8(&e, a);
		snprintf(name, sizeof(name), "seed-empty-%d", a);
		params_seed(name, &e);
		/* common parameters */
		p_str(&e, "device", "cpu");
		p_num(&e, "threads", 2);
		p_num(&e, "eval_fraction", 0.2);
		p_str(&e, "deploy", "if_better");
		p_str(&e, "label_column", "y");
		p_null(&e, "eval_source");
		snprintf(name, sizeof(name), "seed-common-%d", a);
		params_seed(name, &e);
	}

	memset(&e, 0, sizeof(e));
	put_u8(&e, A_BOOST);
	p_num(&e, "iterations", 50);
	p_num(&e, "learning_rate", 0.1);
	p_num(&e, "depth", 6);
	p_num(&e, "l2_leaf_reg", 3);
	p_num(&e, "border_count", 254);
	p_num(&e, "subsample", 0.8);
	p_str(&e, "loss", "Logloss");
	p_str(&e, "eval_metric", "AUC");
	p_num(&e, "early_stopping_rounds", 10);
	p_bool(&e, "use_best_model", 1);
	params_seed("seed-boost", &e);

	memset(&e, 0, sizeof(e));
	put_u8(&e, A_BOOST);
	p_str(&e, "loss", "YetiRank");
	p_str(&e, "eval_metric", "NDCG");
	p_num(&e, "eval_k", 10);
	p_str(&e, "group_column", "qid");
	params_seed("seed-boost-rank", &e);

	memset(&e, 0, sizeof(e));
	put_u8(&e, A_KMEANS);
	p_num(&e, "k", 3);
	p_str(&e, "init", "random");
	p_num(&e, "n_init", 4);
	p_num(&e, "max_iter", 100);
	p_num(&e, "tol", 1e-4);
	p_num(&e, "min_frac_changed", 0.001);
	p_bool(&e, "spherical", 0);
	params_seed("seed-kmeans", &e);

	memset(&e, 0, sizeof(e));
	put_u8(&e, A_KMEANS);
	p_num(&e, "k", 3);
	p_matrix(&e, "init", 3, 2, init);
	p_num(&e, "random_seed", 42);
	params_seed("seed-kmeans-matrix", &e);

	memset(&e, 0, sizeof(e));
	put_u8(&e, A_KMEANS);
	p_num(&e, "k", 1);
	p_matrix(&e, "init", 1, 0, init);	/* [] */
	params_seed("seed-kmeans-empty-matrix", &e);

	memset(&e, 0, sizeof(e));
	put_u8(&e, A_SAGA);
	p_str(&e, "loss", "logistic");
	p_num(&e, "alpha", 0.01);
	p_num(&e, "l1_ratio", 0.5);
	p_num(&e, "tol", 1e-3);
	p_num(&e, "max_iter", 200);
	p_num(&e, "step_size", 0);
	p_bool(&e, "fit_intercept", 1);
	p_bool(&e, "standardize", 1);
	params_seed("seed-saga", &e);

	memset(&e, 0, sizeof(e));
	put_u8(&e, A_MEAN);
	p_num(&e, "passes", 2);
	params_seed("seed-mean", &e);

	/* invalid ones: wrong types, out of range, unknown and duplicate keys, indexed keys */
	memset(&e, 0, sizeof(e));
	put_u8(&e, A_BOOST);
	p_str(&e, "iterations", "many");
	params_seed("seed-bad-type", &e);

	memset(&e, 0, sizeof(e));
	put_u8(&e, A_SAGA);
	p_num(&e, "alpha", NAN);
	params_seed("seed-bad-nan", &e);

	memset(&e, 0, sizeof(e));
	put_u8(&e, A_KMEANS);
	p_num(&e, "k", 2);
	p_num(&e, "k", 3);
	params_seed("seed-bad-duplicate", &e);

	memset(&e, 0, sizeof(e));
	put_u8(&e, A_MEAN);
	p_num(&e, "no_such_key", 1);
	params_seed("seed-bad-unknown", &e);

	memset(&e, 0, sizeof(e));
	put_u8(&e, A_BOOST);
	for (int i = 0; i < 8; i++)
	{
		put_u8(&e, 0x80 | (i % 8));	/* indexed key, kind i */
		put_u8(&e, 12 + i);
		put_u8(&e, 3);
		put_u8(&e, 1);
	}
	params_seed("seed-indexed", &e);
}

/* ---- fuzz_dataset ---- */

static void
dataset_seed(const char *name, gbml_dataset *ds)
{
	size_t		len = gbml_dataset_serialized_size(ds);
	uint8_t    *b = malloc(len);

	gbml_dataset_serialize_into(ds, b);
	write_file("fuzz_dataset", name, b, len);
	free(b);
}

static void
append_rows(gbml_dataset *ds, gbml_env *env, int rows, int d, int with_group, int with_weight, int nan_every,
			int seed)
{
	float		x[512];

	for (int r = 0; r < rows; r++)
	{
		gbml_row	row;

		for (int j = 0; j < d; j++)
			x[j] = (float) (((r + seed) * 31 + j * 7) % 17) / 4.0f - 1.0f;
		if (nan_every && r % nan_every == 0)
			x[r % d] = NAN;
		memset(&row, 0, sizeof(row));
		row.x = x;
		row.n_features = d;
		row.label = (float) (r % 3);
		row.group = r / 4;
		row.group_is_null = !with_group;
		row.weight = with_weight ? 0.5f + (float) (r % 4) : 1.0f;
		row.weight_is_null = !with_weight;
		if (gbml_dataset_append(ds, env, &row, true) != GBML_OK)
		{
			fprintf(stderr, "append: %s\n", env->error);
			exit(1);
		}
	}
	gbml_dataset_finish_appends(ds, env);
}

static void
dataset_seeds(void)
{
	gbml_env	env;
	gbml_dataset ds,
				other;

	gbml_env_init_malloc(&env, 1);

	gbml_dataset_init(&ds, false);
	dataset_seed("seed-empty", &ds);
	gbml_dataset_free(&ds, &env);

	gbml_dataset_init(&ds, false);
	append_rows(&ds, &env, 1, 1, 0, 0, 0, 0);
	dataset_seed("seed-1x1", &ds);
	gbml_dataset_free(&ds, &env);

	gbml_dataset_init(&ds, false);
	append_rows(&ds, &env, 20, 3, 0, 0, 0, 1);
	dataset_seed("seed-20x3", &ds);
	gbml_dataset_free(&ds, &env);

	gbml_dataset_init(&ds, false);
	append_rows(&ds, &env, 16, 4, 1, 1, 0, 2);
	dataset_seed("seed-16x4-group-weight", &ds);
	gbml_dataset_free(&ds, &env);

	gbml_dataset_init(&ds, true);
	append_rows(&ds, &env, 12, 5, 0, 0, 3, 3);
	dataset_seed("seed-12x5-missing", &ds);
	gbml_dataset_free(&ds, &env);

	/* duplicate rows: equal hashes, ordered by content */
	gbml_dataset_init(&ds, false);
	append_rows(&ds, &env, 4, 2, 0, 0, 0, 5);
	append_rows(&ds, &env, 4, 2, 0, 0, 0, 5);
	dataset_seed("seed-duplicates", &ds);
	gbml_dataset_free(&ds, &env);

	/* three chunks from merges (not the serial layout: canonicalize relayouts) */
	gbml_dataset_init(&ds, false);
	append_rows(&ds, &env, 5, 2, 1, 0, 0, 6);
	for (int i = 0; i < 2; i++)
	{
		gbml_dataset_init(&other, false);
		append_rows(&other, &env, 3 + i, 2, 1, 0, 0, 7 + i);
		if (gbml_dataset_merge(&ds, &other, &env) != GBML_OK)
		{
			fprintf(stderr, "merge: %s\n", env.error);
			exit(1);
		}
		gbml_dataset_free(&other, &env);
	}
	dataset_seed("seed-merged-3-chunks", &ds);
	gbml_dataset_free(&ds, &env);

	/* wide rows */
	gbml_dataset_init(&ds, false);
	append_rows(&ds, &env, 3, 400, 0, 1, 0, 9);
	dataset_seed("seed-3x400", &ds);
	gbml_dataset_free(&ds, &env);

	if (env.memory_used != 0)
	{
		fprintf(stderr, "make_seeds: leak of %zu bytes\n", env.memory_used);
		exit(1);
	}
}

/* ---- fuzz_model: tests/models/<name>.gbml with a control byte in front ---- */

static void
model_seeds(void)
{
	static const char *const models[] = {"v1_mean_0", "v1_boost_1", "v1_boost_2", "v1_kmeans_3", "v1_saga_4",
	"v1_boost_5"};
	/* 0x00: fix length + CRC; 0x80: raw; 1..4: feed to another algorithm's loader */
	static const uint8_t controls[][3] = {{0x00, 0x80, 0x02}, {0x00, 0x80, 0x03}, {0x00, 0x04, 0x01},
	{0x00, 0x80, 0x04}, {0x00, 0x80, 0x02}, {0x00, 0x80, 0x03}};

	for (int m = 0; m < 6; m++)
	{
		char		path[512];
		uint8_t    *buf = malloc(1 << 20);
		FILE	   *f;
		size_t		len;

		snprintf(path, sizeof(path), "%s/../../models/%s.gbml", dir, models[m]);
		f = fopen(path, "rb");
		if (f == NULL)
		{
			perror(path);
			exit(1);
		}
		len = fread(buf + 1, 1, (1 << 20) - 1, f);
		fclose(f);
		for (int c = 0; c < 3; c++)
		{
			char		name[128];

			buf[0] = controls[m][c];
			snprintf(name, sizeof(name), "seed-%s-%02x", models[m], buf[0]);
			write_file("fuzz_model", name, buf, len + 1);
		}
		free(buf);
	}
}

int
main(int argc, char **argv)
{
	dir = argc > 1 ? argv[1] : "corpus";
	params_seeds();
	dataset_seeds();
	model_seeds();
	return 0;
}
