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
 * most FUNC_MAX_ARGS (100) arguments, so a row of more than 98 columns goes
 * in packs of up to 100: gbml._predict_columns(m, 't'::regtype,
 * gbml._column_pack(t.c1, ..., t.c100), gbml._column_pack(t.c101, ...)),
 * whose columns are read where the executor put them (column_pack.c).
 * Records that are not a table's rows keep the record path.  The rows of a
 * foreign table (or of a table with foreign partitions) get one more
 * argument, the row's tableoid: postgres_fdw ships an immutable call of a
 * listed extension to the remote server, where 't'::regtype would name that
 * server's type of the same name, but never a system column other than
 * ctid, so the call stays here and reads the fetched rows under this
 * server's names.
 */
#include "glue.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/supportnodes.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
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
PG_FUNCTION_INFO_V1(gbml_predict_classes_row_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_classes_row_name);
PG_FUNCTION_INFO_V1(gbml_predict_classes_columns_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_classes_columns_name);

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
	int			n_call_args;	/* the columns forms: the call's arguments but a last tableoid (see the top) */
	bool		args_checked;	/* the columns forms: the call's argument types match the row type */
	bool		packed;			/* the columns forms: the columns come in gbml._column_pack arguments */
	int		   *pack_first;		/* packed: argument i's first live column (0-based) */
	int		   *pack_n;			/* packed: argument i's number of columns */
	const NullableDatum **pack_base;	/* packed: where argument i's columns were last row */
	int		   *col_pack;		/* packed: plan column c's pack (its argument position) */
	int		   *col_k;			/* packed: and its index in that pack */
	const NullableDatum **col;	/* the columns forms: where plan column c's value is */
	FunctionCallInfo col_fcinfo;	/* unpacked: the argument array `col` points into */
	Datum	   *values;
	bool	   *nulls;
	float	   *x;
	Datum		classes;		/* GBML_OUT_CLASSES: this row's probabilities (a float8[] of the row's context) */
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
	rc->col = palloc(sizeof(NullableDatum *) * Max(gbml_column_plan_n_columns(rc->plan), 1));
	rc->col_fcinfo = NULL;
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
	rc->packed = false;
}

/* The model of this call site, with an ERROR when it does not give `what`. */
static const gbml_scorer *
model_of(FunctionCallInfo fcinfo, row_cache *rc, bool by_name, gbml_output what, const char *fname, bool *reloaded)
{
	const gbml_scorer *sc = by_name ? gbml_named_scorer_in(fcinfo, fname, &rc->model_slot, reloaded)
		: gbml_cached_scorer_in(fcinfo, 0, &rc->model_slot, reloaded);
	gbml_env	env;

	if (!gbml_scorer_gives(sc, what))
	{
		/* (the check's message) */
		gbml_env_init_malloc(&env, 1);
		(void) gbml_scorer_check_output(sc, &env, what);
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("%s: %s", fname, env.error)));
	}
	return sc;
}

/*
 * A model without missing values (K-Means, SAGA) and a numeric feature that
 * is not finite: the ERROR naming its column, NULL told from a NaN value by
 * the row's flags (from_args: rc->col, the columns forms'; else rc->nulls
 * by attribute), as the array form refuses a NaN or an infinity.
 */
static pg_attribute_noreturn() void
row_not_finite(const gbml_scorer *sc, row_cache *rc, int j, bool from_args, const char *fname)
{
	int			n = gbml_column_plan_n_columns(rc->plan);
	bool	   *column_null = palloc(sizeof(bool) * Max(n, 1));

	for (int i = 0; i < n; i++)
		column_null[i] = from_args ? rc->col[i]->isnull : rc->nulls[gbml_column_plan_attno(rc->plan, i) - 1];
	gbml_column_plan_not_finite(rc->plan, rc->x, j, column_null, sc->algo->name, fname);
}

/* rc->x (converted by the caller: from_args, from rc->col) scored. */
static double
score_bound(const gbml_scorer *sc, row_cache *rc, gbml_output what, bool from_args, const char *fname)
{
	if (!(sc->algo->input_flags & GBML_INPUT_MISSING))
		for (int j = 0; j < sc->n_features; j++)
			if (!isfinite(rc->x[j]) && !gbml_feature_is_categorical(sc->schema, j))
				row_not_finite(sc, rc, j, from_args, fname);
	if (what == GBML_OUT_CLASSES)
	{
		rc->classes = gbml_class_probabilities(sc, rc->x);
		return 0;
	}
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
	return score_bound(sc, rc, what, false, fname);
}

