/*
 * algorithm.c — the registry of model kinds and the shared driver around
 * them: common parameters, canonical row order, eval split, the container's
 * common sections, scoring checks and model introspection.
 *
 * Algorithms are referenced through weak symbols so that a model kind whose
 * source is not (yet) in the build simply does not exist, and the engine
 * still links — the unit-test binary and the extension share this file.
 */
#include "algorithm.h"
#include "chunk_store_file.h"
#include "backend.h"
#include "schema.h"
#include "shard_link.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

extern const gbml_algorithm gbml_algorithm_mean __attribute__((weak));
extern const gbml_algorithm gbml_algorithm_boost __attribute__((weak));
extern const gbml_algorithm gbml_algorithm_kmeans __attribute__((weak));
extern const gbml_algorithm gbml_algorithm_saga __attribute__((weak));

static const gbml_algorithm *
algorithm_at(int i)
{
	switch (i)
	{
		case 0:
			return &gbml_algorithm_boost;
		case 1:
			return &gbml_algorithm_kmeans;
		case 2:
			return &gbml_algorithm_saga;
		case 3:
			return &gbml_algorithm_mean;
		default:
			return NULL;
	}
}

#define N_ALGORITHMS 4

const gbml_algorithm *
gbml_algorithm_by_name(const char *name)
{
	for (int i = 0; i < N_ALGORITHMS; i++)
	{
		const gbml_algorithm *a = algorithm_at(i);

		if (a && strcmp(a->name, name) == 0)
			return a;
	}
	return NULL;
}

const gbml_algorithm *
gbml_algorithm_by_id(int id)
{
	for (int i = 0; i < N_ALGORITHMS; i++)
	{
		const gbml_algorithm *a = algorithm_at(i);

		if (a && (int) a->id == id)
			return a;
	}
	return NULL;
}

/* ---- common parameters ---- */

static const char *const device_choices[] = {"auto", "cpu", "gpu", "hybrid", NULL};
static const char *const deploy_choices[] = {"always", "if_better", "never", NULL};

#define CP(field) offsetof(gbml_common_params, field)
const gbml_param_spec gbml_common_param_specs[] = {
	{"device", GBML_PARAM_ENUM, CP(device), 0, 0, 0, NULL, device_choices,
	"where to train: auto (a real GPU when the data is big enough, else CPU), cpu, gpu, or hybrid (K-Means: the GPU and the CPU threads share each iteration; other trainers: gpu); default: the gbml.device setting"},
	{"threads", GBML_PARAM_INT, CP(threads), 0, 1024, 0, NULL, NULL,
	"CPU threads for training, used as given; 0 = the gbml.threads setting, of which boosting's trees take one "
	"per 131,072 bins of their rows (rows x features), so small trainings do not wait on busy cores"},
	{"gpu_id", GBML_PARAM_INT, CP(gpu_id), 0, 1023, 0, NULL, NULL,
	"GPU to use; default: the gbml.gpu_id setting"},
	{"memory_limit_mb", GBML_PARAM_REAL, CP(memory_limit_mb), 0, 1e9, 0, NULL, NULL,
	"memory budget for this training in MB; 0 = the gbml.memory_limit setting"},
	{"gpu_memory_limit_mb", GBML_PARAM_REAL, CP(gpu_memory_limit_mb), 0, 1e9, 0, NULL, NULL,
	"GPU memory budget for this training in MB; 0 = the gbml.gpu_memory_limit setting"},
	{"eval_fraction", GBML_PARAM_REAL, CP(eval_fraction), 0, 0.9, 0, NULL, NULL,
	"share of groups (or rows, by their contents) held out as the eval set; 0 = none"},
	{"deploy", GBML_PARAM_ENUM, CP(deploy), 0, 0, 0, NULL, deploy_choices,
	"gbml.train: deploy the new version always, if_better (eval metric) or never"},
	{"eval_source", GBML_PARAM_STRING, CP(eval_source), 0, 0, 0, NULL, NULL,
	"gbml.train: table or query giving the eval set (same columns as source)"},
	{"features_column", GBML_PARAM_STRING, CP(features_column), 0, 0, 0, "features", NULL,
	"gbml.train: column holding the real[] features"},
	{"label_column", GBML_PARAM_STRING, CP(label_column), 0, 0, 0, "label", NULL,
	"gbml.train: column holding the label (if the algorithm uses one)"},
	{"group_column", GBML_PARAM_STRING, CP(group_column), 0, 0, 0, "group_id", NULL,
	"gbml.train: column holding the query/group id (used when present)"},
	{"weight_column", GBML_PARAM_STRING, CP(weight_column), 0, 0, 0, "weight", NULL,
	"gbml.train: column holding the row weight (used when present)"},
	{"feature_columns", GBML_PARAM_NAMES, CP(feature_columns), 0, 0, 0, NULL, NULL,
	"gbml.train and the row aggregates, without a features array: exactly these columns are the features, in this order; default: every column but the label, group, weight and excluded ones"},
	{"exclude_columns", GBML_PARAM_NAMES, CP(exclude_columns), 0, 0, 0, NULL, NULL,
	"columns that are not features (ids, timestamps) when features come from the columns"},
	{"categorical_columns", GBML_PARAM_NAMES, CP(categorical_columns), 0, 0, 0, NULL, NULL,
	"columns taken as categorical whatever their type (text, varchar and enum columns always are); each must be a feature column"},
	GBML_PARAM_END
};
#undef CP

