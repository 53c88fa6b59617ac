/*
 * glue.h — what the PostgreSQL-facing files share: settings, the engine
 * environment bound to a MemoryContext and to query cancel, conversion of
 * jsonb params and real[] arrays, and turning engine status codes into
 * ERRORs.  Only src/pg includes PostgreSQL headers.
 */
#ifndef GBML_GLUE_H
#define GBML_GLUE_H

#include "postgres.h"
#include "fmgr.h"
#include "access/htup.h"
#include "access/tupdesc.h"
#include "lib/stringinfo.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"		/* numeric_float8_no_overflow */
#include "utils/fmgrprotos.h"
#include "utils/array.h"
#include "utils/jsonb.h"

#include "algorithm.h"
#include "backend.h"
#include "boost_gpu.h"
#include "chunk_store_gpu.h"

/* ---- settings (guc.c) ---- */
extern int	gbml_setting_device;	/* GBML_DEVICE_* */
extern int	gbml_setting_threads;
extern int	gbml_setting_gpu_id;
extern int	gbml_setting_memory_limit_kb;
extern int	gbml_setting_progress_interval_s;
extern int	gbml_setting_gpu_memory_limit_mb;
extern char *gbml_setting_cuda_library;
void		gbml_define_settings(void);

/* ---- engine environment (engine_env.c) ---- */

/*
 * Binds env to `mcxt` (every engine allocation is a chunk of it, so ERROR
 * and cancel free everything), to the memory budget and to query cancel.
 * `what` names the operation in progress messages ("gbml.train").
 */
void		gbml_env_bind(gbml_env *env, MemoryContext mcxt, const char *what);

/*
 * The hint of a budget ERROR that has no more specific one: for a bound env
 * whose rows cannot go to temporary files, why, and what else to do.  hint
 * must outlive the env (a string literal).
 */
void		gbml_env_budget_hint(gbml_env *env, const char *hint);

/*
 * The engine's temporary files as PostgreSQL temporary files (tempfile.c):
 * temp_tablespaces, temp_file_limit, deleted at abort and exit, counted in
 * temp_bytes.  Handles are allocated in `mcxt`.  Called by gbml_env_bind.
 */
void		gbml_env_bind_temp_files(gbml_env *env, MemoryContext mcxt);

/* Applies params' device/threads/memory over the settings; loads the GPU backend if asked. */
void		gbml_env_configure(gbml_env *env, const gbml_common_params *common, const char *algorithm);

/*
 * Where ds's rows go as they stream in: to the GPU when the training will
 * run there (device "gpu"; auto decides only after the scan) and the
 * algorithm trains from streamed rows; else to temporary files past the
 * memory budget (gbml_plan_spill).  Neither for a parallel plan's partial
 * state (serialized to the leader).
 */
void		gbml_stream_setup(gbml_env *env, const gbml_parsed_params *params, gbml_dataset *ds, bool partial);

/*
 * Makes sure a dataset's helper thread (pre-faulting) has stopped before
 * `mcxt` frees the dataset's memory, whether by ERROR, cancel or normal end.
 */
void		gbml_dataset_guard(MemoryContext mcxt, gbml_dataset *ds);

/* ERROR for a failed engine call (does not return); `what` prefixes the message. */
void		gbml_raise(gbml_env *env, int rc, const char *what) pg_attribute_noreturn();
#define GBML_CHECK(env, call, what) do { int rc_ = (call); if (rc_ != GBML_OK) gbml_raise((env), rc_, (what)); } while (0)

/* The CUDA backend, loaded on first use; NULL (with reason) when absent. */
const gbml_backend *gbml_gpu_backend(char *reason, size_t reason_len);

/* ---- conversions (convert.c) ---- */

/* Flattens a jsonb object into engine param values (allocated in CurrentMemoryContext). */
int			gbml_jsonb_to_params(Jsonb *params, const char *what, gbml_param_value **values);

/*
 * Returns a pointer to the float4 elements of a real[] (validated: one
 * dimension, no NULL element) and its length.  `what` and `rowno` name the
 * problem in messages (rowno 0 = no row number).
 */
const float *gbml_float_array(ArrayType *arr, int *n, const char *what, int64 rowno);
/* "row N: " for a message about row N, "" for rowno 0 (scoring: no row number); into buf. */
const char *gbml_row_prefix(char *buf, size_t size, int64 rowno);
/* A model with classes (sc->n_classes > 0): row x's probabilities as a float8[] (scoring.c). */
Datum		gbml_class_probabilities(const gbml_scorer *sc, const float *x);

/* Parses trainer params from jsonb (NULL = {}) plus extra values; ERROR on problems. */
void		gbml_parse_params_or_error(gbml_env *env, const gbml_algorithm *algo, Jsonb *params,
									   const gbml_param_value *extra, int n_extra,
									   gbml_parsed_params *out, const char *what);