/*
 * Where the plan's columns are in the packs (bind time, from the call's
 * expression): each pack argument's first live column and count, then per
 * plan column its pack and its index there.
 */
static void
bind_packs(FunctionCallInfo fcinfo, row_cache *rc)
{
	List	   *args = ((FuncExpr *) fcinfo->flinfo->fn_expr)->args;
	MemoryContext old = MemoryContextSwitchTo(rc->bind_mcxt);
	int			n = gbml_column_plan_n_columns(rc->plan);
	int			first = 0;

	rc->pack_first = palloc(sizeof(int) * rc->n_call_args);
	rc->pack_n = palloc(sizeof(int) * rc->n_call_args);
	rc->pack_base = palloc0(sizeof(NullableDatum *) * rc->n_call_args);
	rc->col_pack = palloc(sizeof(int) * (n > 0 ? n : 1));
	rc->col_k = palloc(sizeof(int) * (n > 0 ? n : 1));
	MemoryContextSwitchTo(old);

	for (int i = 2; i < rc->n_call_args; i++)
	{
		rc->pack_first[i] = first;
		rc->pack_n[i] = list_length(((FuncExpr *) list_nth(args, i))->args);
		first += rc->pack_n[i];
	}
	for (int c = 0; c < n; c++)
	{
		int			i = 2,
					live = rc->src[c] - 2;

		while (i < rc->n_call_args - 1 && live >= rc->pack_first[i] + rc->pack_n[i])
			i++;
		rc->col_pack[c] = i;
		rc->col_k[c] = live - rc->pack_first[i];
	}
}

/*
 * rc->col for this row of the packed form: each pack's columns where its
 * call left them (checked to be this row's, every row), re-pointed when a
 * pack's argument array is not last row's.
 */
static void
point_packed_columns(FunctionCallInfo fcinfo, row_cache *rc, const char *fname)
{
	bool		moved = false;

	for (int i = 2; i < rc->n_call_args; i++)
	{
		const NullableDatum *base = gbml_column_pack_args(fcinfo, i, rc->pack_n[i], fname);

		moved |= base != rc->pack_base[i];
		rc->pack_base[i] = base;
	}
	if (moved)
		for (int c = 0; c < gbml_column_plan_n_columns(rc->plan); c++)
			rc->col[c] = rc->pack_base[rc->col_pack[c]] + rc->col_k[c];
}

/* rc->col for the unpacked form: plan column c is argument src[c] of the call's argument array. */
static void
point_columns(FunctionCallInfo fcinfo, row_cache *rc)
{
	for (int c = 0; c < gbml_column_plan_n_columns(rc->plan); c++)
		rc->col[c] = &fcinfo->args[rc->src[c]];
	rc->col_fcinfo = fcinfo;
}

/* gbml._column_pack(VARIADIC "any"), InvalidOid before the extension has it (0.5.0). */
static Oid
column_pack_function(void)
{
	Oid			argtypes[1] = {ANYOID};

	return LookupFuncName(list_make2(makeString("gbml"), makeString("_column_pack")), 1, argtypes, true);
}

/*
 * The packed columns form: true when every argument after the row type is
 * a gbml._column_pack call and, together, their arguments are the row
 * type's live columns with its types (then the packs hold those values, in
 * that order); false when no argument is a pack.  A mix is an ERROR.
 */
static bool
check_packed_args(FunctionCallInfo fcinfo, row_cache *rc, const char *fname)
{
	Node	   *call = fcinfo->flinfo->fn_expr;
	Oid			pack = column_pack_function();
	List	   *columns = NIL;
	int			a = 0;
	ListCell   *lc;

	if (call == NULL || !IsA(call, FuncExpr) || !OidIsValid(pack))
		return false;
	for (int i = 2; i < rc->n_call_args; i++)
	{
		Node	   *arg = list_nth(((FuncExpr *) call)->args, i);

		if (!IsA(arg, FuncExpr) || ((FuncExpr *) arg)->funcid != pack)
		{
			if (i == 2)
				return false;
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("%s: argument %d is not a gbml._column_pack call like the ones before it", fname,
								   i + 1)));
		}
		columns = list_concat(columns, ((FuncExpr *) arg)->args);
	}
	foreach(lc, columns)
	{
		while (a < rc->natts && TupleDescAttr(rc->td, a)->attisdropped)
			a++;
		if (a == rc->natts || exprType(lfirst(lc)) != TupleDescAttr(rc->td, a)->atttypid)
			break;
		a++;
	}
	while (a < rc->natts && TupleDescAttr(rc->td, a)->attisdropped)
		a++;
	if (lc != NULL || a != rc->natts || list_length(columns) != rc->n_args - 2)
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("%s: the packed columns are not row type %s's %d columns with their types", fname,
							   format_type_be(rc->row_type), rc->n_args - 2)));
	rc->packed = true;
	rc->args_checked = true;
	bind_packs(fcinfo, rc);
	return true;
}

