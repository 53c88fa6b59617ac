/*
 * algorithm.h — the table each model kind fills in, and the shared training
 * and scoring driver built on it.
 *
 * The glue never knows an algorithm's internals: it hands a dataset and the
 * user's params to gbml_train(), gets the model bytes back, and scores with
 * gbml_scorer_load() / gbml_scorer_predict().  Adding a model kind means one
 * file that defines a gbml_algorithm and one line in algorithm.c.
 */
#ifndef GBML_ALGORITHM_H
#define GBML_ALGORITHM_H

#include "env.h"
#include "dataset.h"
#include "params.h"
#include "model_format.h"

typedef enum gbml_algo_id
{
	GBML_ALGO_MEAN = 1,			/* trivial mean predictor, for tests of the machinery */
	GBML_ALGO_BOOST = 2,
	GBML_ALGO_KMEANS = 3,
	GBML_ALGO_SAGA = 4
} gbml_algo_id;

/* What a scoring call asks for. */
typedef enum gbml_output
{
	GBML_OUT_SCORE = 1 << 0,	/* predict: raw score / regression value / class */
	GBML_OUT_PROBA = 1 << 1,	/* predict_proba */
	GBML_OUT_CLUSTER = 1 << 2,	/* kmeans_assign (returned as a double holding an int) */
	GBML_OUT_DISTANCE = 1 << 3,	/* kmeans_distance */
	GBML_OUT_CLASSES = 1 << 4	/* predict_classes: a probability per class (a model with classes only) */
} gbml_output;

/* Input requirements the glue enforces while collecting rows. */
#define GBML_INPUT_LABEL	(1u << 0)	/* a label is required */
#define GBML_INPUT_MISSING	(1u << 1)	/* NaN/Inf features allowed (as missing) */

/* Everything a trainer gets besides the data. */
typedef struct gbml_train_context
{
	gbml_env   *env;
	const void *params;			/* the algorithm's params struct, parsed */
	const gbml_dataset *eval;	/* optional held-out set (may be NULL) */
	/* Set by the algorithm: JSON object body of the META section, without braces. */
	gbml_strbuf *meta;
	/* Extra output of the driver: the model writer to add sections to. */
	gbml_model_writer *writer;
	/* Set by a trainer whose eval rows are on shards (eval is NULL): their count, for META */
	int64_t		shards_eval_rows;
} gbml_train_context;

typedef struct gbml_algorithm
{
	gbml_algo_id id;
	const char *name;			/* "boost", "kmeans", "saga", "mean" */
	const gbml_param_spec *params;	/* GBML_PARAM_END-terminated */
	size_t		params_size;	/* sizeof the params struct */
	unsigned	input_flags;	/* GBML_INPUT_* (may depend on params: see input_flags_fn) */
	unsigned	outputs;		/* GBML_OUT_* this model kind answers */

	/*
	 * The trainer has a GPU path (it still decides per training: size,
	 * budget).  Without one, device "gpu" trains on the CPU with a NOTICE.
	 */
	bool		gpu_trains;
	/* The trainer takes rows streamed to a GPU chunk store during the scan (dataset.h). */
	bool		gpu_streams;
	/* The trainer has a hybrid mode (device "hybrid"); without one, "hybrid" means "gpu". */
	bool		hybrid_trains;
	/* its shards' side when it can train on rows other servers hold (gbml_dataset.shards), else NULL */
	const struct gbml_shard_ops *shard;
	/* The trainer reads rows kept in temporary files (chunk_prefetch.h): its datasets may spill. */
	bool		reads_spilled_rows;
	/*
	 * The trainer needs the float features only until it has quantized them
	 * (boosting keeps bins): its rows go to temporary files early, whatever
	 * the budget, so the floats never take host memory (gbml_plan_spill).
	 */
	bool		quantizes_rows;
	/*
	 * The trainer's CPU passes give the same results in any row order and
	 * it reaches rows by canonical position only through the dataset's rank
	 * arrays (K-Means): on the CPU, rows in temporary files keep their
	 * written order instead of being rewritten in canonical order.
	 */
	bool		passes_in_any_order;
	/*
	 * The trainer takes categorical features (schema.h: ids, NaN for NULL);
	 * without it the driver refuses a dataset whose schema has one, naming
	 * the column.
	 */
	bool		categorical_features;

	/*
	 * Optional: whether parameter s goes into the model's PARAMS section for
	 * a training on ds with params (the kind's params struct; NULL: every
	 * one).  Lets a kind add parameters that only some data or some values
	 * use (boosting's categorical ones, leaf_estimation_iterations past 1)
	 * without changing the bytes of the models that never use them.
	 */
	bool		(*records_param) (const gbml_param_spec *s, const void *params, const gbml_dataset *ds);

	/* Optional: input flags from parsed params (e.g. label needed only for some losses). */
	unsigned	(*input_flags_fn) (const void *params);

	/*
	 * Trains on ds (canonical order, >= 1 row). Adds algorithm sections to
	 * ctx->writer and appends META members ("key":value,...) to ctx->meta:
	 * at least "metrics":{...} and "timings":{...}.  Returns GBML_OK or an
	 * error code with env->error set.
	 */
	int			(*train) (const gbml_dataset *ds, gbml_train_context *ctx);

	/* Builds a scorer from a validated container; *handle allocated via env. */
	int			(*load) (const gbml_model_reader *model, gbml_env *env, void **handle);
	void		(*unload) (void *handle, gbml_env *env);

	/*
	 * Scores one row of n_features floats (n_features already checked).
	 * A model with classes (below) answers GBML_OUT_SCORE with the most
	 * probable class.
	 */
	double		(*predict) (const void *handle, const float *x, gbml_output what);
	/*
	 * Optional: the model's class count when it gives a probability per
	 * class (boosting's MultiClass), else 0; with prob (room for that
	 * many), row x's probabilities.
	 */
	int			(*classes) (const void *handle, const float *x, double *prob);
	/*
	 * Optional, with GBML_OUT_PROBA in outputs: whether this model's loss
	 * gives a probability (boosting's Logloss, SAGA's logistic loss); a
	 * regression's predict_proba is an ERROR, not NaN.
	 */
	bool		(*gives_probability) (const void *handle);

	/* Optional: readable dump as a JSON object body (without braces). */
	int			(*to_json) (const void *handle, gbml_strbuf *out);
	/* Optional: per-feature importance into out[n_features] (non-negative, sums to 1 or all 0). */
	int			(*importance) (const void *handle, double *out);
} gbml_algorithm;