/* Trains and returns the model as a bytea in CurrentMemoryContext; raises NOTICEs from the metadata. */
bytea	   *gbml_train_to_bytea(gbml_env *env, const gbml_parsed_params *params,
								gbml_dataset *ds, gbml_dataset *eval, const char *what);

/*
 * Whether a training source is a table name, (schema-)qualified, quoted
 * ("My Schema"."My Table") or not, rather than a query; *relid is the
 * relation it names (InvalidOid: none), looked up with lock.
 */
bool		gbml_source_is_name(const char *source, LOCKMODE lock, Oid *relid);
/* JSON text of the last training's run report in this backend (NULL if none, or if it failed). */
const char *gbml_last_report(void);
/* A training begins: the previous report goes, so a failed training leaves none, not the one before it. */
void		gbml_forget_last_report(void);

/* Loads a scorer for a bytea model, cached in fn_extra across calls of one query. */
const gbml_scorer *gbml_cached_scorer(FunctionCallInfo fcinfo, int argno);
/* The same with the cache in *slot (a caller keeping more in fn_extra); *reloaded (if not NULL) says whether it loaded now. */
const gbml_scorer *gbml_cached_scorer_in(FunctionCallInfo fcinfo, int argno, void **slot, bool *reloaded);
/* The deployed model named by argument 0, looked up once per query, its cache in *slot (scoring.c). */
const gbml_scorer *gbml_named_scorer_in(FunctionCallInfo fcinfo, const char *fname, void **slot, bool *reloaded);

/* ---- features from ordinary columns (columns.c) ---- */
typedef struct gbml_column_plan gbml_column_plan;
struct gbml_feature_schema;
/*
 * What a shard's coordinator already read about its columns (the union's
 * probe, shard_session.c), by name: a categorical column's values (width
 * 0; sorted by strcmp and distinct), or an array column's length (width
 * > 0, no values).  The shard then scans its source for neither.
 */
typedef struct gbml_given_columns
{
	int			n;
	char	  **names;
	int		   *width;
	int		   *n_values;
	char	 ***values;
} gbml_given_columns;

/*
 * The feature columns of a source whose tuple descriptor is td (`base` is
 * its SELECT): those in feature_columns, else every column but the label,
 * group, weight and excluded ones; their kinds; and, from one scan of the
 * source, each categorical column's values and each array column's
 * length (unless given: then exactly the given columns are categorical or
 * arrays, and the source is not scanned for them).  ERROR
 * for an unusable column, naming it.  palloc'd in the current context.
 */
gbml_column_plan *gbml_column_plan_for_source(const gbml_common_params *cp, TupleDesc td, const char *base,
											  const gbml_given_columns *given, const char *what);
/* Appends the plan's columns as a select list over alias "s" (cast to the training types). */
void		gbml_column_plan_select(const gbml_column_plan *p, StringInfo q);
/*
 * Row tup (read by a query whose first columns are the plan's select list)
 * into x[n_features].  allow_missing: NULL numbers become NaN, else an
 * ERROR naming the column; a categorical value not in the plan's values is
 * an ERROR with unseen_is_error, else GBML_CATEGORY_UNSEEN.
 */
void		gbml_column_plan_row(gbml_column_plan *p, HeapTuple tup, TupleDesc td, float *x,
								 bool allow_missing, bool unseen_is_error, const char *what, int64 rowno);
/* Binds a model's features (its schema) to the attributes of a row type, by column name; ERROR when one is missing or of the wrong type. */
gbml_column_plan *gbml_column_plan_for_row(const struct gbml_feature_schema *schema, TupleDesc td, const char *what);
/* A deformed row (values, nulls by attribute) into x[n_features]; unseen categories are GBML_CATEGORY_UNSEEN. */
void		gbml_column_plan_values(const gbml_column_plan *p, const Datum *values, const bool *nulls, float *x,
									const char *what);
/* The same from argument slots: plan column i's value is *col[i] (the row scoring's columns forms). */
void		gbml_column_plan_args(const gbml_column_plan *p, const NullableDatum *const *col, float *x,
								  const char *what);
/*
 * Scoring by row with a model that needs finite numbers: feature j of x is
 * NULL (column_null: each plan column's NULL flag this row), NaN or
 * infinite; the ERROR naming its column.
 */
pg_attribute_noreturn() void gbml_column_plan_not_finite(const gbml_column_plan *p, const float *x, int j,
														 const bool *column_null, const char *algo,
														 const char *what);
/*
 * column_pack.c: the n columns a _column_pack call passed as argument arg of
 * fcinfo's call, read in place; an ERROR when they are not this row's.
 */
const NullableDatum *gbml_column_pack_args(FunctionCallInfo fcinfo, int arg, int n, const char *fname);
/* Plan column i's 1-based attribute in the row type it was bound to. */
int			gbml_column_plan_attno(const gbml_column_plan *p, int i);
const struct gbml_feature_schema *gbml_column_plan_schema(const gbml_column_plan *p);
/*
 * Across servers, for one-hot encoding (onehot_counts.h): zeroed arrays of
 * rows per category, one for each of the schema's categorical features in
 * order (n_categories + 1, NULL's last), in the plan's context and already
 * its schema's category_counts; the caller adds the counts into them.
 */
