/*
 * bench_boost.c — the C side of the boosting speed bench (driven by
 * tests/bench/boost_speed_bench.py, which runs the peers on the same data).
 *
 * Reads a raw data file (int64 n, int64 d, n*d float32 features row-major,
 * n float32 labels), then
 *   1. trains boost (RMSE) with the given trees/depth/borders/threads and
 *      prints the total time and the time of every tree (progress callback);
 *   2. trains a scoring model (score_trees trees on the first
 *      score_train_rows rows) and scores every row: the batch scorer with 1
 *      and `threads` threads, and the single-row scorer (the SQL path).
 * --spill 1 plans the dataset as the server does (gbml_plan_spill: the float
 * features go to temporary files, boosting keeps only bins) and the run
 * prints the peak engine memory and a hash of the model bytes to compare.
 *
 * --classes K (K >= 2; default 0, RMSE as above) trains "loss": "MultiClass"
 * with classes_count K on the labels as given (class ids 0 .. K-1).  --trees
 * then counts iterations, each K trees; the per-iteration times are printed
 * (iter_seconds_*) and, divided by K, the per-tree times (tree_seconds_*).
 * --test-rows M trains on the first n - M rows and prints the multiclass
 * logloss and accuracy of the last M (test_logloss, test_accuracy; without
 * it, of the training rows: train_logloss, train_accuracy), from the
 * single-row class scorer (gbml_scorer_classes), whose speed on those rows is
 * printed too.  The scoring part (2.) then trains a MultiClass scoring model
 * (score_trees iterations, K trees each) and times gbml_scorer_classes on
 * every row: the batch scorer is for single-score forests only.
 * Results are printed as "RESULT key value" lines; the train report as
 * "REPORT {json}".
 */
#include "algorithm.h"
#include "boost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double *tree_times;
static int64_t n_tree_times;

#define LOGLOSS_EPS 1e-15		/* probabilities clipped to [eps, 1 - eps], as the driver does for the peers */

static bool
record_progress(void *ctx, const gbml_progress_info *info)
{
	(void) ctx;
	if (info->iteration >= 1 && info->iteration <= n_tree_times)
		tree_times[info->iteration - 1] = gbml_now();
	return false;
}

static int
load_dataset(gbml_dataset *ds, gbml_env *env, const float *x, const float *y, int64_t n, int64_t d,
			 bool spill)
{
	gbml_dataset_init(ds, true);
	if (spill)
		gbml_plan_spill(&gbml_algorithm_boost, env, ds);	/* as the server does: floats to files */
	for (int64_t i = 0; i < n; i++)
	{
		gbml_row	row = {.x = x + i * d,.n_features = (int) d,.label = y[i],
		.group_is_null = true,.weight_is_null = true};
		int			rc = gbml_dataset_append(ds, env, &row, true);

		if (rc != GBML_OK)
			return rc;
	}
	return GBML_OK;
}