/*
 * Whether a common parameter is recorded in the model.  Where and how a
 * model was trained (device, threads, GPU, memory budget) must not change
 * its bytes, so those keys stay out of the 'PRMS' section.
 */
static bool
recorded_in_model(const gbml_param_spec *s)
{
	return s->offset != offsetof(gbml_common_params, device) &&
		s->offset != offsetof(gbml_common_params, threads) &&
		s->offset != offsetof(gbml_common_params, gpu_id) &&
		s->offset != offsetof(gbml_common_params, memory_limit_mb) &&
		s->offset != offsetof(gbml_common_params, gpu_memory_limit_mb) &&
		/* which columns became features is the model's 'SCHM' section */
		s->type != GBML_PARAM_NAMES;
}

int
gbml_parse_training_params(gbml_env *env, const gbml_algorithm *algo,
						   const gbml_param_value *values, int n_values,
						   gbml_parsed_params *out)
{
	const gbml_param_spec *tables[3] = {gbml_common_param_specs, algo->params, NULL};
	void	   *outs[2];
	int			rc;

	memset(out, 0, sizeof(*out));
	out->algo = algo;
	out->algo_params = gbml_alloc0(env, algo->params_size ? algo->params_size : 1);
	if (out->algo_params == NULL)
		return env->error_code;
	outs[0] = &out->common;
	outs[1] = out->algo_params;
	rc = gbml_params_parse(env, algo->name, tables, outs, values, n_values);
	if (rc != GBML_OK)
		return rc;
	for (int i = 0; i < n_values; i++)
	{
		const char *k = values[i].key;

		if (values[i].kind == GBML_VALUE_NULL)
			continue;
		if (strcmp(k, "device") == 0)
			out->common.device_given = true;
		else if (strcmp(k, "threads") == 0)
			out->common.threads_given = out->common.threads > 0;
		else if (strcmp(k, "memory_limit_mb") == 0)
			out->common.memory_limit_given = out->common.memory_limit_mb > 0;
		else if (strcmp(k, "gpu_id") == 0)
			out->common.gpu_id_given = true;
		else if (strcmp(k, "gpu_memory_limit_mb") == 0)
			out->common.gpu_memory_limit_given = out->common.gpu_memory_limit_mb > 0;
	}
	return GBML_OK;
}

void
gbml_parsed_params_free(gbml_env *env, gbml_parsed_params *p)
{
	const gbml_param_spec *tables[3] = {gbml_common_param_specs, p->algo ? p->algo->params : NULL, NULL};
	void	   *outs[2] = {&p->common, p->algo_params};

	if (p->algo_params == NULL)
		tables[1] = NULL;
	gbml_params_free(env, tables, outs);
	gbml_free(env, p->algo_params);
	p->algo_params = NULL;
}

int
gbml_train_values(gbml_env *env, const char *algorithm, const gbml_param_value *values, int n_values,
				  gbml_dataset *ds, gbml_dataset *eval, uint8_t **model, size_t *model_len)
{
	const gbml_algorithm *algo = gbml_algorithm_by_name(algorithm);
	gbml_parsed_params pp;
	int			rc;

	if (algo == NULL)
		return gbml_error(env, GBML_EINVAL, "unknown algorithm \"%s\"", algorithm);
	rc = gbml_parse_training_params(env, algo, values, n_values, &pp);
	if (rc == GBML_OK)
		rc = gbml_train(env, &pp, ds, eval, model, model_len);
	gbml_parsed_params_free(env, &pp);
	return rc;
}

unsigned
gbml_input_flags(const gbml_parsed_params *p)
{
	if (p->algo->input_flags_fn)
		return p->algo->input_flags_fn(p->algo_params);
	return p->algo->input_flags;
}

/* ---- training driver ---- */