int64	  **gbml_column_plan_category_counts(gbml_column_plan *p);
int			gbml_column_plan_n_features(const gbml_column_plan *p);
int			gbml_column_plan_n_columns(const gbml_column_plan *p);
/*
 * The row aggregates' plan for rows of type td (the first row's values set
 * array lengths); categorical values are collected as rows come
 * (gbml_column_plan_collect) and sorted into their final ids, ds's rows
 * renumbered (in memory and in temporary files alike), by
 * gbml_column_plan_sort_categories before training; an ERROR (`what`) if
 * that fails.
 */
/* An eval source read with the training plan p: each of its columns is in td, else an ERROR naming it. */
void		gbml_column_plan_check_source(const gbml_column_plan *p, TupleDesc td, const char *what);
/*
 * The label (with_label: the trainer takes one), group and weight columns
 * of rows of type td, where present: a label is a number or boolean, a
 * weight a number, a group id an integer (or numeric), and none of them in
 * feature_columns; else an ERROR naming the column.
 */
void		gbml_check_target_columns(const gbml_common_params *cp, TupleDesc td, bool with_label, const char *what);
gbml_column_plan *gbml_column_plan_for_rows(const gbml_common_params *cp, TupleDesc td, const Datum *values,
											const bool *nulls, const char *what);
void		gbml_column_plan_collect(gbml_column_plan *p, const Datum *values, const bool *nulls, float *x,
									 bool allow_missing, const char *what, int64 rowno);
void		gbml_column_plan_sort_categories(gbml_column_plan *p, gbml_dataset *ds, gbml_env *env, const char *what);
/*
 * The feature columns of a table sharded across servers (td: the
 * coordinator's partitioned table), without reading it (categorical ones
 * only when categorical_ok: an ERROR names one otherwise).  With
 * categorical or array columns, gbml_column_plan_shard_probe gives the
 * query each shard answers about its partition (relation: its name there;
 * NULL when none is needed), and gbml_column_plan_take_shard_probes takes
 * every shard's answer (texts[s][field], NULL for SQL NULL): the union's
 * categories, each array's length (the same on every shard).  The schema
 * the shards' rows then follow, in this order, exists after that.
 */
gbml_column_plan *gbml_column_plan_for_shards(const gbml_common_params *cp, TupleDesc td, bool categorical_ok,
											  const char *what);
char	   *gbml_column_plan_shard_probe(const gbml_column_plan *p, const char *relation);
void		gbml_column_plan_take_shard_probes(gbml_column_plan *p, int n_shards, char *const *const *texts,
											   const char *const *shard_names, const char *what);
/* 1-based attribute of td named `name` (dropped ones skipped), 0 when there is none. */
int			gbml_attno(TupleDesc td, const char *name);

/*
 * Reads `source` (a table name or a query) into ds through a cursor (SPI
 * connected): a features array, or the source's columns through
 * `columns` or a plan made here and returned (registry.c).
 */
gbml_column_plan *gbml_read_source(gbml_env *env, const gbml_parsed_params *pp, const char *source,
								   gbml_dataset *ds, unsigned input_flags, gbml_column_plan *columns,
								   const gbml_given_columns *given, const char *what);

/*
 * Training across servers (shards.c): the shards behind source when it
 * names a partitioned table whose partitions are postgres_fdw foreign
 * tables (NULL for any other source), and the training on them (the model
 * bytes, as gbml_train_to_bytea).
 */
typedef struct gbml_shard_set gbml_shard_set;
gbml_shard_set *gbml_sharded_source(const char *source, const char *what);
bytea	   *gbml_shards_train(gbml_env *env, gbml_parsed_params *pp, gbml_shard_set *ss, Jsonb *params,
							  const char *what);

/*
 * A number column's value as the engine's float (int2/4/8, float4/8,
 * numeric, bool; basetype without domains).  Inline: scoring by row calls
 * it for every column of every row.
 */
static inline float
gbml_column_number(Datum d, Oid basetype)
{
	switch (basetype)
	{
		case FLOAT4OID:
			return DatumGetFloat4(d);
		case FLOAT8OID:
			return (float) DatumGetFloat8(d);
		case INT4OID:
			return (float) DatumGetInt32(d);
		case INT8OID:
			return (float) DatumGetInt64(d);
		case INT2OID:
			return (float) DatumGetInt16(d);
		case BOOLOID:
			return DatumGetBool(d) ? 1.0f : 0.0f;
		case NUMERICOID:
			/* past float8's range: an infinity, as a float8 column's value would be (not an ERROR quoting 300 digits) */
			return (float) DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, d));
	}
	elog(ERROR, "gbml: type %u is not numeric", basetype);
	return 0;
}

#endif
