/*
 * aggregates.c — the training aggregates gbml.boost_fit, gbml.kmeans_fit,
 * gbml.saga_fit (and gbml.mean_fit, the test model): an `internal` state
 * holding the chunked dataset and the parsed params in the aggregate's
 * memory context; transition appends one row (no per-row allocation); final
 * trains; combine/serialize/deserialize make them parallel safe.  Rows are
 * put in a canonical order before training, so a parallel plan gives the
 * same model bytes as a serial one.
 */
#include "glue.h"

#include "nodes/primnodes.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/jsonb.h"
#include "utils/typcache.h"

#include "chunk_store_file.h"
#include "schema.h"

PG_FUNCTION_INFO_V1(gbml_boost_fit_trans);
PG_FUNCTION_INFO_V1(gbml_kmeans_fit_trans);
PG_FUNCTION_INFO_V1(gbml_saga_fit_trans);
PG_FUNCTION_INFO_V1(gbml_mean_fit_trans);
PG_FUNCTION_INFO_V1(gbml_boost_fit_row_trans);
PG_FUNCTION_INFO_V1(gbml_kmeans_fit_row_trans);
PG_FUNCTION_INFO_V1(gbml_saga_fit_row_trans);
PG_FUNCTION_INFO_V1(gbml_fit_final);
PG_FUNCTION_INFO_V1(gbml_fit_combine);
PG_FUNCTION_INFO_V1(gbml_fit_serialize);
PG_FUNCTION_INFO_V1(gbml_fit_deserialize);

#define STATE_MAGIC 0x46534d42u		/* serialized state: "BMSF" */

typedef struct fit_state
{
	MemoryContext mcxt;			/* owns everything below */
	gbml_env	env;
	const gbml_algorithm *algo;
	char		what[64];		/* "gbml.boost_fit" */
	Jsonb	   *params_jsonb;	/* copy, for serialization */
	int32		k;				/* kmeans_fit's k argument (0 = none) */
	bool		params_stable;	/* params and k: a constant or parameter, the same every row (not compared) */
	bool		partial;		/* a parallel plan's partial state: its rows stay in memory */
	bool		k_stable;
	gbml_parsed_params params;
	unsigned	input_flags;
	gbml_dataset ds;
	/* the whole-row forms (boost_fit(t, params)): the row type's plan, and one row's buffers */
	gbml_column_plan *columns;
	TupleDesc	row_td;
	Datum	   *row_values;
	bool	   *row_nulls;
	float	   *row_x;
	int			label_att,		/* 1-based attributes of the label, group and weight columns; 0: none */
				group_att,
				weight_att;
} fit_state;

static MemoryContext
agg_context_or_error(FunctionCallInfo fcinfo, const char *what)
{
	MemoryContext aggctx;

	if (!AggCheckCallContext(fcinfo, &aggctx))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("%s called in a non-aggregate context", what)));
	return aggctx;
}

static void
state_parse_params(fit_state *st, bool partial)
{
	gbml_param_value extra;
	MemoryContext old = MemoryContextSwitchTo(st->mcxt);

	memset(&extra, 0, sizeof(extra));
	if (st->k != 0)
	{
		extra.key = "k";
		extra.kind = GBML_VALUE_NUMBER;
		extra.number = st->k;
	}
	gbml_parse_params_or_error(&st->env, st->algo, st->params_jsonb, &extra, st->k != 0 ? 1 : 0,
							   &st->params, st->what);
	st->input_flags = gbml_input_flags(&st->params);
	gbml_dataset_init(&st->ds, (st->input_flags & GBML_INPUT_MISSING) != 0);
	gbml_env_configure(&st->env, &st->params.common, st->what);
	gbml_stream_setup(&st->env, &st->params, &st->ds, partial);
	MemoryContextSwitchTo(old);
}