/* Index just past the JSON value starting at meta[i] ('{' or '['); 0 if unbalanced. */
static size_t
json_value_end(const char *text, size_t len, size_t i)
{
	int			depth = 0;
	bool		in_string = false;

	for (; i < len; i++)
	{
		char		c = text[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		}
		else if (c == '"')
			in_string = true;
		else if (c == '{' || c == '[')
			depth++;
		else if ((c == '}' || c == ']') && --depth == 0)
			return i + 1;
	}
	return 0;
}

/*
 * Moves the top-level member "timings":{...} of a META members text
 * (`"a":1,"timings":{...},"b":2`) into `timings`: run-dependent figures live
 * in the report, not in the deterministic model bytes.
 */
static void
move_timings(gbml_strbuf *meta, gbml_strbuf *timings)
{
	static const char key[] = "\"timings\":{";
	size_t		keylen = sizeof(key) - 1;
	int			depth = 0;
	bool		in_string = false;

	for (size_t i = 0; i < meta->len; i++)
	{
		char		c = meta->data[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
			continue;
		}
		if (depth == 0 && c == '"' && meta->len - i >= keylen &&
			memcmp(meta->data + i, key, keylen) == 0)
		{
			size_t		obj = i + keylen - 1;
			size_t		end = json_value_end(meta->data, meta->len, obj);
			size_t		from = i,
						to = end;

			if (end == 0)
				return;
			gbml_sb_append(timings, meta->data + obj, end - obj);
			if (to < meta->len && meta->data[to] == ',')
				to++;
			else if (from > 0 && meta->data[from - 1] == ',')
				from--;
			memmove(meta->data + from, meta->data + to, meta->len - to);
			meta->len -= to - from;
			meta->data[meta->len] = '\0';
			return;
		}
		if (c == '"')
			in_string = true;
		else if (c == '{' || c == '[')
			depth++;
		else if (c == '}' || c == ']')
			depth--;
	}
}

int
gbml_train(gbml_env *env, const gbml_parsed_params *params,
		   gbml_dataset *ds, gbml_dataset *eval,
		   uint8_t **model, size_t *model_len)
{
	return gbml_train_report(env, params, ds, eval, model, model_len, NULL);
}

void
gbml_plan_chunk_bytes(const gbml_env *env, gbml_dataset *ds)
{
	/*
	 * Out of core a training holds about three chunks of features (the one
	 * being filled or written, and the reader's two), so small budgets get
	 * small chunks.  No trainer's result depends on the chunk layout on the
	 * CPU, nor boosting's on the GPU (its sums are exact).
	 */
	if (env->memory_limit > 0)
		ds->chunk_bytes = env->memory_limit / 16 > 65536 ? env->memory_limit / 16 : 65536;
}

void
gbml_plan_spill(const gbml_algorithm *algo, const gbml_env *env, gbml_dataset *ds)
{
	int64_t		budget_values = (int64_t) (env->memory_limit / sizeof(float));
	int64_t		from;

	if (!algo->reads_spilled_rows || env->temp_create == NULL || ds->store_open != NULL)
		return;
	if (algo->quantizes_rows)
	{
		from = GBML_SPILL_QUANTIZED_VALUES;
		if (env->memory_limit > 0 && budget_values / 4 < from)
			from = budget_values / 4;
	}
	else if (env->memory_limit > 0)
		from = budget_values / 2;
	else
		return;
	gbml_plan_chunk_bytes(env, ds);
	ds->reorder_window_quarter = algo->quantizes_rows;
	/* rows read as written (boosting's map, K-Means' ranks) must stay in arrival order */
	ds->spill_by_hash = !algo->quantizes_rows && !algo->passes_in_any_order;
	gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, from, false);
}

int
gbml_plan_spill_after(gbml_env *env, gbml_dataset *ds, int n_features, const char *what)
{
	size_t		free_bytes;
	size_t		chunk;

	if (ds->store_open == NULL || env->memory_limit == 0)
		return GBML_OK;
	free_bytes = env->memory_limit > env->memory_used ? env->memory_limit - env->memory_used : 0;
	if ((int64_t) (free_bytes / 2 / sizeof(float)) < ds->stream_from)
		ds->stream_from = (int64_t) (free_bytes / 2 / sizeof(float));
	/*
	 * The first chunk fills in memory whatever the threshold, growing by
	 * doubling: with the rows' width known, what its last doubling holds
	 * (narrow rows' label, group and weight outweigh their features: the
	 * chunk's feature bytes alone passed 3 MB here, then its growth failed)
	 */
	chunk = n_features > 0 ? gbml_dataset_first_chunk_peak_bytes(ds, n_features)
		: ds->chunk_bytes > 0 ? ds->chunk_bytes : (size_t) 64 << 20;
	return gbml_budget_check(env, chunk, "%s: a chunk of its rows", what);
}

