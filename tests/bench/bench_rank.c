/*
 * bench_rank.c — the gbml side of the ranking-quality benchmark
 * (tests/bench/rank_quality_bench.py): loads LETOR-style CSVs
 * (header `qid,label,f1..fN`, rows of a query contiguous) into gbml_datasets,
 * trains the "boost" model through the same driver the SQL glue uses
 * (gbml_parse_training_params + gbml_train), loads it with gbml_scorer_load and
 * writes one score per test row, in file order.  The Python script computes
 * every metric itself, with one implementation for all systems.
 *
 * usage: bench_rank --train A.csv[,B.csv...] [--eval V.csv[,...]] --test T.csv
 *                   --out scores.txt [--threads N] [key=value ...]
 * key=value pairs are boost parameters (numbers, true/false, or strings).
 * Prints one JSON line on stdout: seconds and the model's info (META).
 */
#include "algorithm.h"
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
die(const char *what, gbml_env *env)
{
	fprintf(stderr, "bench_rank: %s%s%s\n", what, env ? ": " : "", env ? env->error : "");
	exit(1);
}

static void
load_list(const char *list, gbml_dataset *ds, gbml_env *env)
{
	char	   *copy = strdup(list),
			   *save = NULL;

	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (bu_load_csv(tok, ds, env, 0, 1, 2) != 0)	/* qid,label,features */
			exit(1);
	free(copy);
}

int
main(int argc, char **argv)
{
	const char *train = NULL,
			   *evalf = NULL,
			   *test = NULL,
			   *out = NULL;
	int			threads = 1,
				nvals = 0;
	gbml_param_value *vals = calloc((size_t) argc, sizeof(gbml_param_value));
	gbml_env	env;
	gbml_dataset ds,
				ev,
				te;
	gbml_parsed_params params;
	const gbml_algorithm *algo;
	uint8_t    *model = NULL;
	size_t		model_len = 0;
	gbml_scorer scorer;
	gbml_strbuf info;
	double		t0,
				t_train,
				t_score;
	FILE	   *fo;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--train") == 0 && i + 1 < argc)
			train = argv[++i];
		else if (strcmp(argv[i], "--eval") == 0 && i + 1 < argc)
			evalf = argv[++i];
		else if (strcmp(argv[i], "--test") == 0 && i + 1 < argc)
			test = argv[++i];
		else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
			out = argv[++i];
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!bu_param(argv[i], &vals[nvals++]))
			return 1;
	}
	if (!train || !test || !out)
	{
		fprintf(stderr, "usage: bench_rank --train A.csv[,B.csv] [--eval V.csv] --test T.csv --out scores.txt [--threads N] [key=value ...]\n");
		return 2;
	}
	gbml_env_init_malloc(&env, threads > 0 ? threads : 1);
	algo = gbml_algorithm_by_name("boost");
	if (algo == NULL)
		die("the boost algorithm is not registered in this build", NULL);

	gbml_dataset_init(&ds, algo->input_flags & GBML_INPUT_MISSING);
	gbml_dataset_init(&ev, algo->input_flags & GBML_INPUT_MISSING);
	gbml_dataset_init(&te, true);
	load_list(train, &ds, &env);
	if (evalf)
		load_list(evalf, &ev, &env);
	load_list(test, &te, &env);

	if (gbml_parse_training_params(&env, algo, vals, nvals, &params) != GBML_OK)
		die("params", &env);
	t0 = gbml_now();
	if (gbml_train(&env, &params, &ds, evalf ? &ev : NULL, &model, &model_len) != GBML_OK)
		die("train", &env);
	t_train = gbml_now() - t0;

	if (gbml_scorer_load(&scorer, &env, model, model_len) != GBML_OK)
		die("load", &env);
	fo = fopen(out, "w");
	if (fo == NULL)
		die("cannot write the scores file", NULL);
	/* te is never canonicalized: its chunks hold the rows in file order */
	t0 = gbml_now();
	for (int c = 0; c < te.n_chunks; c++)
		for (int64_t r = 0; r < te.chunks[c]->n_rows; r++)
		{
			double		s;

			if (gbml_scorer_predict(&scorer, &env, gbml_dataset_row(&te, c, r), te.n_features,
									GBML_OUT_SCORE, &s) != GBML_OK)
				die("predict", &env);
			fprintf(fo, "%.17g\n", s);
		}
	t_score = gbml_now() - t0;
	fclose(fo);

	gbml_sb_init(&info, &env);
	if (gbml_model_info_json(&env, model, model_len, &info) != GBML_OK)
		die("model_info", &env);
	printf("{\"train_seconds\":%.6f,\"score_seconds\":%.6f,\"model_bytes\":%zu,\"info\":%.*s}\n",
		   t_train, t_score, model_len, (int) info.len, info.data);
	gbml_sb_free(&info);
	gbml_scorer_free(&scorer, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&ev, &env);
	gbml_dataset_free(&te, &env);
	free(vals);
	return 0;
}