static fit_state *
state_create(MemoryContext aggctx, const gbml_algorithm *algo, Jsonb *params, int32 k, bool partial)
{
	MemoryContext mcxt = AllocSetContextCreate(aggctx, "gbml training state", ALLOCSET_DEFAULT_SIZES);
	fit_state  *st = MemoryContextAllocZero(mcxt, sizeof(fit_state));

	gbml_forget_last_report();

	st->mcxt = mcxt;
	st->algo = algo;
	snprintf(st->what, sizeof(st->what), "gbml.%s_fit", algo->name);
	gbml_env_bind(&st->env, mcxt, st->what);
	st->k = k;
	st->partial = partial;
	if (partial)
		gbml_env_budget_hint(&st->env,
							 "The rows of a parallel plan's partial state stay in memory (it goes to the leader whole): "
							 "SET max_parallel_workers_per_gather = 0 lets them go to temporary files; or raise the "
							 "\"memory_limit_mb\" parameter (or gbml.memory_limit).");
	if (params)
	{
		MemoryContext old = MemoryContextSwitchTo(mcxt);

		st->params_jsonb = (Jsonb *) PG_DETOAST_DATUM_COPY(PointerGetDatum(params));
		MemoryContextSwitchTo(old);
	}
	state_parse_params(st, partial);
	gbml_dataset_guard(mcxt, &st->ds);
	return st;
}

/*
 * Whether two params (NULL: none) are the same jsonb, byte for byte; either
 * may have a short (1-byte) header, as a row's value read in place has.
 */
static bool
same_params(const void *a, const void *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/*
 * A row after the first: its params and k must be the first row's.  One
 * aggregate trains one model; which row's arguments it took would depend on
 * the scan order, and so would the model.  A constant or parameter
 * argument (the usual case) is the same every row: not compared.
 */
static void
check_same_arguments(FunctionCallInfo fcinfo, fit_state *st, int params_arg, int k_arg, int64 rowno)
{
	if (k_arg >= 0 && !st->k_stable &&
		(PG_ARGISNULL(k_arg) || PG_GETARG_INT32(k_arg) != st->k))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s: row " INT64_FORMAT ": k differs from the first row's %d", st->what, rowno, st->k),
						errhint("One aggregate trains one model: give every row the same k (GROUP BY trains one "
								"model per group).")));
	if (params_arg >= 0 && !st->params_stable)
	{
		/* read in place (a copy only for a compressed or out-of-line value): no palloc a row */
		const struct varlena *p = PG_ARGISNULL(params_arg) ? NULL : PG_DETOAST_DATUM_PACKED(PG_GETARG_DATUM(params_arg));

		if (!same_params(p, st->params_jsonb))
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("%s: row " INT64_FORMAT ": params differ from the first row's", st->what, rowno),
							errhint("One aggregate trains one model: give every row the same params (GROUP BY trains "
									"one model per group).")));
	}
}

/* The first row's arguments: whether the executor gives every row the same (a constant or a parameter). */
static void
note_stable_arguments(FunctionCallInfo fcinfo, fit_state *st, int params_arg, int k_arg)
{
	st->params_stable = params_arg < 0 || get_fn_expr_arg_stable(fcinfo->flinfo, params_arg);
	st->k_stable = k_arg < 0 || get_fn_expr_arg_stable(fcinfo->flinfo, k_arg);
}

static const gbml_algorithm *
algorithm_or_error(const char *name)
{
	const gbml_algorithm *a = gbml_algorithm_by_name(name);

	if (a == NULL)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("gbml: algorithm \"%s\" is not built into this gbml library", name)));
	return a;
}

/*
 * The common transition step.  Argument positions differ per aggregate, so
 * each wrapper extracts them and calls this.
 */