/*
 * "spilled_rows", "temp_written_mb", "temp_read_mb": what went through
 * temporary files (the training set's, the eval set's and the trainer's
 * own), zeros when nothing did; "temp_discarded_mb": what a reorder gave
 * back as it read rows for the last time; "temp_reorders_in_place": how
 * many reorders rewrote the rows over their own places in the file.  eval_split: eval was split from ds.
 */
static void
report_spill(gbml_strbuf *report, const gbml_env *env, const gbml_dataset *ds, const gbml_dataset *eval,
			 bool eval_split)
{
	gbml_spill_stats total = {0},
				one;
	const gbml_dataset *sets[2] = {ds, eval};

	total.bytes_written = env->trainer_temp_written;
	total.bytes_read = env->trainer_temp_read;

	for (int i = 0; i < 2; i++)
		if (sets[i] && gbml_chunk_store_file_stats(sets[i]->store, &one))
		{
			/* rows held out of a spilled training set were counted when it spilled */
			if (i == 0 || !eval_split)
				total.rows_spilled += one.rows_spilled;
			total.bytes_written += one.bytes_written;
			total.bytes_read += one.bytes_read;
			total.bytes_discarded += one.bytes_discarded;
			total.reorders_in_place += one.reorders_in_place;
		}
	/* rows only the trainer's files held (one-hot encoded rows past the budget) spilled too */
	if (env->trainer_temp_rows > total.rows_spilled)
		total.rows_spilled = env->trainer_temp_rows;
	gbml_sb_printf(report, "\"spilled_rows\":%lld,\"temp_written_mb\":%.1f,\"temp_read_mb\":%.1f,"
				   "\"temp_discarded_mb\":%.1f,\"temp_reorders_in_place\":%d,",
				   (long long) total.rows_spilled, (double) total.bytes_written / 1048576.0,
				   (double) total.bytes_read / 1048576.0, (double) total.bytes_discarded / 1048576.0,
				   total.reorders_in_place);
}

/* The algorithm's params that go into a model trained on ds (algo->records_param), END-terminated. */
static gbml_param_spec *
recorded_params(const gbml_algorithm *algo, const void *algo_params, const gbml_dataset *ds, gbml_env *env)
{
	int			n = 0,
				k = 0;
	gbml_param_spec *out;

	while (algo->params[n].name)
		n++;
	if ((out = gbml_alloc0(env, sizeof(gbml_param_spec) * ((size_t) n + 1))) == NULL)
		return NULL;
	for (int i = 0; i < n; i++)
		if (algo->records_param(&algo->params[i], algo_params, ds))
			out[k++] = algo->params[i];
	return out;
}

/* Whether some row weighs more than 0 (the weights stay on the host, spilled or streamed rows too). */
static bool
some_weight_positive(const gbml_dataset *ds)
{
	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++)
			if (ds->chunks[c]->weight[r] > 0)
				return true;
	return false;
}

/*
 * What no trainer can take: no rows, or none that weighs anything, rows on
 * servers the algorithm cannot reach, categories it does not handle.
 */
static int
check_training_input(gbml_env *env, const gbml_parsed_params *params, const gbml_dataset *ds,
					 const gbml_dataset *eval)
{
	const gbml_algorithm *algo = params->algo;

	if (ds->n_rows == 0)
		return gbml_error(env, GBML_EINVAL, "%s: no input rows", algo->name);
	/* (rows on other servers: each shard's part may weigh nothing; the union is not summed here) */
	if (ds->has_weight && !ds->shards && !some_weight_positive(ds))
		return gbml_error(env, GBML_EINVAL, "%s: every row's weight is 0: there is nothing to learn from",
						  algo->name);
	if (ds->shards && algo->shard == NULL)
		return gbml_error(env, GBML_EUNSUPPORTED, "%s cannot train on rows held by other servers yet (boost, kmeans and saga can)",
						  algo->name);
	if (ds->shards && eval && eval->n_rows > 0 && !algo->shard->takes_eval_source)
		return gbml_error(env, GBML_EUNSUPPORTED, "%s: an eval set of its own (eval_source) is not supported when "
						  "the rows are on other servers (boost takes one)", algo->name);
	if (ds->shards && !eval && params->common.eval_fraction > 0 && !algo->shard->takes_eval_split)
		return gbml_error(env, GBML_EUNSUPPORTED, "%s: an eval set (eval_fraction) is not supported when the rows "
						  "are on other servers (boost takes one)", algo->name);
	if (!algo->categorical_features)
		for (int j = 0; ds->schema && j < ds->schema->n_features; j++)
			if (gbml_feature_is_categorical(ds->schema, j))
				return gbml_error(env, GBML_EINVAL, "%s does not take categorical features, but column \"%s\" (%s) is one",
								  algo->name, ds->schema->features[j].name, ds->schema->features[j].source_type);
	return GBML_OK;
}