static int
train(gbml_env *env, gbml_dataset *ds, int64_t trees, int64_t depth, int64_t borders, int classes,
	  uint8_t **model, size_t *len, gbml_strbuf *report)
{
	gbml_parsed_params pp;
	gbml_param_value v[] = {
		{.key = "iterations",.kind = GBML_VALUE_NUMBER,.number = (double) trees},
		{.key = "depth",.kind = GBML_VALUE_NUMBER,.number = (double) depth},
		{.key = "border_count",.kind = GBML_VALUE_NUMBER,.number = (double) borders},
		{.key = "learning_rate",.kind = GBML_VALUE_NUMBER,.number = 0.1},
		{.key = "loss",.kind = GBML_VALUE_STRING,.string = classes >= 2 ? "MultiClass" : "RMSE"},
		{.key = "classes_count",.kind = GBML_VALUE_NUMBER,.number = (double) classes},
	};
	int			rc = gbml_parse_training_params(env, &gbml_algorithm_boost, v, classes >= 2 ? 6 : 5, &pp);

	if (rc == GBML_OK)
		rc = gbml_train_report(env, &pp, ds, NULL, model, len, report);
	return rc;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	const char *path = NULL;
	int			threads = 2;
	int64_t		trees = 100,
				depth = 6,
				borders = 32,
				score_trees = 500,
				score_train_rows = 100000,
				repeat = 3;
	int			spill = 0;
	int			classes = 0;
	int64_t		test_rows = 0,
				n_train;
	FILE	   *fp;
	int64_t		n,
				d;
	float	   *x,
			   *y;
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	gbml_strbuf report;
	double		t0,
				t_train;
	int			rc;

	for (int i = 1; i + 1 < argc; i += 2)
	{
		if (strcmp(argv[i], "--data") == 0)
			path = argv[i + 1];
		else if (strcmp(argv[i], "--threads") == 0)
			threads = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--trees") == 0)
			trees = atoll(argv[i + 1]);
		else if (strcmp(argv[i], "--depth") == 0)
			depth = atoll(argv[i + 1]);
		else if (strcmp(argv[i], "--borders") == 0)
			borders = atoll(argv[i + 1]);
		else if (strcmp(argv[i], "--score-trees") == 0)
			score_trees = atoll(argv[i + 1]);
		else if (strcmp(argv[i], "--score-train-rows") == 0)
			score_train_rows = atoll(argv[i + 1]);
		else if (strcmp(argv[i], "--repeat") == 0)
			repeat = atoll(argv[i + 1]);
		else if (strcmp(argv[i], "--spill") == 0)
			spill = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--classes") == 0)
			classes = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--test-rows") == 0)
			test_rows = atoll(argv[i + 1]);
		else
		{
			fprintf(stderr, "unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (path == NULL || (fp = fopen(path, "rb")) == NULL)
	{
		fprintf(stderr, "usage: bench_boost --data FILE [--threads 2 --trees 100 --depth 6 --borders 32 "
				"--score-trees 500 --score-train-rows 100000 --repeat 3 --spill 0|1 --classes 0|K --test-rows 0]\n");
		return 2;
	}
	if (classes == 1 || classes < 0 || test_rows < 0 || (test_rows > 0 && classes < 2))
	{
		fprintf(stderr, "--classes is 0 (RMSE) or at least 2; --test-rows needs --classes\n");
		return 2;
	}
	if (fread(&n, 8, 1, fp) != 1 || fread(&d, 8, 1, fp) != 1 || n <= 0 || d <= 0)
		return 2;
	x = malloc(sizeof(float) * n * d);
	y = malloc(sizeof(float) * n);
	if (fread(x, sizeof(float), n * d, fp) != (size_t) (n * d) || fread(y, sizeof(float), n, fp) != (size_t) n)
	{
		fprintf(stderr, "short data file\n");
		return 2;
	}
	fclose(fp);
	if (test_rows >= n)
	{
		fprintf(stderr, "--test-rows %lld leaves no training row of %lld\n", (long long) test_rows, (long long) n);
		return 2;
	}
	n_train = n - test_rows;
	printf("RESULT rows %lld\nRESULT features %lld\n", (long long) n, (long long) d);
	if (classes >= 2)
		printf("RESULT classes %d\nRESULT train_rows %lld\nRESULT test_rows %lld\n", classes,
			   (long long) n_train, (long long) test_rows);

	/* 1. training speed */
	gbml_env_init_malloc(&env, threads);
	if (trees > 0)
	{
		double		t_load = gbml_now();

		if ((rc = load_dataset(&ds, &env, x, y, n_train, d, spill != 0)) != GBML_OK)
		{
			fprintf(stderr, "load: %s\n", env.error);
			return 1;
		}
		tree_times = calloc(trees, sizeof(double));
		n_tree_times = trees;
		env.progress_fn = record_progress;
		gbml_sb_init(&report, &env);
		t0 = gbml_now();
		rc = train(&env, &ds, trees, depth, borders, classes, &model, &len, &report);
		t_train = gbml_now() - t0;
		if (rc != GBML_OK)
		{
			fprintf(stderr, "train: %s\n", env.error);
			return 1;
		}
		gbml_sb_append(&report, "", 1);
		printf("REPORT %s\n", report.data);
		printf("RESULT train_seconds %.6f\n", t_train);
		printf("RESULT load_seconds %.6f\n", t0 - t_load);
		printf("RESULT peak_memory_mb %.1f\n", (double) env.memory_peak / 1048576.0);
		{
			uint64_t	h = 1469598103934665603ULL;	/* FNV-1a of the model bytes */

			for (size_t i = 0; i < len; i++)
				h = (h ^ model[i]) * 1099511628211ULL;
			printf("RESULT model_fnv %016llx\n", (unsigned long long) h);
		}
		{
			double	   *dt = malloc(sizeof(double) * trees);
			int64_t		m = 0;

			for (int64_t i = 1; i < trees; i++)
				if (tree_times[i] > 0 && tree_times[i - 1] > 0)
					dt[m++] = tree_times[i] - tree_times[i - 1];
			if (m > 0)
			{
				int			k = classes >= 2 ? classes : 1;	/* trees an iteration */

				qsort(dt, m, sizeof(double), cmp_double);
				if (classes >= 2)
				{
					printf("RESULT iter_seconds_median %.6f\n", dt[m / 2]);
					printf("RESULT iter_seconds_min %.6f\n", dt[0]);
				}
				printf("RESULT tree_seconds_median %.6f\n", dt[m / 2] / k);
				printf("RESULT tree_seconds_min %.6f\n", dt[0] / k);
			}
			printf("RESULT setup_seconds %.6f\n", tree_times[0] - t0);
			free(dt);
		}
		if (classes >= 2)
		{
			/* held-out (or training) logloss and accuracy from the single-row class scorer */
			gbml_scorer sc;
			double	   *prob = malloc(sizeof(double) * classes);
			int64_t		from = test_rows > 0 ? n_train : 0,
						hits = 0,
						disagree = 0;
			double		ll = 0,
						t_eval;
			const char *which = test_rows > 0 ? "test" : "train";

			if (gbml_scorer_load(&sc, &env, model, len) != GBML_OK || sc.n_classes != classes)
			{
				fprintf(stderr, "scorer: %s (classes %d)\n", env.error, sc.n_classes);
				return 1;
			}
			t0 = gbml_now();
			for (int64_t i = from; i < n; i++)
			{
				int			best = 0,
							c = (int) y[i];
				double		p;

				if (gbml_scorer_classes(&sc, &env, x + i * d, (int) d, prob) != GBML_OK)
				{
					fprintf(stderr, "classes: %s\n", env.error);
					return 1;
				}
				for (int j = 1; j < classes; j++)
					if (prob[j] > prob[best])
						best = j;
				p = c >= 0 && c < classes ? prob[c] : 0;
				p = p < LOGLOSS_EPS ? LOGLOSS_EPS : p > 1 - LOGLOSS_EPS ? 1 - LOGLOSS_EPS : p;
				ll -= log(p);
				hits += best == c;
			}
			t_eval = gbml_now() - t0;
			/* the most probable class of gbml_scorer_predict is the argmax above (a sample checked) */
			for (int64_t i = from; i < n && i < from + 1000; i++)
			{
				double		cls;
				int			best = 0;

				gbml_scorer_predict(&sc, &env, x + i * d, (int) d, GBML_OUT_SCORE, &cls);
				gbml_scorer_classes(&sc, &env, x + i * d, (int) d, prob);
				for (int j = 1; j < classes; j++)
					if (prob[j] > prob[best])
						best = j;
				disagree += (int) cls != best;
			}
			if (disagree > 0)
				fprintf(stderr, "gbml_scorer_predict and the argmax of gbml_scorer_classes disagree on %lld rows\n",
						(long long) disagree);
			printf("RESULT %s_logloss %.6f\n", which, ll / (double) (n - from));
			printf("RESULT %s_accuracy %.6f\n", which, (double) hits / (double) (n - from));
			printf("RESULT eval_classes_single_1thread_rows_per_s %.1f\n", (double) (n - from) / t_eval);
			printf("RESULT model_trees %d\n", ((const gbml_boost_model *) sc.handle)->forest.n_trees);
			gbml_scorer_free(&sc, &env);
			free(prob);
		}
		else
		{
			gbml_scorer sc;
			double		s = 0,
						se = 0;

			if (gbml_scorer_load(&sc, &env, model, len) != GBML_OK)
				return 1;
			for (int64_t i = 0; i < n; i++)
			{
				double		p;

				gbml_scorer_predict(&sc, &env, x + i * d, (int) d, GBML_OUT_SCORE, &p);
				s += p;
				se += (p - y[i]) * (p - y[i]);
			}
			printf("RESULT train_rmse %.6f\n", sqrt(se / n));
			gbml_scorer_free(&sc, &env);
		}
		gbml_free(&env, model);
		gbml_sb_free(&report);
		gbml_dataset_free(&ds, &env);
		env.progress_fn = NULL;
	}

	/* 2. scoring speed */
	if (score_trees > 0)
	{
		gbml_scorer sc;
		double	   *out = malloc(sizeof(double) * n);
		double		best1 = 1e30,
					bestT = 1e30,
					best_single = 1e30,
					check = 0;
		int64_t		m = score_train_rows < n ? score_train_rows : n;

		if ((rc = load_dataset(&ds, &env, x, y, m, d, false)) != GBML_OK)
			return 1;
		gbml_sb_init(&report, &env);
		if ((rc = train(&env, &ds, score_trees, depth, borders, classes, &model, &len, &report)) != GBML_OK)
		{
			fprintf(stderr, "train (scoring model): %s\n", env.error);
			return 1;
		}
		gbml_sb_free(&report);
		gbml_dataset_free(&ds, &env);
		if (gbml_scorer_load(&sc, &env, model, len) != GBML_OK)
			return 1;
		if (classes >= 2)
		{
			/* MultiClass: the single-row class scorer (the batch scorer is for single-score forests) */
			const gbml_boost_model *bm = sc.handle;
			double	   *prob = malloc(sizeof(double) * classes);

			printf("RESULT score_model_trees %d\n", bm->forest.n_trees);
			for (int64_t r = 0; r < repeat; r++)
			{
				double		s = 0;

				env.threads = 1;
				t0 = gbml_now();
				for (int64_t i = 0; i < n; i++)
				{
					gbml_scorer_classes(&sc, &env, x + i * d, (int) d, prob);
					for (int j = 1; j < classes; j++)
						s += j * prob[j];	/* the expected class id: a checksum */
				}
				if (gbml_now() - t0 < best_single)
					best_single = gbml_now() - t0;
				check = s;
			}
			env.threads = threads;
			printf("RESULT score_classes_single_1thread_rows_per_s %.1f\n", n / best_single);
			printf("RESULT score_checksum %.9g\n", check);
			free(prob);
		}
		else
		{
			const gbml_boost_model *bm = sc.handle;

			printf("RESULT score_model_trees %d\n", bm->forest.n_trees);
			for (int64_t r = 0; r < repeat; r++)
			{
				env.threads = 1;
				t0 = gbml_now();
				gbml_boost_forest_predict_batch(&bm->forest, x, n, d, out, &env);
				if (gbml_now() - t0 < best1)
					best1 = gbml_now() - t0;
				env.threads = threads;
				t0 = gbml_now();
				gbml_boost_forest_predict_batch(&bm->forest, x, n, d, out, &env);
				if (gbml_now() - t0 < bestT)
					bestT = gbml_now() - t0;
			}
			for (int64_t i = 0; i < n; i++)
				check += out[i];
			for (int64_t r = 0; r < repeat; r++)
			{
				double		s = 0;

				t0 = gbml_now();
				for (int64_t i = 0; i < n; i++)
				{
					double		p;

					gbml_scorer_predict(&sc, &env, x + i * d, (int) d, GBML_OUT_SCORE, &p);
					s += p;
				}
				if (gbml_now() - t0 < best_single)
					best_single = gbml_now() - t0;
				if (fabs(s - check) > 1e-6 * (1 + fabs(check)))
					fprintf(stderr, "single-row and batch scores disagree: %.17g vs %.17g\n", s, check);
			}
		}
		if (classes < 2)
		{
			printf("RESULT score_batch_1thread_rows_per_s %.1f\n", n / best1);
			printf("RESULT score_batch_%dthreads_rows_per_s %.1f\n", threads, n / bestT);
			printf("RESULT score_single_1thread_rows_per_s %.1f\n", n / best_single);
			printf("RESULT score_checksum %.9g\n", check);
		}
		gbml_scorer_free(&sc, &env);
		gbml_free(&env, model);
		free(out);
	}
	free(x);
	free(y);
	free(tree_times);
	return 0;
}
