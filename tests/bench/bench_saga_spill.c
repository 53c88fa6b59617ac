/*
 * bench_saga_spill.c — SAGA from rows in memory against the same rows in
 * temporary files (issue 12): the seconds per epoch of each, the spilled
 * time over the in-memory time, and whether the two models' bytes agree.
 *
 * Rows come from a CSV (header, label first, then features) or are drawn
 * here (features uniform in [-1, 1], labels from a logistic model with
 * noise).  The stored copy streams to plain temporary files (the unit
 * env's) from its first chunk, and its rows are appended in reverse order:
 * the canonical order must still give the in-memory model's bytes.  Each
 * training runs --repeat times; the best is printed, one line a mode:
 * wall seconds of the whole driver call (canonical order included: for
 * rows in files a reorder of the file), the trainer's stats / solver /
 * objective seconds, epochs, solver seconds per epoch, the engine's peak
 * memory, the objective, and an FNV-1a hash of the SAGA section.
 *
 *   make -s -f tests/bench/bench.mk tests/bench/bin/bench_saga_spill
 *   tests/bench/bin/bench_saga_spill [--csv F | --rows N --features D] [--chunk-rows R]
 *       [--threads T] [--repeat K] [--mode memory|file|both] [--memory-limit-mb M] [key=value ...]
 *
 * --memory-limit-mb sets the engine's budget (the in-memory copy needs
 * room for every row; the copy in files only for the per-row state, the
 * readers' buffers and the reorder's window).
 */
#include "algorithm.h"
#include "bench_util.h"
#include "chunk_store_file.h"
#include "rng.h"
#include "saga.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct options
{
	const char *csv;
	int64_t		rows;
	int			features;
	int64_t		chunk_rows;
	int			threads;
	int			repeat;
	double		memory_limit_mb;	/* the env's budget (0: none) */
	const char *mode;
	gbml_param_value values[32];
	int			n_values;
} options;

/* Row i of the synthetic set (the same for both copies whatever the append order). */
static float
synthetic_row(int64_t i, int d, float *x)
{
	gbml_rng	rng;
	double		z = 0.2;

	gbml_rng_stream(&rng, 0x5a6a, (uint64_t) i);
	for (int j = 0; j < d; j++)
	{
		x[j] = (float) (2.0 * gbml_rng_uniform(&rng) - 1.0);
		if (j < 10)
			z += (j % 2 ? -0.7 : 0.9) * x[j];
	}
	return gbml_rng_uniform(&rng) < 1.0 / (1.0 + exp(-3.0 * z)) ? 1.0f : 0.0f;
}

static int
fill_synthetic(gbml_dataset *ds, gbml_env *env, const options *o, bool reverse)
{
	float	   *x = malloc(sizeof(float) * (size_t) o->features);
	int			rc = GBML_OK;

	for (int64_t k = 0; k < o->rows && rc == GBML_OK; k++)
	{
		gbml_row	row = {.x = x,.n_features = o->features,.group_is_null = true,.weight_is_null = true};

		row.label = synthetic_row(reverse ? o->rows - 1 - k : k, o->features, x);
		rc = gbml_dataset_append(ds, env, &row, true);
	}
	free(x);
	return rc;
}

/* The rows of a host dataset appended to another, last row first. */
static int
append_reversed(gbml_dataset *dst, const gbml_dataset *src, gbml_env *env)
{
	for (int c = src->n_chunks - 1; c >= 0; c--)
		for (int64_t r = src->chunks[c]->n_rows - 1; r >= 0; r--)
		{
			gbml_row	row = {.x = gbml_dataset_row(src, c, r),.n_features = src->n_features,
				.label = src->chunks[c]->label[r],.group_is_null = true,.weight_is_null = true};
			int			rc = gbml_dataset_append(dst, env, &row, true);

			if (rc != GBML_OK)
				return rc;
		}
	return GBML_OK;
}


static uint64_t
section_hash(gbml_env *env, const uint8_t *model, size_t len)
{
	gbml_model_reader r;
	const uint8_t *data;
	size_t		dlen;

	if (gbml_model_open(&r, env, model, len) != GBML_OK || !gbml_model_find(&r, GBML_SAGA_SECTION, &data, &dlen))
		return 0;
	return bu_fnv1a(data, dlen);
}

static double
json_number(const char *text, const char *key)
{
	char		pat[64];
	const char *at;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	at = text ? strstr(text, pat) : NULL;
	return at ? strtod(at + strlen(pat), NULL) : NAN;
}


/* The dataset of one mode: in memory, or streamed to files from the first chunk. */
static int
build(gbml_dataset *ds, gbml_env *env, const options *o, const gbml_dataset *csv_rows, bool to_files)
{
	gbml_dataset_init(ds, false);
	if (o->chunk_rows > 0)
		ds->chunk_rows = o->chunk_rows;
	if (to_files)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	ds->spill_by_hash = true;	/* as gbml_plan_spill sets it for SAGA */
	if (csv_rows)
		return append_reversed(ds, csv_rows, env);
	return fill_synthetic(ds, env, o, to_files);
}