static Datum
fit_trans(FunctionCallInfo fcinfo, const char *algo_name, int features_arg, int label_arg,
		  int group_arg, int weight_arg, int params_arg, int k_arg)
{
	MemoryContext aggctx = agg_context_or_error(fcinfo, algo_name);
	fit_state  *st = PG_ARGISNULL(0) ? NULL : (fit_state *) PG_GETARG_POINTER(0);
	gbml_row	row;
	int64		rowno;

	if (st == NULL)
	{
		Jsonb	   *params = (params_arg >= 0 && !PG_ARGISNULL(params_arg)) ? PG_GETARG_JSONB_P(params_arg) : NULL;
		int32		k = 0;

		if (k_arg >= 0)
		{
			if (PG_ARGISNULL(k_arg))
				ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
								errmsg("gbml.kmeans_fit: k must not be NULL")));
			k = PG_GETARG_INT32(k_arg);
			if (k < 1)
				ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								errmsg("gbml.kmeans_fit: k must be at least 1, got %d", k)));
		}
		{
			/* a parallel plan's partial state goes to the leader serialized: it never streams */
			Aggref	   *aggref = AggGetAggref(fcinfo);
			bool		partial = aggref == NULL || aggref->aggsplit != AGGSPLIT_SIMPLE;

			st = state_create(aggctx, algorithm_or_error(algo_name), params, k, partial);
			note_stable_arguments(fcinfo, st, params_arg, k_arg);
		}
	}
	rowno = st->ds.n_rows + 1;
	if (rowno > 1)
		check_same_arguments(fcinfo, st, params_arg, k_arg, rowno);

	memset(&row, 0, sizeof(row));
	if (PG_ARGISNULL(features_arg))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("%s: row " INT64_FORMAT ": features is NULL", st->what, rowno)));
	row.x = gbml_float_array(PG_GETARG_ARRAYTYPE_P(features_arg), &row.n_features, st->what, rowno);
	if (row.n_features == 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s: row " INT64_FORMAT ": features is empty", st->what, rowno)));
	row.label_is_null = label_arg < 0 || PG_ARGISNULL(label_arg);
	if (!row.label_is_null)
		row.label = PG_GETARG_FLOAT4(label_arg);
	row.group_is_null = group_arg < 0 || PG_ARGISNULL(group_arg);
	if (!row.group_is_null)
		row.group = PG_GETARG_INT64(group_arg);
	row.weight_is_null = weight_arg < 0 || PG_ARGISNULL(weight_arg);
	if (!row.weight_is_null)
		row.weight = PG_GETARG_FLOAT4(weight_arg);

	GBML_CHECK(&st->env, gbml_dataset_append(&st->ds, &st->env, &row,
											 (st->input_flags & GBML_INPUT_LABEL) != 0), st->what);
	PG_RETURN_POINTER(st);
}

/* boost_fit(features real[], label real, group_id bigint, params jsonb) */
Datum
gbml_boost_fit_trans(PG_FUNCTION_ARGS)
{
	int			nargs = PG_NARGS();

	/* state, features, label [, group_id] [, params] */
	if (nargs == 5)
		return fit_trans(fcinfo, "boost", 1, 2, 3, -1, 4, -1);
	if (nargs == 4)
		return fit_trans(fcinfo, "boost", 1, 2, -1, -1, 3, -1);
	return fit_trans(fcinfo, "boost", 1, 2, -1, -1, -1, -1);
}

/* kmeans_fit(features real[], k int, params jsonb) */
Datum
gbml_kmeans_fit_trans(PG_FUNCTION_ARGS)
{
	return fit_trans(fcinfo, "kmeans", 1, -1, -1, -1, PG_NARGS() > 3 ? 3 : -1, 2);
}

/* saga_fit(features real[], label real [, weight real], params jsonb) */
Datum
gbml_saga_fit_trans(PG_FUNCTION_ARGS)
{
	int			nargs = PG_NARGS();

	if (nargs == 5)
		return fit_trans(fcinfo, "saga", 1, 2, -1, 3, 4, -1);
	if (nargs == 4)
		return fit_trans(fcinfo, "saga", 1, 2, -1, -1, 3, -1);
	return fit_trans(fcinfo, "saga", 1, 2, -1, -1, -1, -1);
}

/* mean_fit(features real[], label real, params jsonb): the machinery's test model */
Datum
gbml_mean_fit_trans(PG_FUNCTION_ARGS)
{
	return fit_trans(fcinfo, "mean", 1, 2, -1, -1, PG_NARGS() > 3 ? 3 : -1, -1);
}

/* ---- the whole-row forms: features from the row's columns (columns.c) ---- */

