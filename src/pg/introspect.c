/*
 * introspect.c — gbml.model_info, gbml.model_json, gbml.feature_importance
 * and gbml.devices: reading a model (validated first) or the GPU list.
 */
#include "glue.h"

#include "schema.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(gbml_model_info);
PG_FUNCTION_INFO_V1(gbml_model_json);
PG_FUNCTION_INFO_V1(gbml_feature_importance);
PG_FUNCTION_INFO_V1(gbml_devices);
PG_FUNCTION_INFO_V1(gbml_sql_gpu_resources);
PG_FUNCTION_INFO_V1(gbml_last_training_report);

static Datum
json_text_to_jsonb(const char *text)
{
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(text));
}

Datum
gbml_model_info(PG_FUNCTION_ARGS)
{
	bytea	   *model = PG_GETARG_BYTEA_PP(0);
	gbml_env	env;
	gbml_strbuf sb;

	gbml_env_bind(&env, CurrentMemoryContext, "gbml.model_info");
	gbml_sb_init(&sb, &env);
	GBML_CHECK(&env, gbml_model_info_json(&env, VARDATA_ANY(model), VARSIZE_ANY_EXHDR(model), &sb),
			   "gbml.model_info");
	PG_RETURN_DATUM(json_text_to_jsonb(sb.data));
}

static void
load_or_error(gbml_env *env, gbml_scorer *sc, bytea *model, const char *what)
{
	gbml_env_bind(env, CurrentMemoryContext, what);
	env->memory_limit = 0;
	GBML_CHECK(env, gbml_scorer_load(sc, env, VARDATA_ANY(model), VARSIZE_ANY_EXHDR(model)), what);
}

Datum
gbml_model_json(PG_FUNCTION_ARGS)
{
	bytea	   *model = PG_GETARG_BYTEA_PP(0);
	gbml_env	env;
	gbml_scorer sc;
	gbml_strbuf sb;

	load_or_error(&env, &sc, model, "gbml.model_json");
	gbml_sb_init(&sb, &env);
	gbml_sb_append(&sb, "{\"algorithm\":", 13);
	gbml_sb_json_string(&sb, sc.algo->name);
	gbml_sb_printf(&sb, ",\"features\":%d", sc.n_features);
	if (sc.schema)
	{
		gbml_sb_append(&sb, ",", 1);
		gbml_schema_json(sc.schema, &sb);
	}
	if (sc.algo->to_json)
	{
		size_t		mark;

		gbml_sb_append(&sb, ",", 1);
		mark = sb.len;
		GBML_CHECK(&env, sc.algo->to_json(sc.handle, &sb), "gbml.model_json");
		if (sb.len == mark)
			sb.data[--sb.len] = '\0';	/* nothing written: drop the comma */
	}
	gbml_sb_append(&sb, "}", 1);
	GBML_CHECK(&env, gbml_sb_status(&sb), "gbml.model_json");
	PG_RETURN_DATUM(json_text_to_jsonb(sb.data));
}

Datum
gbml_feature_importance(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bytea	   *model = PG_GETARG_BYTEA_PP(0);
	gbml_env	env;
	gbml_scorer sc;
	double	   *imp;

	InitMaterializedSRF(fcinfo, 0);
	load_or_error(&env, &sc, model, "gbml.feature_importance");
	if (sc.algo->importance == NULL)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("gbml.feature_importance: not available for a %s model", sc.algo->name)));
	imp = palloc0(sizeof(double) * sc.n_features);
	GBML_CHECK(&env, sc.algo->importance(sc.handle, imp), "gbml.feature_importance");
	for (int j = 0; j < sc.n_features; j++)
	{
		const char *name = gbml_schema_name(sc.schema, j);
		Datum		values[3] = {Int32GetDatum(j + 1), Float8GetDatum(imp[j]),
		name ? CStringGetTextDatum(name) : (Datum) 0};
		bool		nulls[3] = {false, false, name == NULL};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

Datum
gbml_devices(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char		reason[300] = "";
	const gbml_backend *b;

	InitMaterializedSRF(fcinfo, 0);
	b = gbml_gpu_backend(reason, sizeof(reason));
	if (b == NULL)
	{
		ereport(DEBUG1, (errmsg("gbml.devices: %s", reason)));
		return (Datum) 0;
	}
	for (int id = 0; id < b->device_count(); id++)
	{
		gbml_device_info info;
		char		cc[32];
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, false, false};

		if (b->device_info(id, &info) != 0)
			continue;
		snprintf(cc, sizeof(cc), "%d.%d", info.compute_major, info.compute_minor);
		values[0] = Int32GetDatum(id);
		values[1] = CStringGetTextDatum(info.name);
		values[2] = Int64GetDatum((int64) (info.total_memory >> 20));
		values[3] = CStringGetTextDatum(cc);
		values[4] = Int64GetDatum((int64) (info.free_memory >> 20));
		values[5] = BoolGetDatum(info.emulated);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* What this backend holds through the CUDA backend right now (all 0 between trainings). */
Datum
gbml_sql_gpu_resources(PG_FUNCTION_ARGS)
{
	char		reason[300] = "";
	const gbml_backend *b = gbml_gpu_backend(reason, sizeof(reason));
	gbml_gpu_resources r;
	char		json[512];

	memset(&r, 0, sizeof(r));
	if (b)
		b->resources(&r);
	snprintf(json, sizeof(json),
			 "{\"backend\": %s%s%s, \"contexts\": " INT64_FORMAT ", \"device_bytes\": " INT64_FORMAT
			 ", \"device_allocations\": " INT64_FORMAT ", \"pinned_bytes\": " INT64_FORMAT
			 ", \"pinned_allocations\": " INT64_FORMAT ", \"streams\": " INT64_FORMAT ", \"events\": " INT64_FORMAT "}",
			 b ? "\"" : "", b ? b->name : "null", b ? "\"" : "",
			 r.contexts, r.device_bytes, r.device_allocations, r.pinned_bytes, r.pinned_allocations,
			 r.streams, r.events);
	PG_RETURN_DATUM(json_text_to_jsonb(json));
}

/* Run-dependent figures of the last training in this session (times, threads, device). */
Datum
gbml_last_training_report(PG_FUNCTION_ARGS)
{
	const char *r = gbml_last_report();

	if (r == NULL)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(json_text_to_jsonb(r));
}
