/*
 * row_scoring.c — gbml.predict, predict_proba, kmeans_assign and
 * kmeans_distance on a whole row (`ORDER BY gbml.predict('churn', c)` with
 * c a table's alias), for models trained from columns.  The model's
 * features are matched to the row's columns by name once per query and row
 * type (columns.c), then every row is deformed once and converted with the
 * functions training used.
 *
 * A whole-row argument costs PostgreSQL a new tuple per row (it deforms the
 * scanned row and forms a composite datum of every column, 2-3 us for 100
 * columns, more than scoring 100 trees).  So the record forms have a planner
 * support function that rewrites gbml.predict(m, t), t a table's whole row,
 * into gbml._predict_columns(m, 't'::regtype, t.c1, t.c2, ...): the columns
 * go as separate arguments straight from the scan slot.  A function takes at
 * most FUNC_MAX_ARGS (100) arguments, so rows of more than 98 columns, and
 * records that are not a table's rows, keep the record path.
 */
#include "glue.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/supportnodes.h"
#include "parser/parse_func.h"
#include "utils/lsyscache.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#include "schema.h"

PG_FUNCTION_INFO_V1(gbml_predict_row_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_proba_row_bytea);
PG_FUNCTION_INFO_V1(gbml_kmeans_assign_row_bytea);
PG_FUNCTION_INFO_V1(gbml_kmeans_distance_row_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_row_name);
PG_FUNCTION_INFO_V1(gbml_predict_proba_row_name);
PG_FUNCTION_INFO_V1(gbml_kmeans_assign_row_name);
PG_FUNCTION_INFO_V1(gbml_kmeans_distance_row_name);
PG_FUNCTION_INFO_V1(gbml_row_support);
PG_FUNCTION_INFO_V1(gbml_predict_columns_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_proba_columns_bytea);
PG_FUNCTION_INFO_V1(gbml_kmeans_assign_columns_bytea);
PG_FUNCTION_INFO_V1(gbml_kmeans_distance_columns_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_columns_name);
PG_FUNCTION_INFO_V1(gbml_predict_proba_columns_name);
PG_FUNCTION_INFO_V1(gbml_kmeans_assign_columns_name);
PG_FUNCTION_INFO_V1(gbml_kmeans_distance_columns_name);

/* What one call site keeps across rows: the model's cache, and the binding to the row type. */
typedef struct row_cache
{
	void	   *model_slot;		/* convert.c's or scoring.c's model cache */
	MemoryContext bind_mcxt;
	Oid			row_type;		/* the bound row type and typmod (InvalidOid: none) */
	int32		row_typmod;
	gbml_column_plan *plan;
	TupleDesc	td;				/* a copy of the row type's descriptor, to deform rows with */
	int			natts;
	int		   *src;			/* the columns forms: plan column i's argument */
	int			n_args;			/* the columns forms: 2 + the row type's live attributes */
	bool		args_checked;	/* the columns forms: the call's argument types match the row type */
	Datum	   *values;
	bool	   *nulls;
	float	   *x;
} row_cache;

static row_cache *
cache_of(FunctionCallInfo fcinfo)
{
	row_cache  *rc = fcinfo->flinfo->fn_extra;

	if (rc == NULL)
	{
		rc = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(row_cache));
		rc->bind_mcxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "gbml row binding", ALLOCSET_SMALL_SIZES);
		fcinfo->flinfo->fn_extra = rc;
	}
	return rc;
}

/* (Re)binds the model's features to a row type when the model or the row type changed. */
static void
bind_row(row_cache *rc, const gbml_scorer *sc, bool reloaded, Oid type, int32 typmod, const char *fname)
{
	TupleDesc	td;
	MemoryContext old;

	if (!reloaded && rc->plan != NULL && rc->row_type == type && rc->row_typmod == typmod)
		return;
	if (sc->schema == NULL)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("%s: the model was trained on a features array, not on named columns", fname),
						errhint("Score it with the array form: %s(model, features real[]).", fname)));
	MemoryContextReset(rc->bind_mcxt);
	rc->plan = NULL;
	td = lookup_rowtype_tupdesc(type, typmod);
	old = MemoryContextSwitchTo(rc->bind_mcxt);
	rc->td = CreateTupleDescCopy(td);
	MemoryContextSwitchTo(old);
	ReleaseTupleDesc(td);
	old = MemoryContextSwitchTo(rc->bind_mcxt);
	rc->plan = gbml_column_plan_for_row(sc->schema, rc->td, fname);
	rc->natts = rc->td->natts;
	rc->values = palloc(sizeof(Datum) * (rc->natts > 0 ? rc->natts : 1));
	rc->nulls = palloc(sizeof(bool) * (rc->natts > 0 ? rc->natts : 1));
	rc->x = palloc(sizeof(float) * (sc->n_features > 0 ? sc->n_features : 1));
	{
		/* the columns forms pass every live attribute in order after the model and the row type */
		int		   *arg_of_att = palloc(sizeof(int) * (rc->natts > 0 ? rc->natts : 1));
		int			n = gbml_column_plan_n_columns(rc->plan);

		rc->n_args = 2;
		for (int a = 0; a < rc->natts; a++)
			arg_of_att[a] = TupleDescAttr(rc->td, a)->attisdropped ? -1 : rc->n_args++;
		rc->src = palloc(sizeof(int) * (n > 0 ? n : 1));
		for (int i = 0; i < n; i++)
			rc->src[i] = arg_of_att[gbml_column_plan_attno(rc->plan, i) - 1];
	}
	MemoryContextSwitchTo(old);
	rc->row_type = type;
	rc->row_typmod = typmod;
	rc->args_checked = false;
}