/* Binds the state to the first row's type: its feature columns, label, group and weight. */
static void
bind_row_type(fit_state *st, HeapTupleHeader th)
{
	const gbml_common_params *cp = &st->params.common;
	MemoryContext old = MemoryContextSwitchTo(st->mcxt);
	TupleDesc	td = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(th), HeapTupleHeaderGetTypMod(th));
	HeapTupleData tup;

	st->row_td = CreateTupleDescCopy(td);
	ReleaseTupleDesc(td);
	st->row_values = palloc(sizeof(Datum) * Max(st->row_td->natts, 1));
	st->row_nulls = palloc(sizeof(bool) * Max(st->row_td->natts, 1));
	tup.t_len = HeapTupleHeaderGetDatumLength(th);
	ItemPointerSetInvalid(&tup.t_self);
	tup.t_tableOid = InvalidOid;
	tup.t_data = th;
	heap_deform_tuple(&tup, st->row_td, st->row_values, st->row_nulls);
	st->columns = gbml_column_plan_for_rows(cp, st->row_td, st->row_values, st->row_nulls, st->what);
	st->row_x = palloc(sizeof(float) * gbml_column_plan_n_features(st->columns));
	/* a trainer without labels (K-Means) leaves a "label" column out of its features and reads nothing of it */
	st->label_att = (st->input_flags & GBML_INPUT_LABEL) ? gbml_attno(st->row_td, cp->label_column) : 0;
	st->group_att = gbml_attno(st->row_td, cp->group_column);
	st->weight_att = gbml_attno(st->row_td, cp->weight_column);
	if ((st->input_flags & GBML_INPUT_LABEL) && st->label_att == 0)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
						errmsg("%s: the row has no column \"%s\"", st->what, cp->label_column),
						errhint("Name the label column \"label\" or pass {\"label_column\": \"...\"}.")));
	gbml_check_target_columns(cp, st->row_td, (st->input_flags & GBML_INPUT_LABEL) != 0, st->what);
	st->ds.schema = gbml_column_plan_schema(st->columns);
	/*
	 * Categorical ids are numbered as first seen and renumbered before
	 * training (gbml_column_plan_sort_categories).  Rows past the budget
	 * still go to temporary files, which renumber them as they are read,
	 * but not grouped by hash as they come (a row's hash changes with its
	 * ids).  The GPU's store does not renumber: rows that would stream to
	 * it go to temporary files instead, as on the CPU (the GPU trains from
	 * them).
	 */
	if (gbml_schema_n_categorical(st->ds.schema) > 0)
	{
		if (st->ds.store_open != NULL && st->ds.store_open != gbml_chunk_store_file_open)
		{
			st->ds.store_open = NULL;
			gbml_plan_spill(st->params.algo, &st->env, &st->ds);
		}
		st->ds.spill_by_hash = false;
		/* a NULL category arrives as NaN, its own category (numbers are checked by column) */
		st->ds.allow_missing = true;
	}
	MemoryContextSwitchTo(old);
}

static int64
group_value(Datum d, Oid type)
{
	switch (getBaseType(type))
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		case INT8OID:
			return DatumGetInt64(d);
		case NUMERICOID:		/* as gbml.train's ::bigint: rounded, an ERROR past bigint */
			return DatumGetInt64(DirectFunctionCall1(numeric_int8, d));
	}
	elog(ERROR, "gbml: group column of type %u", type);	/* gbml_check_target_columns refused it */
	return 0;
}

