/*
 * row_scoring.c — gbml.predict, predict_proba, kmeans_assign and
 * kmeans_distance on a whole row (`ORDER BY gbml.predict('churn', c)` with
 * c a table's alias), for models trained from columns.  The model's
 * features are matched to the row's columns by name once per query and row
 * type (columns.c), then every row is deformed once and converted with the
 * functions training used.
 */
#include "glue.h"

#include <math.h>

#include "access/htup_details.h"
#include "funcapi.h"
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

/* (Re)binds the model's features to the row type of th when the model or the row type changed. */
static void
bind_row(row_cache *rc, const gbml_scorer *sc, bool reloaded, HeapTupleHeader th, const char *fname)
{
	Oid			type = HeapTupleHeaderGetTypeId(th);
	int32		typmod = HeapTupleHeaderGetTypMod(th);
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
	MemoryContextSwitchTo(old);
	rc->row_type = type;
	rc->row_typmod = typmod;
}

static double
score_record(FunctionCallInfo fcinfo, bool by_name, gbml_output what, const char *fname)
{
	row_cache  *rc = cache_of(fcinfo);
	bool		reloaded;
	const gbml_scorer *sc = by_name ? gbml_named_scorer_in(fcinfo, fname, &rc->model_slot, &reloaded)
		: gbml_cached_scorer_in(fcinfo, 0, &rc->model_slot, &reloaded);
	HeapTupleHeader th = PG_GETARG_HEAPTUPLEHEADER(1);
	HeapTupleData tup;
	gbml_env	env;
	double		out;

	if (!(sc->algo->outputs & what))
	{
		gbml_env_init_malloc(&env, 1);
		(void) gbml_scorer_predict(sc, &env, NULL, sc->n_features, what, &out);
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("%s: %s", fname, env.error)));
	}
	bind_row(rc, sc, reloaded, th, fname);
	tup.t_len = HeapTupleHeaderGetDatumLength(th);
	ItemPointerSetInvalid(&tup.t_self);
	tup.t_tableOid = InvalidOid;
	tup.t_data = th;
	heap_deform_tuple(&tup, rc->td, rc->values, rc->nulls);
	gbml_column_plan_values(rc->plan, rc->values, rc->nulls, rc->x, fname);
	if (!(sc->algo->input_flags & GBML_INPUT_MISSING))
		for (int j = 0; j < sc->n_features; j++)
			if (isnan(rc->x[j]) && !gbml_feature_is_categorical(sc->schema, j))
				ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
								errmsg("%s: feature \"%s\" is NULL; a %s model needs every numeric feature", fname,
									   sc->schema->features[j].name, sc->algo->name)));
	return sc->algo->predict(sc->handle, rc->x, what);
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