/*
 * Makes ds spill its rows to temporary files (chunk_store_file.h) during the
 * scan when they would take too much host memory: for a trainer that
 * quantizes, past GBML_SPILL_QUANTIZED_VALUES features (or a quarter of the
 * budget, if smaller); for the others, past half of env's memory budget
 * (never with an unlimited budget).  No-op without temporary files (env's
 * hooks) or when ds already streams elsewhere (the GPU).  Call before the
 * first row.
 */
#define GBML_SPILL_QUANTIZED_VALUES ((int64_t) 8 << 20)
void		gbml_plan_spill(const gbml_algorithm *algo, const gbml_env *env, gbml_dataset *ds);

/*
 * ds, planned by gbml_plan_spill, is read after another dataset that still
 * holds memory (gbml.train's eval source, after the training rows): its
 * rows go to temporary files from half of what is free now, if that is
 * sooner, and when not even a chunk of them fits beside what is held, an
 * ERROR that names the step (what: "reading the eval set ...").  Call
 * before its first row; n_features, its rows' width when known (0: not).
 */
int			gbml_plan_spill_after(gbml_env *env, gbml_dataset *ds, int n_features, const char *what);

/*
 * Small chunks for a small budget: a chunk holds at most 1/16 of env's
 * budget (64 KB at least), since a training that streams its rows (to
 * temporary files, or to the GPU) holds about three chunks on the host at
 * a time.  gbml_plan_spill does it; the GPU's streaming too.  Call before
 * the first row.
 */
void		gbml_plan_chunk_bytes(const gbml_env *env, gbml_dataset *ds);

/* Scales non-negative scores to shares that sum to 1 (all 0 when the total is 0 or not finite). */
void		gbml_importance_normalize(double *out, int n);

/* Registry of model kinds. */
const gbml_algorithm *gbml_algorithm_by_name(const char *name);
const gbml_algorithm *gbml_algorithm_by_id(int id);

/* Parameters every trainer accepts (device, threads, ...), parsed by the glue. */
typedef struct gbml_common_params
{
	int			device;			/* 0 auto, 1 cpu, 2 gpu (GBML_DEVICE_*) */
	int64_t		threads;		/* 0 = use gbml.threads */
	int64_t		gpu_id;
	double		memory_limit_mb;	/* 0 = use gbml.memory_limit */
	double		gpu_memory_limit_mb;	/* 0 = use gbml.gpu_memory_limit */
	double		eval_fraction;	/* share of rows (groups) held out for eval */
	int			deploy;			/* registry: 0 always, 1 if_better, 2 never */
	char	   *eval_source;	/* registry: table or query for the eval set */
	char	   *features_column;
	char	   *label_column;
	char	   *group_column;
	char	   *weight_column;
	gbml_names	feature_columns;	/* gbml.train's column form (src/pg/columns.c) */
	gbml_names	exclude_columns;
	gbml_names	categorical_columns;
	/* Values given by the user (true) or defaulted: the glue uses these to let settings win. */
	bool		device_given;
	bool		threads_given;
	bool		memory_limit_given;
	bool		gpu_id_given;
	bool		gpu_memory_limit_given;
} gbml_common_params;