static Datum
fit_row_trans(FunctionCallInfo fcinfo, const char *algo_name, int params_arg, int k_arg)
{
	MemoryContext aggctx = agg_context_or_error(fcinfo, algo_name);
	fit_state  *st = PG_ARGISNULL(0) ? NULL : (fit_state *) PG_GETARG_POINTER(0);
	HeapTupleHeader th;
	HeapTupleData tup;
	gbml_row	row;
	int64		rowno;

	if (PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("gbml.%s_fit: the row is NULL", algo_name)));
	th = PG_GETARG_HEAPTUPLEHEADER(1);
	if (st == NULL)
	{
		Jsonb	   *params = !PG_ARGISNULL(params_arg) ? PG_GETARG_JSONB_P(params_arg) : NULL;
		int32		k = k_arg >= 0 && !PG_ARGISNULL(k_arg) ? PG_GETARG_INT32(k_arg) : 0;

		if (k_arg >= 0 && k < 1)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("gbml.kmeans_fit: k must be at least 1")));
		st = state_create(aggctx, algorithm_or_error(algo_name), params, k, false);
		note_stable_arguments(fcinfo, st, params_arg, k_arg);
		bind_row_type(st, th);
	}
	else if (HeapTupleHeaderGetTypeId(th) != st->row_td->tdtypeid)
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH), errmsg("%s: rows of different types", st->what)));
	rowno = st->ds.n_rows + 1;
	if (rowno > 1)
		check_same_arguments(fcinfo, st, params_arg, k_arg, rowno);
	tup.t_len = HeapTupleHeaderGetDatumLength(th);
	ItemPointerSetInvalid(&tup.t_self);
	tup.t_tableOid = InvalidOid;
	tup.t_data = th;
	heap_deform_tuple(&tup, st->row_td, st->row_values, st->row_nulls);
	gbml_column_plan_collect(st->columns, st->row_values, st->row_nulls, st->row_x,
							 (st->input_flags & GBML_INPUT_MISSING) != 0, st->what, rowno);
	memset(&row, 0, sizeof(row));
	row.x = st->row_x;
	row.n_features = gbml_column_plan_n_features(st->columns);
	row.label_is_null = st->label_att == 0 || st->row_nulls[st->label_att - 1];
	if (!row.label_is_null)
		row.label = gbml_column_number(st->row_values[st->label_att - 1],
									   getBaseType(TupleDescAttr(st->row_td, st->label_att - 1)->atttypid));
	row.group_is_null = st->group_att == 0 || st->row_nulls[st->group_att - 1];
	if (!row.group_is_null)
		row.group = group_value(st->row_values[st->group_att - 1], TupleDescAttr(st->row_td, st->group_att - 1)->atttypid);
	row.weight_is_null = st->weight_att == 0 || st->row_nulls[st->weight_att - 1];
	if (!row.weight_is_null)
		row.weight = gbml_column_number(st->row_values[st->weight_att - 1],
										getBaseType(TupleDescAttr(st->row_td, st->weight_att - 1)->atttypid));
	GBML_CHECK(&st->env, gbml_dataset_append(&st->ds, &st->env, &row,
											 (st->input_flags & GBML_INPUT_LABEL) != 0), st->what);
	PG_RETURN_POINTER(st);
}

/* boost_fit(input record, params jsonb) */
Datum
gbml_boost_fit_row_trans(PG_FUNCTION_ARGS)
{
	return fit_row_trans(fcinfo, "boost", 2, -1);
}

/* kmeans_fit(input record, k integer, params jsonb) */
Datum
gbml_kmeans_fit_row_trans(PG_FUNCTION_ARGS)
{
	return fit_row_trans(fcinfo, "kmeans", 3, 2);
}

/* saga_fit(input record, params jsonb) */
Datum
gbml_saga_fit_row_trans(PG_FUNCTION_ARGS)
{
	return fit_row_trans(fcinfo, "saga", 2, -1);
}

Datum
gbml_fit_final(PG_FUNCTION_ARGS)
{
	fit_state  *st;
	bytea	   *model;

	agg_context_or_error(fcinfo, "gbml fit final");
	if (PG_ARGISNULL(0))
		ereport(ERROR, (errcode(ERRCODE_NO_DATA),
						errmsg("gbml: no input rows to train on"),
						errhint("The aggregate's input (after WHERE) is empty.")));
	st = (fit_state *) PG_GETARG_POINTER(0);
	if (st->columns)
	{
		MemoryContext old = MemoryContextSwitchTo(st->mcxt);

		gbml_column_plan_sort_categories(st->columns, &st->ds, &st->env, st->what);
		MemoryContextSwitchTo(old);
	}
	model = gbml_train_to_bytea(&st->env, &st->params, &st->ds, NULL, st->what);
	PG_RETURN_BYTEA_P(model);
}

