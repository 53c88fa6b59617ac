/*
 * test_stored_models.c — every released model format stays readable.
 *
 * tests/models/ keeps, for each format version, one small model of each
 * algorithm and the scores it gave when it was written (expected.txt).  This
 * test loads each file and checks the scores.  To add the files of a new
 * format version: GBML_WRITE_MODELS=1 ./gbml_unit stored_models (run from
 * tests/unit), then commit tests/models/.  A case added within a version
 * (v1_boost_5, MultiClass, extension 0.7.0) keeps only its new file and
 * expected line: the older files stay as they were written.
 */
#include "harness.h"
#include "algorithm.h"
#include "rng.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#define MODELS_DIR "../models"
#define N_FEATURES 4

typedef struct stored_case
{
	const char *algorithm;
	const char *params_key;		/* one extra param, or NULL */
	const char *params_value;
	gbml_output output;
	bool		groups;
	bool		binary_label;
} stored_case;

static const stored_case cases[] = {
	{"mean", NULL, NULL, GBML_OUT_SCORE, false, false},
	{"boost", "loss", "YetiRank", GBML_OUT_SCORE, true, false},
	{"boost", "loss", "Logloss", GBML_OUT_PROBA, false, true},
	{"kmeans", "init", "k-means++", GBML_OUT_DISTANCE, false, false},
	{"saga", "loss", "logistic", GBML_OUT_PROBA, false, true},
	/* (0.7.0: the header's class count and base scores; the output is the most probable class) */
	{"boost", "loss", "MultiClass", GBML_OUT_SCORE, false, false},
};

static void
make_data(gbml_dataset *ds, gbml_env *env, const stored_case *c)
{
	gbml_rng	rng;

	gbml_dataset_init(ds, strcmp(c->algorithm, "boost") == 0);
	gbml_rng_seed(&rng, 2024);
	for (int i = 0; i < 400; i++)
	{
		float		x[N_FEATURES];
		gbml_row	row = {0};

		for (int j = 0; j < N_FEATURES; j++)
			x[j] = (float) gbml_rng_uniform(&rng);
		row.x = x;
		row.n_features = N_FEATURES;
		row.label = c->binary_label ? (float) (x[0] + x[1] > 1) : (float) (int) (x[0] * 3);
		row.group = i / 10;
		row.group_is_null = !c->groups;
		row.weight_is_null = true;
		gbml_dataset_append(ds, env, &row, true);
	}
}

static void
probe_rows(float x[3][N_FEATURES])
{
	static const float rows[3][N_FEATURES] = {{0.1f, 0.2f, 0.3f, 0.4f}, {0.9f, 0.8f, 0.1f, 0.5f}, {0.5f, 0.5f, 0.5f, 0.5f}};

	memcpy(x, rows, sizeof(rows));
}

static void
write_models(void)
{
	FILE	   *expected = fopen(MODELS_DIR "/expected.txt", "w");

	CHECK(expected != NULL);
	if (!expected)
		return;
	fprintf(expected, "# file output score1 score2 score3 (written by test_stored_models.c)\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		const stored_case *c = &cases[i];
		gbml_env	env;
		gbml_dataset ds;
		gbml_param_value v[2];
		int			nv = 0;
		uint8_t    *model;
		size_t		len;
		char		path[256];
		FILE	   *f;
		gbml_scorer sc;
		float		x[3][N_FEATURES];

		gbml_env_init_malloc(&env, 1);
		make_data(&ds, &env, c);
		if (c->params_key)
			v[nv++] = tu_str(c->params_key, c->params_value);
		if (strcmp(c->algorithm, "kmeans") == 0)
			v[nv++] = tu_num("k", 3);
		if (strcmp(c->algorithm, "boost") == 0)
			v[nv++] = tu_num("iterations", 10);
		CHECK(gbml_train_values(&env, c->algorithm, v, nv, &ds, NULL, &model, &len) == GBML_OK);
		snprintf(path, sizeof(path), MODELS_DIR "/v%d_%s_%zu.gbml", GBML_MODEL_FORMAT_VERSION, c->algorithm, i);
		f = fopen(path, "wb");
		fwrite(model, 1, len, f);
		fclose(f);
		CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
		probe_rows(x);
		fprintf(expected, "%s %d", strrchr(path, '/') + 1, (int) c->output);
		for (int r = 0; r < 3; r++)
		{
			double		out;

			CHECK(gbml_scorer_predict(&sc, &env, x[r], N_FEATURES, c->output, &out) == GBML_OK);
			fprintf(expected, " %.17g", out);
		}
		fprintf(expected, "\n");
		gbml_scorer_free(&sc, &env);
		gbml_free(&env, model);
		gbml_dataset_free(&ds, &env);
	}
	fclose(expected);
}

TEST(stored_models_of_every_format_version_load_and_score)
{
	FILE	   *expected;
	char		line[1024];
	int			checked = 0;

	if (getenv("GBML_WRITE_MODELS"))
		write_models();
	expected = fopen(MODELS_DIR "/expected.txt", "r");
	CHECK(expected != NULL);
	if (!expected)
		return;
	while (fgets(line, sizeof(line), expected))
	{
		char		file[128],
					path[256];
		int			output;
		double		want[3];
		FILE	   *f;
		uint8_t    *bytes;
		long		len;
		gbml_env	env;
		gbml_scorer sc;
		float		x[3][N_FEATURES];

		if (line[0] == '#' || sscanf(line, "%127s %d %lf %lf %lf", file, &output, &want[0], &want[1], &want[2]) != 5)
			continue;
		snprintf(path, sizeof(path), MODELS_DIR "/%s", file);
		f = fopen(path, "rb");
		CHECK(f != NULL);
		if (!f)
			continue;
		fseek(f, 0, SEEK_END);
		len = ftell(f);
		fseek(f, 0, SEEK_SET);
		bytes = malloc((size_t) len);
		CHECK(fread(bytes, 1, (size_t) len, f) == (size_t) len);
		fclose(f);
		gbml_env_init_malloc(&env, 1);
		CHECK(gbml_scorer_load(&sc, &env, bytes, (size_t) len) == GBML_OK);
		probe_rows(x);
		for (int r = 0; r < 3; r++)
		{
			double		got = NAN;

			CHECK(gbml_scorer_predict(&sc, &env, x[r], N_FEATURES, (gbml_output) output, &got) == GBML_OK);
			CHECK_NEAR(got, want[r], 1e-9 * (1 + fabs(want[r])));
		}
		gbml_scorer_free(&sc, &env);
		free(bytes);
		checked++;
	}
	fclose(expected);
	CHECK(checked >= 6);
}