extern const gbml_param_spec gbml_common_param_specs[];

/* Parsed params of one training call: common + the algorithm's own struct. */
typedef struct gbml_parsed_params
{
	const gbml_algorithm *algo;
	gbml_common_params common;
	void	   *algo_params;	/* allocated via env, algo->params_size bytes */
} gbml_parsed_params;

int			gbml_parse_training_params(gbml_env *env, const gbml_algorithm *algo,
									   const gbml_param_value *values, int n_values,
									   gbml_parsed_params *out);
unsigned	gbml_input_flags(const gbml_parsed_params *p);
/* Frees what gbml_parse_training_params allocated (the glue lets its MemoryContext do it). */
void		gbml_parsed_params_free(gbml_env *env, gbml_parsed_params *p);

/* Parse, train, free: for callers that hold params as values (tests, benchmarks). */
int			gbml_train_values(gbml_env *env, const char *algorithm, const gbml_param_value *values,
							  int n_values, gbml_dataset *ds, gbml_dataset *eval,
							  uint8_t **model, size_t *model_len);

/*
 * The shared training driver: canonical order, eval split (if requested and
 * no eval set given), algorithm->train, common sections, container.  The
 * model bytes are allocated via env.
 *
 * The model bytes are deterministic: same rows (in any order), params and
 * seed give the same bytes whatever the thread count or device speed.  What
 * depends on the run — wall times, threads, device, and the "timings" member
 * an algorithm writes into its META — goes into `report` instead (a JSON
 * object; may be NULL), which gbml.train stores in gbml.models.timings.
 */
int			gbml_train_report(gbml_env *env, const gbml_parsed_params *params,
							  gbml_dataset *ds, gbml_dataset *eval,
							  uint8_t **model, size_t *model_len, gbml_strbuf *report);
/*
 * A shard's rows (canonical order) split as the driver splits one server's:
 * with eval_fraction, the rows (groups) the one-server split would hold out
 * — each by its own key, gbml_ds_eval_key — move into *eval (initialised
 * here).  *has_eval: some did.  A shard without rows splits nothing; a
 * small one may be left without training rows (its eval rows only).
 */
int			gbml_shard_split_eval(const gbml_parsed_params *params, gbml_dataset *ds, gbml_dataset *eval,
								  bool *has_eval, gbml_env *env);
/* The same without the report. */
int			gbml_train(gbml_env *env, const gbml_parsed_params *params,
					   gbml_dataset *ds, gbml_dataset *eval,
					   uint8_t **model, size_t *model_len);

/* A loaded model ready to score. */
typedef struct gbml_scorer
{
	const gbml_algorithm *algo;
	gbml_model_reader reader;
	void	   *handle;
	int			n_features;
	int			n_classes;		/* a probability per class (algorithm.classes), or 0 */
	bool		probability;	/* predict_proba gives one (algorithm.gives_probability) */
	struct gbml_feature_schema *schema; /* the model's 'SCHM' (feature names, categories), or NULL */
} gbml_scorer;

int			gbml_scorer_load(gbml_scorer *s, gbml_env *env, const void *bytes, size_t len);
void		gbml_scorer_free(gbml_scorer *s, gbml_env *env);
/*
 * Whether the model gives `what` (the scorers' per-row test): its kind's
 * outputs, predict_classes only with classes, predict_proba only with a
 * loss that gives a probability.
 */
static inline bool
gbml_scorer_gives(const gbml_scorer *s, gbml_output what)
{
	if (what == GBML_OUT_CLASSES)
		return s->n_classes > 0;
	return (s->algo->outputs & what) && (what != GBML_OUT_PROBA || s->probability);
}
/* The same as a status: GBML_OK, or an error naming what to call instead. */
int			gbml_scorer_check_output(const gbml_scorer *s, gbml_env *env, gbml_output what);
/* Checks the feature count and the output kind, then scores. */
int			gbml_scorer_predict(const gbml_scorer *s, gbml_env *env, const float *x, int n,
								gbml_output what, double *out);
/* A model with classes: checks the feature count, then each class's probability into prob[s->n_classes]. */
int			gbml_scorer_classes(const gbml_scorer *s, gbml_env *env, const float *x, int n, double *prob);

/* Model introspection as JSON object text (allocated via env in sb). */
int			gbml_model_info_json(gbml_env *env, const void *bytes, size_t len, gbml_strbuf *out);

#endif