/* Whether the call's last argument is a row's tableoid, the support function's mark of foreign rows. */
static bool
ends_with_tableoid(FunctionCallInfo fcinfo)
{
	Node	   *call = fcinfo->flinfo->fn_expr;
	Node	   *last;

	if (call == NULL || !IsA(call, FuncExpr) || list_length(((FuncExpr *) call)->args) != PG_NARGS())
		return false;
	last = llast(((FuncExpr *) call)->args);
	return IsA(last, Var) && ((Var *) last)->varattno == TableOidAttributeNumber;
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
	rc->n_call_args = PG_NARGS() - (ends_with_tableoid(fcinfo) ? 1 : 0);
	if (rc->n_call_args != rc->n_args && check_packed_args(fcinfo, rc, fname))
		return;
	if (rc->n_call_args != rc->n_args)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s: %d columns passed for row type %s of %d columns", fname, rc->n_call_args - 2,
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
	if (rc->packed)
		point_packed_columns(fcinfo, rc, fname);
	else if (rc->col_fcinfo != fcinfo)
		point_columns(fcinfo, rc);
	gbml_column_plan_args(rc->plan, rc->col, rc->x, fname);
	return score_bound(sc, rc, what, true, fname);
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

/* gbml.predict_classes on a whole row: the record and columns forms (element c + 1: class c's probability). */
Datum
gbml_predict_classes_row_bytea(PG_FUNCTION_ARGS)
{
	(void) score_record(fcinfo, false, GBML_OUT_CLASSES, "gbml.predict_classes");
	PG_RETURN_DATUM(cache_of(fcinfo)->classes);
}

Datum
gbml_predict_classes_row_name(PG_FUNCTION_ARGS)
{
	(void) score_record(fcinfo, true, GBML_OUT_CLASSES, "gbml.predict_classes");
	PG_RETURN_DATUM(cache_of(fcinfo)->classes);
}

Datum
gbml_predict_classes_columns_bytea(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	(void) score_columns(fcinfo, false, GBML_OUT_CLASSES, "gbml.predict_classes");
	PG_RETURN_DATUM(cache_of(fcinfo)->classes);
}

Datum
gbml_predict_classes_columns_name(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	(void) score_columns(fcinfo, true, GBML_OUT_CLASSES, "gbml.predict_classes");
	PG_RETURN_DATUM(cache_of(fcinfo)->classes);
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

/* Vars of td's live columns, in order, for the whole-row Var row. */
static List *
column_vars(TupleDesc td, const Var *row)
{
	List	   *vars = NIL;

	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);

		if (!att->attisdropped)
			vars = lappend(vars, makeVar(row->varno, att->attnum, att->atttypid, att->atttypmod, att->attcollation,
										 row->varlevelsup));
	}
	return vars;
}

/* columns in gbml._column_pack calls of FUNC_MAX_ARGS each at most (NIL: the extension has no such function). */
static List *
pack_columns(List *columns)
{
	Oid			pack = column_pack_function();
	List	   *packs = NIL;

	if (!OidIsValid(pack))
		return NIL;
	for (int from = 0; from < list_length(columns); from += FUNC_MAX_ARGS)
	{
		int			to = Min(from + FUNC_MAX_ARGS, list_length(columns));
		List	   *part = list_copy_tail(list_truncate(list_copy(columns), to), from);

		packs = lappend(packs, makeFuncExpr(pack, BYTEAOID, part, InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL));
	}
	return packs;
}

/* Whether jointree node jt holds range table entry varno on the nullable side of an outer join. */
static bool
on_nullable_side(Node *jt, int varno, bool nullable)
{
	if (jt == NULL)
		return false;
	if (IsA(jt, RangeTblRef))
		return nullable && ((RangeTblRef *) jt)->rtindex == varno;
	if (IsA(jt, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) jt)->fromlist)
			if (on_nullable_side(lfirst(lc), varno, nullable))
				return true;
		return false;
	}
	if (IsA(jt, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) jt;

		return on_nullable_side(j->larg, varno, nullable || j->jointype == JOIN_RIGHT || j->jointype == JOIN_FULL) ||
			on_nullable_side(j->rarg, varno, nullable || j->jointype == JOIN_LEFT || j->jointype == JOIN_FULL ||
							 j->jointype == JOIN_ANTI);
	}
	return false;
}