/* The device this training runs on (a NOTICE when it is not the one asked for), its counters zeroed. */
static void
settle_device(gbml_env *env, const gbml_parsed_params *params)
{
	const gbml_algorithm *algo = params->algo;

	env->device_note[0] = '\0';
	if (env->device == GBML_DEVICE_HYBRID && !algo->hybrid_trains)
		env->device = GBML_DEVICE_GPU;	/* no hybrid mode: the GPU alone */
	if (env->device == GBML_DEVICE_GPU && !algo->gpu_trains)
	{
		env->device = GBML_DEVICE_CPU;
		snprintf(env->device_note, sizeof(env->device_note), "%s has no GPU trainer yet", algo->name);
		gbml_notice(env, env->device_auto ? GBML_LOG_DEBUG : GBML_LOG_NOTICE,
					"%s: training on the CPU: %s", algo->name, env->device_note);
	}
	env->gpu_memory_peak = env->gpu_h2d_bytes = env->gpu_wait_seconds = 0;
	env->trainer_temp_written = env->trainer_temp_read = env->trainer_temp_rows = 0;
}

/* The eval split's seed (every training's, so a shard splits as one server does). */
#define EVAL_SPLIT_SEED 0x6762

int
gbml_shard_split_eval(const gbml_parsed_params *params, gbml_dataset *ds, gbml_dataset *eval, bool *has_eval,
					  gbml_env *env)
{
	int			rc;

	*has_eval = false;
	gbml_dataset_init(eval, ds->allow_missing);
	if (params->common.eval_fraction <= 0 || ds->n_rows == 0)
		return GBML_OK;
	/*
	 * every row may be held out (a small partition): K-Means' and SAGA's
	 * coordinator gathers them, boosting's shard keeps them and scores them
	 * (its eval rows without training rows)
	 */
	if ((rc = gbml_dataset_split_eval(ds, eval, params->common.eval_fraction, EVAL_SPLIT_SEED, true, env)) != GBML_OK)
		return rc;
	gbml_dataset_finish_appends(eval, env);
	*has_eval = eval->n_rows > 0;
	return GBML_OK;
}

/*
 * The training rows and the eval rows (given, or split from the training
 * set into *split_eval: *own_eval) in canonical order; *eval is NULL when
 * there are none.
 */
static int
order_rows(gbml_env *env, const gbml_parsed_params *params, gbml_dataset *ds, gbml_dataset **eval,
		   gbml_dataset *split_eval, bool *own_eval)
{
	const gbml_algorithm *algo = params->algo;
	int			rc;

	gbml_dataset_finish_appends(ds, env);
	if (*eval)
		gbml_dataset_finish_appends(*eval, env);
	/* a quantizing trainer reads each stored row once, through a map: no rewrite of the files */
	ds->reorder_as_map = algo->quantizes_rows;
	if (*eval)
		(*eval)->reorder_as_map = algo->quantizes_rows;
	/* on the CPU, a trainer whose passes run in any order keeps stored rows as written (no eval split: it reorders) */
	ds->reorder_as_ranks = algo->passes_in_any_order && env->device == GBML_DEVICE_CPU &&
		params->common.eval_fraction <= 0;
	if (*eval && (*eval)->n_rows > 0)
		return (rc = gbml_dataset_canonicalize(ds, env)) != GBML_OK ? rc : gbml_dataset_canonicalize(*eval, env);
	*eval = NULL;
	/* (rows on shards: each shard splits its own, gbml_shard_split_eval) */
	if (params->common.eval_fraction <= 0 || ds->shards != NULL)
		return gbml_dataset_canonicalize(ds, env);
	if ((rc = gbml_dataset_canonicalize_split(ds, split_eval, params->common.eval_fraction, EVAL_SPLIT_SEED,
											  env)) != GBML_OK)
		return rc;
	gbml_dataset_finish_appends(split_eval, env);
	*own_eval = true;
	*eval = split_eval->n_rows > 0 ? split_eval : NULL;
	return GBML_OK;
}

/*
 * The sections every model starts with: its feature count, the schema of
 * its columns, and the params it was trained with (prms: the common ones
 * recorded in models, then the algorithm's; *recorded_algo, the latter's
 * table, freed by the caller).
 */
