/*
 * bench_boost_spill.c — a boosting fit from rows in host memory against the
 * same fit from rows in temporary files (issue 12): synthetic rows made
 * here (deterministic in the seed), appended to a dataset that keeps them
 * (--where mem) or streams them to files (--where file), then one training.
 * Prints "RESULT key value" lines: load and fit seconds, engine peak
 * memory while loading and over the fit (the dataset as held included;
 * and per phase), the size of the bins, and a hash of the model bytes,
 * which must be the same for both residences; then "REPORT {json}", the
 * train report (quantize and boost seconds among its timings).
 *
 *   make -s -f tests/bench/bench.mk tests/bench/bin/bench_boost_spill
 *   tests/bench/bin/bench_boost_spill --rows 1000000 --features 100 --where file
 */
#include "algorithm.h"
#include "bench_util.h"
#include "chunk_store_file.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct options
{
	int64_t		rows;
	int			features;
	int			threads;
	int64_t		trees;
	int64_t		depth;
	const char *loss;
	const char *where;
	double		eval_fraction;
	double		memory_limit_mb;
} options;

/*
 * Engine peak memory per phase of the fit, from the progress callback: the
 * phase up to the first "quantize" report (canonical order, eval split,
 * borders, the first chunk binned), the bins read from the files
 * ("quantize"; rows in memory have no such report), and the trees
 * ("train", from the first tree's report: the training state is counted
 * where it was allocated, with the bins).  A new phase starts its own peak
 * from the memory held then.
 */
typedef struct phase_peaks
{
	gbml_env   *env;
	char		phase[32];
	size_t		peak[3];		/* prepare, quantize, train */
} phase_peaks;

static int
phase_index(const char *phase)
{
	return strcmp(phase, "quantize") == 0 ? 1 : strcmp(phase, "train") == 0 ? 2 : 0;
}

static bool
track_phase(void *ctx, const gbml_progress_info *info)
{
	phase_peaks *pp = ctx;
	int			now = phase_index(info->phase);

	if (strcmp(pp->phase, info->phase) != 0 && now > phase_index(pp->phase))
	{
		pp->peak[phase_index(pp->phase)] = pp->env->memory_peak;
		pp->env->memory_peak = pp->env->memory_used;
		snprintf(pp->phase, sizeof(pp->phase), "%s", info->phase);
	}
	return false;
}

/* Appends the rows: labels from the first features, query groups of ~20 rows in random order. */
static int
load(gbml_dataset *ds, gbml_env *env, const options *o)
{
	gbml_rng	rng;
	float	   *x = malloc(sizeof(float) * (size_t) o->features);
	bool		ranking = strcmp(o->loss, "RMSE") != 0 && strcmp(o->loss, "Logloss") != 0;
	int			rc = GBML_OK;

	gbml_dataset_init(ds, true);
	if (strcmp(o->where, "file") == 0)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	gbml_rng_seed(&rng, 12);
	for (int64_t i = 0; i < o->rows && rc == GBML_OK; i++)
	{
		gbml_row	row;
		double		y;

		for (int j = 0; j < o->features; j++)
			x[j] = (float) gbml_rng_uniform(&rng);
		y = 3.0 * (x[0] > 0.5f) + 2.0 * x[1] * x[1] + x[2] * x[3] + 0.3 * gbml_rng_uniform(&rng);
		memset(&row, 0, sizeof(row));
		row.x = x;
		row.n_features = o->features;
		row.label = ranking ? (float) floor(y) : strcmp(o->loss, "Logloss") == 0 ? (float) (y > 2.5) : (float) y;
		row.group = (int64_t) (gbml_rng_next(&rng) % (uint64_t) (o->rows / 20 + 1));
		row.group_is_null = !ranking;
		row.weight_is_null = true;
		rc = gbml_dataset_append(ds, env, &row, true);
	}
	free(x);
	gbml_dataset_finish_appends(ds, env);
	return rc;
}

static int
train(gbml_env *env, gbml_dataset *ds, const options *o, uint8_t **model, size_t *len, gbml_strbuf *report)
{
	gbml_parsed_params pp;
	gbml_param_value v[] = {
		{.key = "iterations",.kind = GBML_VALUE_NUMBER,.number = (double) o->trees},
		{.key = "depth",.kind = GBML_VALUE_NUMBER,.number = (double) o->depth},
		{.key = "loss",.kind = GBML_VALUE_STRING,.string = o->loss},
		{.key = "eval_fraction",.kind = GBML_VALUE_NUMBER,.number = o->eval_fraction},
	};
	int			rc = gbml_parse_training_params(env, gbml_algorithm_by_name("boost"), v, 4, &pp);

	if (rc == GBML_OK)
		rc = gbml_train_report(env, &pp, ds, NULL, model, len, report);
	gbml_parsed_params_free(env, &pp);
	return rc;
}


