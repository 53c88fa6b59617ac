/*
 * bench_saga.c — benchmark driver for the SAGA trainer (driven by
 * tests/bench/saga_bench.py, which builds it and compares with scikit-learn).
 *
 * Reads a CSV (header row, label first, then features) into a gbml dataset
 * with gbml_dataset_append, exactly as the SQL glue would, then trains through
 * the shared driver gbml_train.  For every value of an optional sweep
 * parameter it trains `repeat` times and prints one JSON line: the best wall
 * time of the whole gbml_train call (canonical order included), the model's
 * META and its JSON dump, and the accuracy/RMSE on an optional test CSV.
 *
 *   bench_saga TRAIN.csv [--test TEST.csv] [--threads N] [--repeat R]
 *              [--sweep key=v1,v2,...] [key=value ...]
 */
#include "algorithm.h"
#include "bench_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
print_section(const uint8_t *model, size_t len, gbml_env *env, uint32_t tag)
{
	gbml_model_reader r;
	const uint8_t *data;
	size_t		dlen;

	if (gbml_model_open(&r, env, model, len) == GBML_OK && gbml_model_find(&r, tag, &data, &dlen))
		fwrite(data, 1, dlen, stdout);
	else
		fputs("null", stdout);
}

int
main(int argc, char **argv)
{
	gbml_env	env;
	gbml_dataset ds,
				test;
	const char *test_path = NULL;
	const char *sweep_key = NULL;
	char	   *sweep_vals = NULL;
	gbml_param_value values[32];
	int			n_values = 0,
				threads = 2,
				repeat = 1,
				sweep_slot = -1;
	double		t0;

	if (argc < 2)
	{
		fprintf(stderr, "usage: %s TRAIN.csv [--test TEST.csv] [--threads N] [--repeat R] [--sweep key=v1,v2] [key=value ...]\n", argv[0]);
		return 2;
	}
	for (int i = 2; i < argc; i++)
	{
		if (strcmp(argv[i], "--test") == 0 && i + 1 < argc)
			test_path = argv[++i];
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (strcmp(argv[i], "--sweep") == 0 && i + 1 < argc)
		{
			char	   *eq = strchr(argv[++i], '=');

			if (!eq)
				return 2;
			*eq = '\0';
			sweep_key = argv[i];
			sweep_vals = eq + 1;
		}
		else
		{
			if (n_values >= 30 || !bu_param(argv[i], &values[n_values++]))
				return 2;
		}
	}
	if (sweep_key)
		sweep_slot = n_values++;

	gbml_env_init_malloc(&env, threads);
	gbml_dataset_init(&ds, false);
	gbml_dataset_init(&test, false);
	t0 = gbml_now();
	/* label,features */
	if (bu_load_csv(argv[1], &ds, &env, -1, 0, 1) != 0 ||
		(test_path && bu_load_csv(test_path, &test, &env, -1, 0, 1) != 0))
		return 1;
	fprintf(stderr, "loaded %lld rows x %d features in %.2f s\n", (long long) ds.n_rows, ds.n_features, gbml_now() - t0);

	for (char *tok = sweep_key ? strtok(sweep_vals, ",") : "";
		 tok != NULL; tok = sweep_key ? strtok(NULL, ",") : NULL)
	{
		gbml_parsed_params pp;
		uint8_t    *best_model = NULL;
		size_t		best_len = 0;
		double		best = 1e300;
		gbml_strbuf best_report;

		gbml_sb_init(&best_report, &env);
		if (sweep_key)
			bu_param_value(sweep_key, tok, &values[sweep_slot]);
		if (gbml_parse_training_params(&env, gbml_algorithm_by_name("saga"), values, n_values, &pp) != GBML_OK)
		{
			fprintf(stderr, "params: %s\n", env.error);
			return 1;
		}
		for (int r = 0; r < repeat; r++)
		{
			uint8_t    *model;
			size_t		len;
			gbml_strbuf report;
			double		t;

			gbml_sb_init(&report, &env);
			t = gbml_now();
			if (gbml_train_report(&env, &pp, &ds, NULL, &model, &len, &report) != GBML_OK)
			{
				fprintf(stderr, "train: %s\n", env.error);
				return 1;
			}
			t = gbml_now() - t;
			if (t < best)
			{
				best = t;
				gbml_free(&env, best_model);
				best_model = model;
				best_len = len;
				gbml_sb_free(&best_report);
				best_report = report;
			}
			else
			{
				gbml_free(&env, model);
				gbml_sb_free(&report);
			}
		}
		printf("{\"sweep\":%s%s%s,\"seconds\":%.6f,\"meta\":", sweep_key ? "\"" : "", sweep_key ? tok : "null",
			   sweep_key ? "\"" : "", best);
		print_section(best_model, best_len, &env, GBML_SECTION_META);
		printf(",\"report\":%s", best_report.data ? best_report.data : "null");
		gbml_sb_free(&best_report);
		{
			gbml_scorer sc;
			gbml_strbuf js;

			if (gbml_scorer_load(&sc, &env, best_model, best_len) != GBML_OK)
			{
				fprintf(stderr, "load: %s\n", env.error);
				return 1;
			}
			gbml_sb_init(&js, &env);
			sc.algo->to_json(sc.handle, &js);
			printf(",\"model\":{%s}", js.data ? js.data : "");
			gbml_sb_free(&js);
			if (test.n_rows > 0)
			{
				double		hits = 0,
							se = 0;
				int64_t		n = 0;

				for (int c = 0; c < test.n_chunks; c++)
					for (int64_t r = 0; r < test.chunks[c]->n_rows; r++, n++)
					{
						double		out;

						gbml_scorer_predict(&sc, &env, test.chunks[c]->x + (size_t) r * test.n_features,
											test.n_features, GBML_OUT_SCORE, &out);
						hits += out == test.chunks[c]->label[r];
						se += (out - test.chunks[c]->label[r]) * (out - test.chunks[c]->label[r]);
					}
				printf(",\"test_accuracy\":%.6f,\"test_rmse\":%.6f", hits / (double) n, sqrt(se / (double) n));
			}
			gbml_scorer_free(&sc, &env);
		}
		printf("}\n");
		fflush(stdout);
		gbml_free(&env, best_model);
		gbml_parsed_params_free(&env, &pp);
		if (!sweep_key)
			break;
	}
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&test, &env);
	return 0;
}