static void
write_leading_sections(gbml_model_writer *writer, const gbml_parsed_params *params, const gbml_dataset *ds,
					   gbml_strbuf *prms, gbml_param_spec **recorded_algo, gbml_env *env)
{
	const gbml_algorithm *algo = params->algo;
	gbml_param_spec recorded_common[sizeof(gbml_common_param_specs) / sizeof(gbml_common_param_specs[0])];
	const gbml_param_spec *tables[3] = {recorded_common, algo->params, NULL};
	int			n_recorded = 0;
	const void *structs[2] = {&params->common, params->algo_params};
	uint32_t	nfeat = (uint32_t) ds->n_features;
	bool		first = true;

	for (const gbml_param_spec *s = gbml_common_param_specs; s->name; s++)
		if (recorded_in_model(s))
			recorded_common[n_recorded++] = *s;
	memset(&recorded_common[n_recorded], 0, sizeof(gbml_param_spec));
	gbml_model_add_section(writer, GBML_SECTION_NFEATURES, &nfeat, 4);
	if (ds->schema)
	{
		gbml_strbuf schema;

		gbml_sb_init(&schema, env);
		gbml_schema_write(ds->schema, &schema);
		gbml_model_add_sb(writer, GBML_SECTION_SCHEMA, &schema);
		gbml_sb_free(&schema);
	}
	if (algo->records_param && (*recorded_algo = recorded_params(algo, params->algo_params, ds, env)) != NULL)
		tables[1] = *recorded_algo;
	else if (algo->records_param)
		prms->failed = true;	/* out of memory: the container reports it */
	gbml_sb_append(prms, "{", 1);
	gbml_params_to_json(prms, tables, structs, &first);
	gbml_sb_append(prms, "}", 1);
	gbml_model_add_sb(writer, GBML_SECTION_PARAMS, prms);
}

/* gbml.last_training_report()'s JSON: the device, times, memory, temporary files, the trainer's timings. */
static void
write_run_report(gbml_strbuf *report, const gbml_env *env, const gbml_dataset *ds, const gbml_dataset *eval,
				 bool own_eval, double t0, double t_prep, const gbml_strbuf *timings)
{
	gbml_sb_printf(report, "{\"device\":\"%s\",", env->device == GBML_DEVICE_HYBRID ? "hybrid" :
				   env->device == GBML_DEVICE_GPU ? "gpu" : "cpu");
	if ((env->device == GBML_DEVICE_GPU || env->device == GBML_DEVICE_HYBRID) && env->gpu)
		gbml_sb_printf(report, "\"gpu_backend\":\"%s\",\"gpu_id\":%d,\"gpu_peak_memory_mb\":%.1f,"
					   "\"gpu_h2d_mb\":%.1f,\"gpu_wait_seconds\":%.6f,",
					   env->gpu->name, env->gpu_id, env->gpu_memory_peak / 1048576.0,
					   env->gpu_h2d_bytes / 1048576.0, env->gpu_wait_seconds);
	if (env->device_note[0])
	{
		gbml_sb_printf(report, "\"device_note\":");
		gbml_sb_json_string(report, env->device_note);
		gbml_sb_printf(report, ",");
	}
	gbml_sb_printf(report, "\"threads\":%d,\"prepare_seconds\":%.6f,\"train_seconds\":%.6f,"
				   "\"peak_memory_mb\":%.1f,",
				   env->threads, t_prep, gbml_now() - t0 - t_prep, (double) env->memory_peak / 1048576.0);
	report_spill(report, env, ds, eval, own_eval);
	gbml_sb_printf(report, "\"timings\":");
	if (timings->len)
		gbml_sb_append(report, timings->data, timings->len);
	else
		gbml_sb_append(report, "{}", 2);
	gbml_sb_append(report, "}", 1);
}

/* The META section: row and feature counts, then what the trainer put in meta. */
static void
write_meta_section(gbml_model_writer *writer, const gbml_dataset *ds, int64_t eval_rows,
				   const gbml_strbuf *meta, gbml_env *env)
{
	gbml_strbuf full;

	gbml_sb_init(&full, env);
	gbml_sb_printf(&full, "{\"rows\":%lld,\"eval_rows\":%lld,\"features\":%d",
				   (long long) ds->n_rows, (long long) eval_rows, ds->n_features);
	if (meta->len > 0)
	{
		gbml_sb_append(&full, ",", 1);
		gbml_sb_append(&full, meta->data, meta->len);
	}
	gbml_sb_append(&full, "}", 1);
	if (meta->failed)
		full.failed = true;
	gbml_model_add_sb(writer, GBML_SECTION_META, &full);
	gbml_sb_free(&full);
}