/*
 * Whether the whole-row Var row may be an outer join's NULL-extended row:
 * a NULL record, on which the record forms (strict) give NULL, where its
 * columns would score as a row of NULLs.  Without the query (root NULL: an
 * expression planned on its own, no join around it) it cannot; a Var of an
 * outer query whose plan is not at hand might.
 */
static bool
row_may_be_null_extended(PlannerInfo *root, const Var *row)
{
	for (Index up = 0; up < row->varlevelsup && root != NULL; up++)
		root = root->parent_root;
	if (root == NULL)
		return row->varlevelsup > 0;
	return on_nullable_side((Node *) root->parse->jointree, (int) row->varno, false);
}

/*
 * Whether the whole-row Var row reads a foreign table's rows: a foreign
 * table's own, or a table's with a foreign partition or child (their Vars
 * are translated to each of them).  Without the query at hand, not.
 */
static bool
row_of_foreign_rows(PlannerInfo *root, const Var *row)
{
	RangeTblEntry *rte;
	ListCell   *lc;

	for (Index up = 0; up < row->varlevelsup && root != NULL; up++)
		root = root->parent_root;
	if (root == NULL || row->varno < 1 || row->varno > (int) list_length(root->parse->rtable))
		return false;
	rte = rt_fetch(row->varno, root->parse->rtable);
	if (rte->rtekind != RTE_RELATION)
		return false;
	if (rte->relkind == RELKIND_FOREIGN_TABLE)
		return true;
	if (!rte->inh || !has_subclass(rte->relid))
		return false;
	/* (the planner locks the children when it expands them; this only looks at their kind) */
	foreach(lc, find_all_inheritors(rte->relid, NoLock, NULL))
		if (get_rel_relkind(lfirst_oid(lc)) == RELKIND_FOREIGN_TABLE)
			return true;
	return false;
}

/*
 * Planner support for the record forms: a whole-row Var of a table's row
 * type becomes that table's columns, one argument each (see the top), unless
 * an outer join may make it NULL; a foreign table's rows add their tableoid.
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
	bool		foreign;

	if (!IsA(req, SupportRequestSimplify))
		PG_RETURN_POINTER(NULL);
	f = ((SupportRequestSimplify *) req)->fcall;
	if (list_length(f->args) != 2 || !IsA(lsecond(f->args), Var))
		PG_RETURN_POINTER(NULL);
	row = lsecond(f->args);
	if (row->varattno != 0 || !OidIsValid(get_typ_typrelid(row->vartype)) ||
		row_may_be_null_extended(((SupportRequestSimplify *) req)->root, row))
		PG_RETURN_POINTER(NULL);
	target = columns_function(f->funcid, exprType(linitial(f->args)));
	if (!OidIsValid(target))
		PG_RETURN_POINTER(NULL);
	td = lookup_rowtype_tupdesc(row->vartype, -1);
	for (int a = 0; a < td->natts; a++)
		live += !TupleDescAttr(td, a)->attisdropped;
	args = list_make2(linitial(f->args),
					  makeConst(REGTYPEOID, -1, InvalidOid, sizeof(Oid), ObjectIdGetDatum(row->vartype), false, true));
	foreign = row_of_foreign_rows(((SupportRequestSimplify *) req)->root, row);
	if (live + 2 + foreign <= FUNC_MAX_ARGS)
		args = list_concat(args, column_vars(td, row));
	else
	{
		List	   *packs = pack_columns(column_vars(td, row));

		if (packs == NIL)
		{
			ReleaseTupleDesc(td);
			PG_RETURN_POINTER(NULL);	/* an extension before 0.5.0: the record path */
		}
		args = list_concat(args, packs);
	}
	ReleaseTupleDesc(td);
	if (foreign)
		args = lappend(args, makeVar(row->varno, TableOidAttributeNumber, OIDOID, -1, InvalidOid, row->varlevelsup));
	{
		FuncExpr   *n = makeFuncExpr(target, f->funcresulttype, args, InvalidOid, f->inputcollid, COERCE_EXPLICIT_CALL);

		n->location = f->location;
		PG_RETURN_POINTER(n);
	}
}