/* The model of this call site, with an ERROR when it does not give `what`. */
static const gbml_scorer *
model_of(FunctionCallInfo fcinfo, row_cache *rc, bool by_name, gbml_output what, const char *fname, bool *reloaded)
{
	const gbml_scorer *sc = by_name ? gbml_named_scorer_in(fcinfo, fname, &rc->model_slot, reloaded)
		: gbml_cached_scorer_in(fcinfo, 0, &rc->model_slot, reloaded);
	gbml_env	env;
	double		out;

	if (!(sc->algo->outputs & what))
	{
		gbml_env_init_malloc(&env, 1);
		(void) gbml_scorer_predict(sc, &env, NULL, sc->n_features, what, &out);
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("%s: %s", fname, env.error)));
	}
	return sc;
}

/* rc->x (converted by the caller) scored. */
static double
score_bound(const gbml_scorer *sc, row_cache *rc, gbml_output what, const char *fname)
{
	if (!(sc->algo->input_flags & GBML_INPUT_MISSING))
		for (int j = 0; j < sc->n_features; j++)
			if (isnan(rc->x[j]) && !gbml_feature_is_categorical(sc->schema, j))
				ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
								errmsg("%s: feature \"%s\" is NULL; a %s model needs every numeric feature", fname,
									   sc->schema->features[j].name, sc->algo->name)));
	return sc->algo->predict(sc->handle, rc->x, what);
}

static double
score_record(FunctionCallInfo fcinfo, bool by_name, gbml_output what, const char *fname)
{
	row_cache  *rc = cache_of(fcinfo);
	bool		reloaded;
	const gbml_scorer *sc = model_of(fcinfo, rc, by_name, what, fname, &reloaded);
	HeapTupleHeader th = PG_GETARG_HEAPTUPLEHEADER(1);
	HeapTupleData tup;

	bind_row(rc, sc, reloaded, HeapTupleHeaderGetTypeId(th), HeapTupleHeaderGetTypMod(th), fname);
	tup.t_len = HeapTupleHeaderGetDatumLength(th);
	ItemPointerSetInvalid(&tup.t_self);
	tup.t_tableOid = InvalidOid;
	tup.t_data = th;
	heap_deform_tuple(&tup, rc->td, rc->values, rc->nulls);
	gbml_column_plan_values(rc->plan, rc->values, rc->nulls, rc->x, fname);
	return score_bound(sc, rc, what, fname);
}

/*
 * The columns forms are callable by hand too: their arguments must be the
 * row type's live columns with its types, or a value would be read as
 * another type's datum.  Checked once per binding, from the call's
 * expression.
 */
static void
check_column_args(FunctionCallInfo fcinfo, row_cache *rc, const char *fname)
{
	if (PG_NARGS() != rc->n_args)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s: %d columns passed for row type %s of %d columns", fname, PG_NARGS() - 2,
							   format_type_be(rc->row_type), rc->n_args - 2)));
	for (int a = 0, arg = 2; a < rc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(rc->td, a);

		if (att->attisdropped)
			continue;
		if (get_fn_expr_argtype(fcinfo->flinfo, arg) != att->atttypid)
			ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
							errmsg("%s: argument %d is not of column \"%s\"'s type %s", fname, arg + 1,
								   NameStr(att->attname), format_type_be(att->atttypid))));
		arg++;
	}
	rc->args_checked = true;
}

/*
 * The columns forms (the support function's rewrite): argument 1 is the row
 * type, then one argument per column of it that is not dropped.
 */
static double
score_columns(FunctionCallInfo fcinfo, bool by_name, gbml_output what, const char *fname)
{
	row_cache  *rc = cache_of(fcinfo);
	bool		reloaded;
	const gbml_scorer *sc = model_of(fcinfo, rc, by_name, what, fname, &reloaded);

	bind_row(rc, sc, reloaded, PG_GETARG_OID(1), -1, fname);
	if (!rc->args_checked)
		check_column_args(fcinfo, rc, fname);
	gbml_column_plan_args(rc->plan, fcinfo->args, rc->src, rc->x, fname);
	return score_bound(sc, rc, what, fname);
}

