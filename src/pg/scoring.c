/*
 * scoring.c — gbml.predict, gbml.predict_proba, gbml.predict_classes,
 * gbml.kmeans_assign and gbml.kmeans_distance, on a model bytea or on the deployed version of a
 * named model.  The model is parsed once per query (fn_extra cache, keyed by
 * its header: length, algorithm and checksum) and a name is looked up once
 * per query, never per row.
 */
#include "glue.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(gbml_predict_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_proba_bytea);
PG_FUNCTION_INFO_V1(gbml_kmeans_assign_bytea);
PG_FUNCTION_INFO_V1(gbml_kmeans_distance_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_name);
PG_FUNCTION_INFO_V1(gbml_predict_proba_name);
PG_FUNCTION_INFO_V1(gbml_kmeans_assign_name);
PG_FUNCTION_INFO_V1(gbml_kmeans_distance_name);
PG_FUNCTION_INFO_V1(gbml_predict_classes_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_classes_name);

static double
score_row(FunctionCallInfo fcinfo, const gbml_scorer *sc, gbml_output what, const char *fname)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(1);
	int			n;
	const float *x = gbml_float_array(arr, &n, fname, 0);
	double		out;
	gbml_env	env;


	if (!(sc->algo->input_flags & GBML_INPUT_MISSING))
		for (int j = 0; j < n; j++)
			if (!isfinite(x[j]))
				ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								errmsg("%s: feature %d is %s; a %s model needs finite features",
									   fname, j + 1, isnan(x[j]) ? "NaN" : "infinite", sc->algo->name)));
	if (gbml_scorer_gives(sc, what) && n == sc->n_features)
		return sc->algo->predict(sc->handle, x, what);
	/* slow path only to build the error message */
	gbml_env_init_malloc(&env, 1);
	if (gbml_scorer_predict(sc, &env, x, n, what, &out) != GBML_OK)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s: %s", fname, env.error)));
	return out;
}

Datum
gbml_predict_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_row(fcinfo, gbml_cached_scorer(fcinfo, 0), GBML_OUT_SCORE, "gbml.predict"));
}

Datum
gbml_predict_proba_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_row(fcinfo, gbml_cached_scorer(fcinfo, 0), GBML_OUT_PROBA, "gbml.predict_proba"));
}

Datum
gbml_kmeans_assign_bytea(PG_FUNCTION_ARGS)
{
	double		c = score_row(fcinfo, gbml_cached_scorer(fcinfo, 0), GBML_OUT_CLUSTER, "gbml.kmeans_assign");

	PG_RETURN_INT32((int32) c);
}

Datum
gbml_kmeans_distance_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_row(fcinfo, gbml_cached_scorer(fcinfo, 0), GBML_OUT_DISTANCE, "gbml.kmeans_distance"));
}

/* ---- by name: the deployed version, looked up once per query ---- */

typedef struct named_model
{
	char	   *name;			/* NULL until a version loaded */
	size_t		name_len;
	MemoryContext mcxt;
	gbml_env	env;
	gbml_scorer scorer;
} named_model;

static const gbml_scorer *
named_scorer(FunctionCallInfo fcinfo, const char *fname)
{
	return gbml_named_scorer_in(fcinfo, fname, &fcinfo->flinfo->fn_extra, NULL);
}