/* Trains --repeat times on one mode's rows; prints the best; returns the SAGA section's hash. */
static uint64_t
run_mode(const options *o, const gbml_dataset *csv_rows, bool to_files)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_parsed_params pp;
	double		best = 1e300;
	char	   *meta = NULL,
			   *report_text = NULL;
	uint64_t	hash = 0;

	gbml_env_init_malloc(&env, o->threads);
	env.memory_limit = (size_t) (o->memory_limit_mb * 1048576.0);
	if (build(&ds, &env, o, csv_rows, to_files) != GBML_OK ||
		gbml_parse_training_params(&env, gbml_algorithm_by_name("saga"), o->values, o->n_values, &pp) != GBML_OK)
	{
		fprintf(stderr, "%s: %s\n", to_files ? "file" : "memory", env.error);
		exit(1);
	}
	for (int r = 0; r < o->repeat; r++)
	{
		uint8_t    *model;
		size_t		len;
		gbml_strbuf report;
		double		t = gbml_now();

		gbml_sb_init(&report, &env);
		if (gbml_train_report(&env, &pp, &ds, NULL, &model, &len, &report) != GBML_OK)
		{
			fprintf(stderr, "train (%s): %s\n", to_files ? "file" : "memory", env.error);
			exit(1);
		}
		t = gbml_now() - t;
		if (t < best)
		{
			best = t;
			free(meta);
			free(report_text);
			meta = bu_meta_text(&env, model, len);
			report_text = strdup(report.data ? report.data : "");
			hash = section_hash(&env, model, len);
		}
		gbml_sb_free(&report);
		gbml_free(&env, model);
	}
	{
		double		epochs = json_number(meta, "epochs"),
					solver = json_number(report_text, "solver_seconds");

		printf("{\"mode\":\"%s\",\"rows\":%lld,\"features\":%d,\"chunks\":%d,\"threads\":%d,\"seconds\":%.4f,"
			   "\"stats_seconds\":%.4f,\"solver_seconds\":%.4f,\"objective_seconds\":%.4f,\"epochs\":%.0f,"
			   "\"solver_seconds_per_epoch\":%.5f,\"peak_memory_mb\":%.1f,\"objective\":%.15g,\"stop\":\"%s\","
			   "\"section_fnv\":\"%016llx\"}\n",
			   to_files ? "file" : "memory", (long long) ds.n_rows, ds.n_features, ds.n_chunks, o->threads, best,
			   json_number(report_text, "stats_seconds"), solver, json_number(report_text, "objective_seconds"),
			   epochs, solver / epochs, json_number(report_text, "peak_memory_mb"), json_number(meta, "objective"),
			   meta && strstr(meta, "\"stop_reason\":\"tol\"") ? "tol" : "max_iter", (unsigned long long) hash);
		fflush(stdout);
	}
	free(meta);
	free(report_text);
	gbml_parsed_params_free(&env, &pp);
	gbml_dataset_free(&ds, &env);
	return hash;
}

static void
parse(int argc, char **argv, options *o)
{
	memset(o, 0, sizeof(*o));
	o->rows = 500000;
	o->features = 100;
	o->threads = 2;
	o->repeat = 1;
	o->mode = "both";
	for (int i = 1; i < argc; i++)
	{
		const char *a = argv[i];
		bool		more = i + 1 < argc;

		if (strcmp(a, "--csv") == 0 && more)
			o->csv = argv[++i];
		else if (strcmp(a, "--rows") == 0 && more)
			o->rows = atoll(argv[++i]);
		else if (strcmp(a, "--features") == 0 && more)
			o->features = atoi(argv[++i]);
		else if (strcmp(a, "--chunk-rows") == 0 && more)
			o->chunk_rows = atoll(argv[++i]);
		else if (strcmp(a, "--threads") == 0 && more)
			o->threads = atoi(argv[++i]);
		else if (strcmp(a, "--repeat") == 0 && more)
			o->repeat = atoi(argv[++i]);
		else if (strcmp(a, "--mode") == 0 && more)
			o->mode = argv[++i];
		else if (strcmp(a, "--memory-limit-mb") == 0 && more)
			o->memory_limit_mb = atof(argv[++i]);
		else if (o->n_values >= 32 || !bu_param(argv[i], &o->values[o->n_values++]))
			exit(2);
	}
}

int
main(int argc, char **argv)
{
	options		o;
	gbml_env	env;
	gbml_dataset csv_rows;
	bool		memory,
				file;
	uint64_t	h_memory = 0,
				h_file = 0;

	parse(argc, argv, &o);
	memory = strcmp(o.mode, "file") != 0;
	file = strcmp(o.mode, "memory") != 0;
	gbml_env_init_malloc(&env, o.threads);
	gbml_dataset_init(&csv_rows, false);
	if (o.csv && bu_load_csv(o.csv, &csv_rows, &env, -1, 0, 1) != 0)
		return 1;
	if (memory)
		h_memory = run_mode(&o, o.csv ? &csv_rows : NULL, false);
	if (file)
		h_file = run_mode(&o, o.csv ? &csv_rows : NULL, true);
	if (memory && file)
		printf("{\"same_model_bytes\":%s}\n", h_memory == h_file ? "true" : "false");
	gbml_dataset_free(&csv_rows, &env);
	return memory && file && h_memory != h_file ? 1 : 0;
}