Datum
gbml_predict_row_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, false, GBML_OUT_SCORE, "gbml.predict"));
}

Datum
gbml_predict_proba_row_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, false, GBML_OUT_PROBA, "gbml.predict_proba"));
}

Datum
gbml_kmeans_assign_row_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32((int32) score_record(fcinfo, false, GBML_OUT_CLUSTER, "gbml.kmeans_assign"));
}

Datum
gbml_kmeans_distance_row_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, false, GBML_OUT_DISTANCE, "gbml.kmeans_distance"));
}

Datum
gbml_predict_row_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, true, GBML_OUT_SCORE, "gbml.predict"));
}

Datum
gbml_predict_proba_row_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, true, GBML_OUT_PROBA, "gbml.predict_proba"));
}

Datum
gbml_kmeans_assign_row_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32((int32) score_record(fcinfo, true, GBML_OUT_CLUSTER, "gbml.kmeans_assign"));
}

Datum
gbml_kmeans_distance_row_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, true, GBML_OUT_DISTANCE, "gbml.kmeans_distance"));
}

Datum
gbml_predict_columns_bytea(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, false, GBML_OUT_SCORE, "gbml.predict"));
}

Datum
gbml_predict_proba_columns_bytea(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, false, GBML_OUT_PROBA, "gbml.predict_proba"));
}

Datum
gbml_kmeans_assign_columns_bytea(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_INT32((int32) score_columns(fcinfo, false, GBML_OUT_CLUSTER, "gbml.kmeans_assign"));
}

Datum
gbml_kmeans_distance_columns_bytea(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, false, GBML_OUT_DISTANCE, "gbml.kmeans_distance"));
}

Datum
gbml_predict_columns_name(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, true, GBML_OUT_SCORE, "gbml.predict"));
}

Datum
gbml_predict_proba_columns_name(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, true, GBML_OUT_PROBA, "gbml.predict_proba"));
}

Datum
gbml_kmeans_assign_columns_name(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_INT32((int32) score_columns(fcinfo, true, GBML_OUT_CLUSTER, "gbml.kmeans_assign"));
}

Datum
gbml_kmeans_distance_columns_name(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, true, GBML_OUT_DISTANCE, "gbml.kmeans_distance"));
}

/*
 * gbml._<function>_columns(model, row type, VARIADIC "any") for a record
 * form called on a table's whole row; InvalidOid when there is none.
 */
static Oid
columns_function(Oid funcid, Oid model_type)
{
	char	   *proname = get_func_name(funcid);
	Oid			argtypes[3] = {model_type, REGTYPEOID, ANYOID};

	if (proname == NULL)
		return InvalidOid;
	return LookupFuncName(list_make2(makeString("gbml"), makeString(psprintf("_%s_columns", proname))), 3, argtypes,
						  true);
}

/*
 * Planner support for the record forms: a whole-row Var of a table's row
 * type becomes that table's columns, one argument each (see the top).
 */
Datum
gbml_row_support(PG_FUNCTION_ARGS)
{
	Node	   *req = (Node *) PG_GETARG_POINTER(0);
	FuncExpr   *f;
	Var		   *row;
	TupleDesc	td;
	List	   *args;
	Oid			target;
	int			live = 0;

	if (!IsA(req, SupportRequestSimplify))
		PG_RETURN_POINTER(NULL);
	f = ((SupportRequestSimplify *) req)->fcall;
	if (list_length(f->args) != 2 || !IsA(lsecond(f->args), Var))
		PG_RETURN_POINTER(NULL);
	row = lsecond(f->args);
	if (row->varattno != 0 || !OidIsValid(get_typ_typrelid(row->vartype)))
		PG_RETURN_POINTER(NULL);
	target = columns_function(f->funcid, exprType(linitial(f->args)));
	if (!OidIsValid(target))
		PG_RETURN_POINTER(NULL);
	td = lookup_rowtype_tupdesc(row->vartype, -1);
	for (int a = 0; a < td->natts; a++)
		live += !TupleDescAttr(td, a)->attisdropped;
	if (live + 2 > FUNC_MAX_ARGS)
	{
		ReleaseTupleDesc(td);
		PG_RETURN_POINTER(NULL);
	}
	args = list_make2(linitial(f->args),
					  makeConst(REGTYPEOID, -1, InvalidOid, sizeof(Oid), ObjectIdGetDatum(row->vartype), false, true));
	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);

		if (!att->attisdropped)
			args = lappend(args, makeVar(row->varno, att->attnum, att->atttypid, att->atttypmod, att->attcollation,
										 row->varlevelsup));
	}
	ReleaseTupleDesc(td);
	{
		FuncExpr   *n = makeFuncExpr(target, f->funcresulttype, args, InvalidOid, f->inputcollid, COERCE_EXPLICIT_CALL);

		n->location = f->location;
		PG_RETURN_POINTER(n);
	}
}