static bool
parse(int argc, char **argv, options *o)
{
	for (int i = 1; i + 1 < argc; i += 2)
	{
		const char *k = argv[i],
				   *v = argv[i + 1];

		if (strcmp(k, "--rows") == 0)
			o->rows = atoll(v);
		else if (strcmp(k, "--features") == 0)
			o->features = atoi(v);
		else if (strcmp(k, "--threads") == 0)
			o->threads = atoi(v);
		else if (strcmp(k, "--trees") == 0)
			o->trees = atoll(v);
		else if (strcmp(k, "--depth") == 0)
			o->depth = atoll(v);
		else if (strcmp(k, "--loss") == 0)
			o->loss = v;
		else if (strcmp(k, "--where") == 0)
			o->where = v;
		else if (strcmp(k, "--eval-fraction") == 0)
			o->eval_fraction = atof(v);
		else if (strcmp(k, "--memory-limit-mb") == 0)
			o->memory_limit_mb = atof(v);
		else
			return false;
	}
	return o->rows > 0 && o->features > 0 && o->threads > 0 &&
		(strcmp(o->where, "mem") == 0 || strcmp(o->where, "file") == 0);
}

int
main(int argc, char **argv)
{
	options		o = {1000000, 100, 2, 100, 6, "RMSE", "mem", 0, 0};
	phase_peaks pp = {0};
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len = 0;
	gbml_strbuf report;
	double		t0,
				t_load;
	size_t		held,
				peak_load,
				peak_fit = 0;
	int			rc;

	if (!parse(argc, argv, &o))
	{
		fprintf(stderr, "usage: bench_boost_spill [--rows 1000000 --features 100 --threads 2 --trees 100 "
				"--depth 6 --loss RMSE|Logloss|YetiRank|PairLogit --where mem|file --eval-fraction 0 "
				"--memory-limit-mb 0]\n");
		return 2;
	}
	gbml_env_init_malloc(&env, o.threads);
	env.memory_limit = (size_t) (o.memory_limit_mb * 1048576.0);
	pp.env = &env;
	env.progress_fn = track_phase;
	env.progress_ctx = &pp;
	t0 = gbml_now();
	if ((rc = load(&ds, &env, &o)) != GBML_OK)
	{
		fprintf(stderr, "load: %s\n", env.error);
		return 1;
	}
	t_load = gbml_now() - t0;
	held = env.memory_used;
	peak_load = env.memory_peak;
	env.memory_peak = env.memory_used;
	gbml_sb_init(&report, &env);
	t0 = gbml_now();
	rc = train(&env, &ds, &o, &model, &len, &report);
	if (rc != GBML_OK)
	{
		fprintf(stderr, "train: %s\n", env.error);
		return 1;
	}
	printf("RESULT where %s\n", o.where);
	printf("RESULT load_seconds %.3f\n", t_load);
	printf("RESULT fit_seconds %.3f\n", gbml_now() - t0);
	printf("RESULT held_after_load_mb %.1f\n", held / 1048576.0);
	printf("RESULT peak_load_mb %.1f\n", peak_load / 1048576.0);
	pp.peak[phase_index(pp.phase)] = env.memory_peak;
	for (int i = 0; i < 3; i++)
		peak_fit = pp.peak[i] > peak_fit ? pp.peak[i] : peak_fit;
	printf("RESULT peak_fit_mb %.1f\n", peak_fit / 1048576.0);
	printf("RESULT peak_prepare_mb %.1f\n", pp.peak[0] / 1048576.0);
	printf("RESULT peak_quantize_mb %.1f\n", pp.peak[1] / 1048576.0);
	printf("RESULT peak_train_mb %.1f\n", pp.peak[2] / 1048576.0);
	printf("RESULT bins_mb %.1f\n", (double) o.rows * o.features / 1048576.0);
	printf("RESULT model_hash %016llx\n", (unsigned long long) bu_fnv1a(model, len));
	printf("REPORT %.*s\n", (int) report.len, report.data);
	gbml_sb_free(&report);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	return env.memory_used == 0 ? 0 : 1;
}