int
gbml_train_report(gbml_env *env, const gbml_parsed_params *params,
				  gbml_dataset *ds, gbml_dataset *eval,
				  uint8_t **model, size_t *model_len, gbml_strbuf *report)
{
	const gbml_algorithm *algo = params->algo;
	gbml_param_spec *recorded_algo = NULL;
	gbml_dataset split_eval;
	bool		own_eval = false;
	gbml_model_writer writer;
	gbml_strbuf meta,
				prms;
	gbml_train_context ctx;
	double		t0 = gbml_now(),
				t_prep;
	int			rc;

	if ((rc = check_training_input(env, params, ds, eval)) != GBML_OK)
		return rc;
	settle_device(env, params);
	if (eval && eval->n_rows > 0 && eval->n_features != ds->n_features)
		return gbml_error(env, GBML_EINVAL, "%s: the eval set has %d features, the training set %d",
						  algo->name, eval->n_features, ds->n_features);
	if ((rc = order_rows(env, params, ds, &eval, &split_eval, &own_eval)) != GBML_OK)
		return rc;
	t_prep = gbml_now() - t0;

	gbml_model_writer_init(&writer, env);
	gbml_sb_init(&meta, env);
	gbml_sb_init(&prms, env);
	memset(&ctx, 0, sizeof(ctx));
	ctx.env = env;
	ctx.params = params->algo_params;
	ctx.eval = eval;
	ctx.meta = &meta;
	ctx.writer = &writer;
	write_leading_sections(&writer, params, ds, &prms, &recorded_algo, env);

	rc = algo->train(ds, &ctx);
	if (rc == GBML_OK)
	{
		gbml_strbuf timings;

		gbml_sb_init(&timings, env);
		move_timings(&meta, &timings);
		if (report)
			write_run_report(report, env, ds, eval, own_eval, t0, t_prep, &timings);
		gbml_sb_free(&timings);
		write_meta_section(&writer, ds, eval ? eval->n_rows : ctx.shards_eval_rows, &meta, env);
		rc = gbml_model_finish(&writer, (uint16_t) algo->id, 0, model, model_len);
	}
	else
		gbml_model_writer_free(&writer);
	gbml_sb_free(&meta);
	gbml_sb_free(&prms);
	gbml_free(env, recorded_algo);
	if (own_eval)
		gbml_dataset_free(&split_eval, env);
	return rc;
}

/* ---- scoring ---- */

int
gbml_scorer_load(gbml_scorer *s, gbml_env *env, const void *bytes, size_t len)
{
	const uint8_t *data;
	size_t		dlen;
	int			rc;

	memset(s, 0, sizeof(*s));
	if ((rc = gbml_model_open(&s->reader, env, bytes, len)) != GBML_OK)
		return rc;
	s->algo = gbml_algorithm_by_id(s->reader.algorithm);
	if (s->algo == NULL)
		return gbml_error(env, GBML_ECORRUPT, "model algorithm id %u is unknown to this build", s->reader.algorithm);
	s->n_features = (int) s->reader.n_features;
	if (gbml_model_find(&s->reader, GBML_SECTION_SCHEMA, &data, &dlen) &&
		(rc = gbml_schema_read(data, dlen, s->n_features, env, &s->schema)) != GBML_OK)
		return rc;
	s->reader.schema = s->schema;	/* the algorithm's loader borrows it */
	if ((rc = s->algo->load(&s->reader, env, &s->handle)) != GBML_OK)
		gbml_scorer_free(s, env);
	else
	{
		s->n_classes = s->algo->classes ? s->algo->classes(s->handle, NULL, NULL) : 0;
		s->probability = (s->algo->outputs & GBML_OUT_PROBA) && s->n_classes == 0 &&
			(s->algo->gives_probability == NULL || s->algo->gives_probability(s->handle));
	}
	return rc;
}

void
gbml_scorer_free(gbml_scorer *s, gbml_env *env)
{
	if (s->algo && s->handle && s->algo->unload)
		s->algo->unload(s->handle, env);
	s->handle = NULL;
	gbml_schema_free(s->schema, env);
	s->schema = NULL;
}

static const char *
output_name(gbml_output what)
{
	switch (what)
	{
		case GBML_OUT_SCORE:
			return "predict";
		case GBML_OUT_PROBA:
			return "predict_proba";
		case GBML_OUT_CLUSTER:
			return "kmeans_assign";
		case GBML_OUT_DISTANCE:
			return "kmeans_distance";
		case GBML_OUT_CLASSES:
			return "predict_classes";
	}
	return "?";
}