const gbml_scorer *
gbml_named_scorer_in(FunctionCallInfo fcinfo, const char *fname, void **slot, bool *reloaded)
{
	named_model *nm = *slot;
	text	   *name_t = PG_GETARG_TEXT_PP(0);
	char	   *name;

	if (reloaded)
		*reloaded = false;
	/* called per row: compare the text's bytes, no copy, no palloc */
	if (nm != NULL && nm->name != NULL &&
		nm->name_len == VARSIZE_ANY_EXHDR(name_t) &&
		memcmp(nm->name, VARDATA_ANY(name_t), VARSIZE_ANY_EXHDR(name_t)) == 0)
		return &nm->scorer;
	if (reloaded)
		*reloaded = true;
	name = text_to_cstring(name_t);
	if (nm == NULL)
	{
		nm = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(named_model));
		nm->mcxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "gbml named model", ALLOCSET_DEFAULT_SIZES);
		*slot = nm;
	}
	else
		MemoryContextReset(nm->mcxt);
	nm->name = NULL;
	{
		Oid			argtypes[1] = {TEXTOID};
		Datum		values[1] = {PointerGetDatum(name_t)};
		bool		isnull;
		Datum		model;
		int			ret;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		ret = SPI_execute_with_args("SELECT model FROM gbml.models WHERE name = $1 AND deployed",
									1, argtypes, values, NULL, true, 1);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "reading gbml.models failed");
		if (SPI_processed == 0)
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
							errmsg("%s: no deployed model named \"%s\"", fname, name),
							errhint("Train one with gbml.train('%s', ...) or deploy a version with gbml.deploy.", name)));
		model = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (isnull)
			ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("%s: model \"%s\" has no bytes", fname, name)));
		{
			MemoryContext old = MemoryContextSwitchTo(nm->mcxt);
			bytea	   *b = DatumGetByteaPP(model);

			gbml_env_bind(&nm->env, nm->mcxt, fname);
			nm->env.memory_limit = 0;
			GBML_CHECK(&nm->env, gbml_scorer_load(&nm->scorer, &nm->env, VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b)), fname);
			nm->name = pstrdup(name);
			nm->name_len = strlen(name);
			MemoryContextSwitchTo(old);
		}
		SPI_finish();
	}
	return &nm->scorer;
}

Datum
gbml_predict_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_row(fcinfo, named_scorer(fcinfo, "gbml.predict"), GBML_OUT_SCORE, "gbml.predict"));
}

Datum
gbml_predict_proba_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_row(fcinfo, named_scorer(fcinfo, "gbml.predict_proba"), GBML_OUT_PROBA, "gbml.predict_proba"));
}

Datum
gbml_kmeans_assign_name(PG_FUNCTION_ARGS)
{
	double		c = score_row(fcinfo, named_scorer(fcinfo, "gbml.kmeans_assign"), GBML_OUT_CLUSTER, "gbml.kmeans_assign");

	PG_RETURN_INT32((int32) c);
}

Datum
gbml_kmeans_distance_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_row(fcinfo, named_scorer(fcinfo, "gbml.kmeans_distance"), GBML_OUT_DISTANCE,
							   "gbml.kmeans_distance"));
}

/* ---- gbml.predict_classes: a probability per class ---- */

Datum
gbml_class_probabilities(const gbml_scorer *sc, const float *x)
{
	int			k = sc->n_classes;
	double	   *prob = palloc(sizeof(double) * (size_t) k);
	Datum	   *elems = palloc(sizeof(Datum) * (size_t) k);

	(void) sc->algo->classes(sc->handle, x, prob);
	for (int c = 0; c < k; c++)
		elems[c] = Float8GetDatum(prob[c]);
	return PointerGetDatum(construct_array(elems, k, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/* On a real[]: element c + 1 is class c's probability. */
static Datum
classes_row(FunctionCallInfo fcinfo, const gbml_scorer *sc, const char *fname)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(1);
	int			n;
	const float *x = gbml_float_array(arr, &n, fname, 0);

	if (!gbml_scorer_gives(sc, GBML_OUT_CLASSES) || n != sc->n_features)
	{
		gbml_env	env;

		gbml_env_init_malloc(&env, 1);
		(void) gbml_scorer_classes(sc, &env, x, n, NULL);
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s: %s", fname, env.error)));
	}
	return gbml_class_probabilities(sc, x);
}

Datum
gbml_predict_classes_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(classes_row(fcinfo, gbml_cached_scorer(fcinfo, 0), "gbml.predict_classes"));
}

Datum
gbml_predict_classes_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(classes_row(fcinfo, named_scorer(fcinfo, "gbml.predict_classes"), "gbml.predict_classes"));
}