Datum
gbml_fit_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggctx = agg_context_or_error(fcinfo, "gbml fit combine");
	fit_state  *a = PG_ARGISNULL(0) ? NULL : (fit_state *) PG_GETARG_POINTER(0);
	fit_state  *b = PG_ARGISNULL(1) ? NULL : (fit_state *) PG_GETARG_POINTER(1);

	if (b == NULL)
		PG_RETURN_POINTER(a);
	if (a == NULL)
	{
		/* adopt b: its memory context becomes a child of our aggregate context */
		MemoryContextSetParent(b->mcxt, aggctx);
		PG_RETURN_POINTER(b);
	}
	if (a->k != b->k || !same_params(a->params_jsonb, b->params_jsonb))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s: the rows' params or k differ between parallel workers", a->what),
						errhint("One aggregate trains one model: give every row the same params and k.")));
	GBML_CHECK(&a->env, gbml_dataset_merge(&a->ds, &b->ds, &a->env), a->what);
	/* the budget follows the rows: a now frees what b allocated */
	a->env.memory_used += b->env.memory_used;
	b->env.memory_used = 0;
	/* b's chunks now belong to a but were allocated in b's context: keep it alive under a */
	MemoryContextSetParent(b->mcxt, a->mcxt);
	PG_RETURN_POINTER(a);
}

Datum
gbml_fit_serialize(PG_FUNCTION_ARGS)
{
	fit_state  *st = (fit_state *) PG_GETARG_POINTER(0);
	bytea	   *out;
	size_t		data_len;

	if (st->ds.store != NULL)
		elog(ERROR, "%s: a state whose rows streamed to the GPU cannot be serialized", st->what);
	data_len = gbml_dataset_serialized_size(&st->ds);
	uint32		plen = st->params_jsonb ? VARSIZE(st->params_jsonb) : 0;
	size_t		total = 16 + (size_t) plen + data_len;
	char	   *p;
	uint32		head[4];

	agg_context_or_error(fcinfo, "gbml fit serialize");
	if (total > MaxAllocSize - VARHDRSZ)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("%s: a parallel worker's partial state (%zu MB) exceeds the 1 GB a bytea can hold",
							   st->what, total >> 20),
						errhint("Run the training without parallel query: SET max_parallel_workers_per_gather = 0.")));
	/* one exact allocation, written once: partial states can be hundreds of MB */
	out = palloc(VARHDRSZ + total);
	SET_VARSIZE(out, VARHDRSZ + total);
	p = VARDATA(out);
	head[0] = STATE_MAGIC;
	head[1] = (uint32) st->algo->id;
	head[2] = (uint32) st->k;
	head[3] = plen;
	memcpy(p, head, 16);
	if (plen)
		memcpy(p + 16, st->params_jsonb, plen);
	gbml_dataset_finish_appends(&st->ds, &st->env);
	gbml_dataset_serialize_into(&st->ds, (uint8_t *) p + 16 + plen);
	PG_RETURN_BYTEA_P(out);
}

Datum
gbml_fit_deserialize(PG_FUNCTION_ARGS)
{
	MemoryContext aggctx = agg_context_or_error(fcinfo, "gbml fit deserialize");
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	const uint8 *p = (const uint8 *) VARDATA_ANY(in);
	size_t		len = VARSIZE_ANY_EXHDR(in);
	uint32		magic,
				algo_id,
				plen;
	int32		k;
	const gbml_algorithm *algo;
	Jsonb	   *params = NULL;
	fit_state  *st;

	if (len < 16)
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("gbml: corrupt aggregate state")));
	memcpy(&magic, p, 4);
	memcpy(&algo_id, p + 4, 4);
	memcpy(&k, p + 8, 4);
	memcpy(&plen, p + 12, 4);
	algo = gbml_algorithm_by_id((int) algo_id);
	if (magic != STATE_MAGIC || algo == NULL || plen > len - 16)
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("gbml: corrupt aggregate state")));
	if (plen)
	{
		params = palloc(plen);
		memcpy(params, p + 16, plen);
	}
	st = state_create(aggctx, algo, params, k, true);
	{
		bool		allow_missing = st->ds.allow_missing;

		GBML_CHECK(&st->env, gbml_dataset_deserialize(&st->ds, &st->env, p + 16 + plen, len - 16 - plen), st->what);
		st->ds.allow_missing = allow_missing;
	}
	PG_RETURN_POINTER(st);
}