int
gbml_scorer_check_output(const gbml_scorer *s, gbml_env *env, gbml_output what)
{
	if (gbml_scorer_gives(s, what))
		return GBML_OK;
	if (what == GBML_OUT_CLASSES)
		return gbml_error(env, GBML_EUNSUPPORTED, "predict_classes needs a model with classes (boost with the "
						  "MultiClass loss); this %s model has none", s->algo->name);
	if (what == GBML_OUT_PROBA && s->n_classes > 0)
		return gbml_error(env, GBML_EUNSUPPORTED, "predict_proba gives one probability, and this model has %d classes: "
						  "gbml.predict_classes gives each class's probability (gbml.predict the most probable class)",
						  s->n_classes);
	if (what == GBML_OUT_PROBA && (s->algo->outputs & GBML_OUT_PROBA))
		return gbml_error(env, GBML_EUNSUPPORTED, "predict_proba needs a model whose loss gives a probability "
						  "(boost with Logloss, saga with the logistic loss); score this %s model with "
						  "gbml.predict", s->algo->name);
	return gbml_error(env, GBML_EUNSUPPORTED, "%s is not available for a %s model", output_name(what),
					  s->algo->name);
}

int
gbml_scorer_classes(const gbml_scorer *s, gbml_env *env, const float *x, int n, double *prob)
{
	int			rc;

	if ((rc = gbml_scorer_check_output(s, env, GBML_OUT_CLASSES)) != GBML_OK)
		return rc;
	if (n != s->n_features)
		return gbml_error(env, GBML_EINVAL, "features has %d elements, the model expects %d", n, s->n_features);
	(void) s->algo->classes(s->handle, x, prob);
	return GBML_OK;
}

int
gbml_scorer_predict(const gbml_scorer *s, gbml_env *env, const float *x, int n,
					gbml_output what, double *out)
{
	int			rc;

	if ((rc = gbml_scorer_check_output(s, env, what)) != GBML_OK)
		return rc;
	if (what == GBML_OUT_CLASSES)
		return gbml_error(env, GBML_EINVAL, "predict_classes gives an array: gbml_scorer_classes");
	if (n != s->n_features)
		return gbml_error(env, GBML_EINVAL, "features has %d elements, the model expects %d", n, s->n_features);
	*out = s->algo->predict(s->handle, x, what);
	return GBML_OK;
}

/* ---- introspection ---- */

static bool
json_object_text(const uint8_t *data, size_t len)
{
	return len >= 2 && data[0] == '{' && data[len - 1] == '}';
}

int
gbml_model_info_json(gbml_env *env, const void *bytes, size_t len, gbml_strbuf *out)
{
	gbml_model_reader r;
	const gbml_algorithm *algo;
	const uint8_t *data;
	size_t		dlen;
	int			rc;

	if ((rc = gbml_model_open(&r, env, bytes, len)) != GBML_OK)
		return rc;
	algo = gbml_algorithm_by_id(r.algorithm);
	gbml_sb_append(out, "{\"algorithm\":", 13);
	if (algo)
		gbml_sb_json_string(out, algo->name);
	else
		gbml_sb_printf(out, "%u", r.algorithm);
	gbml_sb_printf(out, ",\"format_version\":%u,\"bytes\":%zu,\"features\":%u",
				   r.format_version, len, r.n_features);
	if (gbml_model_find(&r, GBML_SECTION_SCHEMA, &data, &dlen))
	{
		gbml_feature_schema *schema;

		if ((rc = gbml_schema_read(data, dlen, (int) r.n_features, env, &schema)) != GBML_OK)
			return rc;
		gbml_sb_append(out, ",", 1);
		gbml_schema_json_names(schema, out);
		gbml_sb_printf(out, ",\"categorical_features\":%d", gbml_schema_n_categorical(schema));
		gbml_schema_free(schema, env);
	}
	if (gbml_model_find(&r, GBML_SECTION_PARAMS, &data, &dlen))
	{
		if (!json_object_text(data, dlen))
			return gbml_error(env, GBML_ECORRUPT, "model parameters section is not a JSON object");
		gbml_sb_append(out, ",\"params\":", 10);
		gbml_sb_append(out, data, dlen);
	}
	if (gbml_model_find(&r, GBML_SECTION_META, &data, &dlen))
	{
		if (!json_object_text(data, dlen))
			return gbml_error(env, GBML_ECORRUPT, "model metadata section is not a JSON object");
		if (dlen > 2)
		{
			gbml_sb_append(out, ",", 1);
			gbml_sb_append(out, data + 1, dlen - 2);
		}
	}
	gbml_sb_append(out, "}", 1);
	return gbml_sb_status(out);
}

void
gbml_importance_normalize(double *out, int n)
{
	double		total = 0;

	for (int j = 0; j < n; j++)
		total += out[j];
	for (int j = 0; j < n; j++)
		out[j] = total > 0 && isfinite(total) ? out[j] / total : 0;
}
