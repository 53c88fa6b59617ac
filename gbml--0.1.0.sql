-- gbml--0.1.0.sql — the SQL surface of gbml (see README.md for the reference).
-- Everything is schema-qualified (search_path safe); no SECURITY DEFINER.

\echo Use "CREATE EXTENSION gbml" to load this file. \quit

-- Everyone may use the functions; the registry's privileges are below.
GRANT USAGE ON SCHEMA gbml TO PUBLIC;

-- ---------------------------------------------------------------------------
-- Model registry
-- ---------------------------------------------------------------------------
CREATE TABLE gbml.models (
    id          bigserial PRIMARY KEY,
    name        text        NOT NULL CHECK (name <> ''),
    version     integer     NOT NULL,
    algorithm   text        NOT NULL,
    params      jsonb       NOT NULL,
    metrics     jsonb       NOT NULL,
    rows        bigint      NOT NULL,
    features    integer     NOT NULL,
    device      text        NOT NULL,
    timings     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    deployed    boolean     NOT NULL DEFAULT false,
    model       bytea       NOT NULL,
    UNIQUE (name, version)
);
CREATE UNIQUE INDEX models_one_deployed ON gbml.models (name) WHERE deployed;
COMMENT ON TABLE gbml.models IS 'gbml model registry: one row per trained version; at most one deployed version per name';
-- pg_dump keeps the registry's rows
SELECT pg_catalog.pg_extension_config_dump('gbml.models', '');
SELECT pg_catalog.pg_extension_config_dump('gbml.models_id_seq', '');
-- Everyone may score with deployed models; only the owner (or whom it grants) may write.
REVOKE ALL ON gbml.models FROM PUBLIC;
GRANT SELECT ON gbml.models TO PUBLIC;

-- ---------------------------------------------------------------------------
-- Training aggregates (internal state, parallel safe)
-- ---------------------------------------------------------------------------
CREATE FUNCTION gbml._fit_final(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'gbml_fit_final' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._fit_combine(internal, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_fit_combine' LANGUAGE C PARALLEL SAFE;
-- A partial state holds every row a worker saw, so moving it to the leader costs about as
-- much as collecting it (measured: a parallel plan trains 1.7x slower than a serial one on
-- 1M x 100).  The high COST tells the planner so: serial plans unless forced.
CREATE FUNCTION gbml._fit_serialize(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'gbml_fit_serialize' LANGUAGE C STRICT PARALLEL SAFE COST 100000000;
CREATE FUNCTION gbml._fit_deserialize(bytea, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_fit_deserialize' LANGUAGE C STRICT PARALLEL SAFE COST 100000000;

-- boost_fit(features, label [, group_id] [, params])
CREATE FUNCTION gbml._boost_fit_trans(internal, real[], real, bigint, jsonb) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_boost_fit_trans' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._boost_fit_trans(internal, real[], real, jsonb) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_boost_fit_trans' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._boost_fit_trans(internal, real[], real) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_boost_fit_trans' LANGUAGE C PARALLEL SAFE;

CREATE AGGREGATE gbml.boost_fit(features real[], label real, group_id bigint, params jsonb) (
    SFUNC = gbml._boost_fit_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE,
    COMBINEFUNC = gbml._fit_combine, SERIALFUNC = gbml._fit_serialize,
    DESERIALFUNC = gbml._fit_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE gbml.boost_fit(features real[], label real, params jsonb) (
    SFUNC = gbml._boost_fit_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE,
    COMBINEFUNC = gbml._fit_combine, SERIALFUNC = gbml._fit_serialize,
    DESERIALFUNC = gbml._fit_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE gbml.boost_fit(features real[], label real) (
    SFUNC = gbml._boost_fit_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE,
    COMBINEFUNC = gbml._fit_combine, SERIALFUNC = gbml._fit_serialize,
    DESERIALFUNC = gbml._fit_deserialize, PARALLEL = SAFE);

-- kmeans_fit(features, k [, params])
CREATE FUNCTION gbml._kmeans_fit_trans(internal, real[], integer, jsonb) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_kmeans_fit_trans' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._kmeans_fit_trans(internal, real[], integer) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_kmeans_fit_trans' LANGUAGE C PARALLEL SAFE;
CREATE AGGREGATE gbml.kmeans_fit(features real[], k integer, params jsonb) (
    SFUNC = gbml._kmeans_fit_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE,
    COMBINEFUNC = gbml._fit_combine, SERIALFUNC = gbml._fit_serialize,
    DESERIALFUNC = gbml._fit_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE gbml.kmeans_fit(features real[], k integer) (
    SFUNC = gbml._kmeans_fit_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE,
    COMBINEFUNC = gbml._fit_combine, SERIALFUNC = gbml._fit_serialize,
    DESERIALFUNC = gbml._fit_deserialize, PARALLEL = SAFE);

-- saga_fit(features, label [, weight] [, params])
CREATE FUNCTION gbml._saga_fit_trans(internal, real[], real, real, jsonb) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_saga_fit_trans' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._saga_fit_trans(internal, real[], real, jsonb) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_saga_fit_trans' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._saga_fit_trans(internal, real[], real) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_saga_fit_trans' LANGUAGE C PARALLEL SAFE;
CREATE AGGREGATE gbml.saga_fit(features real[], label real, weight real, params jsonb) (
    SFUNC = gbml._saga_fit_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE,
    COMBINEFUNC = gbml._fit_combine, SERIALFUNC = gbml._fit_serialize,
    DESERIALFUNC = gbml._fit_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE gbml.saga_fit(features real[], label real, params jsonb) (
    SFUNC = gbml._saga_fit_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE,
    COMBINEFUNC = gbml._fit_combine, SERIALFUNC = gbml._fit_serialize,
    DESERIALFUNC = gbml._fit_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE gbml.saga_fit(features real[], label real) (
    SFUNC = gbml._saga_fit_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE,
    COMBINEFUNC = gbml._fit_combine, SERIALFUNC = gbml._fit_serialize,
    DESERIALFUNC = gbml._fit_deserialize, PARALLEL = SAFE);

-- mean_fit(features, label [, params]): a trivial model kind that predicts the mean
-- label; it exists to test the machinery (aggregates, registry, cancel, container).
CREATE FUNCTION gbml._mean_fit_trans(internal, real[], real, jsonb) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_mean_fit_trans' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._mean_fit_trans(internal, real[], real) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_mean_fit_trans' LANGUAGE C PARALLEL SAFE;
CREATE AGGREGATE gbml.mean_fit(features real[], label real, params jsonb) (
    SFUNC = gbml._mean_fit_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE,
    COMBINEFUNC = gbml._fit_combine, SERIALFUNC = gbml._fit_serialize,
    DESERIALFUNC = gbml._fit_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE gbml.mean_fit(features real[], label real) (
    SFUNC = gbml._mean_fit_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE,
    COMBINEFUNC = gbml._fit_combine, SERIALFUNC = gbml._fit_serialize,
    DESERIALFUNC = gbml._fit_deserialize, PARALLEL = SAFE);

-- ---------------------------------------------------------------------------
-- Scoring (model parsed once per query)
-- ---------------------------------------------------------------------------
CREATE FUNCTION gbml.predict(model bytea, features real[]) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gbml.predict(name text, features real[]) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_name' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gbml.predict_proba(model bytea, features real[]) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_proba_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gbml.predict_proba(name text, features real[]) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_proba_name' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gbml.kmeans_assign(model bytea, features real[]) RETURNS integer
    AS 'MODULE_PATHNAME', 'gbml_kmeans_assign_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gbml.kmeans_distance(model bytea, features real[]) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_kmeans_distance_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- ---------------------------------------------------------------------------
-- Evaluation aggregates (per group with GROUP BY; parallel safe)
-- ---------------------------------------------------------------------------
CREATE FUNCTION gbml._metric_trans(internal, double precision, real, integer) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_metric_trans' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._metric_trans(internal, double precision, real) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_metric_trans' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._metric_combine(internal, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_metric_combine' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._metric_serialize(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'gbml_metric_serialize' LANGUAGE C STRICT PARALLEL SAFE;
CREATE FUNCTION gbml._metric_deserialize(bytea, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_metric_deserialize' LANGUAGE C STRICT PARALLEL SAFE;
CREATE FUNCTION gbml._ndcg_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_ndcg_final' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._auc_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_auc_final' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION gbml._rmse_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_rmse_final' LANGUAGE C PARALLEL SAFE;

-- NDCG@k of one query (exponential gain 2^label - 1; a query with no relevant
-- document counts 1; tied scores rank worst-first).  GROUP BY the query id.
CREATE AGGREGATE gbml.ndcg(score double precision, label real, k integer) (
    SFUNC = gbml._metric_trans, STYPE = internal, FINALFUNC = gbml._ndcg_final,
    COMBINEFUNC = gbml._metric_combine, SERIALFUNC = gbml._metric_serialize,
    DESERIALFUNC = gbml._metric_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE gbml.auc(score double precision, label real) (
    SFUNC = gbml._metric_trans, STYPE = internal, FINALFUNC = gbml._auc_final,
    COMBINEFUNC = gbml._metric_combine, SERIALFUNC = gbml._metric_serialize,
    DESERIALFUNC = gbml._metric_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE gbml.rmse(score double precision, label real) (
    SFUNC = gbml._metric_trans, STYPE = internal, FINALFUNC = gbml._rmse_final,
    COMBINEFUNC = gbml._metric_combine, SERIALFUNC = gbml._metric_serialize,
    DESERIALFUNC = gbml._metric_deserialize, PARALLEL = SAFE);

-- ---------------------------------------------------------------------------
-- Introspection and devices
-- ---------------------------------------------------------------------------
CREATE FUNCTION gbml.model_info(model bytea) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'gbml_model_info' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gbml.model_json(model bytea) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'gbml_model_json' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gbml.feature_importance(model bytea)
    RETURNS TABLE (feature integer, importance double precision)
    AS 'MODULE_PATHNAME', 'gbml_feature_importance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gbml.devices()
    RETURNS TABLE (id integer, name text, memory_mb bigint, compute_capability text)
    AS 'MODULE_PATHNAME', 'gbml_devices' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION gbml.last_training_report() RETURNS jsonb
    AS 'MODULE_PATHNAME', 'gbml_last_training_report' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION gbml.last_training_report() IS
    'Run-dependent figures of the last training in this session: device, threads, seconds, per-phase timings';

-- ---------------------------------------------------------------------------
-- Registry functions
-- ---------------------------------------------------------------------------
CREATE FUNCTION gbml.train(name text, algorithm text, source text, params jsonb DEFAULT '{}')
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'gbml_train_registry' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION gbml.train(text, text, text, jsonb) IS
    'Train a new version of model NAME with ALGORITHM (boost, kmeans, saga) on SOURCE (a table or a query); returns its gbml.models id';

-- Makes VERSION the deployed version of NAME; returns its id.
CREATE FUNCTION gbml.deploy(name text, version integer) RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target bigint;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('gbml.models:' || deploy.name));
    SELECT m.id INTO target FROM gbml.models m WHERE m.name = deploy.name AND m.version = deploy.version;
    IF target IS NULL THEN
        RAISE EXCEPTION 'gbml.deploy: model "%" has no version %', deploy.name, deploy.version
            USING ERRCODE = 'undefined_object';
    END IF;
    UPDATE gbml.models m SET deployed = false WHERE m.name = deploy.name AND m.deployed AND m.id <> target;
    UPDATE gbml.models m SET deployed = true WHERE m.id = target;
    RETURN target;
END
$$;

-- Records a trained model as the next version of NAME and deploys it per POLICY
-- (always | if_better | never).  Called by gbml.train.
CREATE FUNCTION gbml._record_model(name text, algorithm text, model bytea, policy text, report jsonb) RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    info     jsonb := gbml.model_info(_record_model.model);
    next_ver integer;
    new_id   bigint;
    current  jsonb;
    new_val  double precision;
    cur_val  double precision;
    better   boolean;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('gbml.models:' || _record_model.name));
    SELECT COALESCE(max(m.version), 0) + 1 INTO next_ver FROM gbml.models m WHERE m.name = _record_model.name;
    INSERT INTO gbml.models (name, version, algorithm, params, metrics, rows, features, device, timings, model)
    VALUES (_record_model.name, next_ver, _record_model.algorithm,
            COALESCE(info -> 'params', '{}'), COALESCE(info -> 'metrics', '{}'),
            (info ->> 'rows')::bigint, (info ->> 'features')::integer, COALESCE(report ->> 'device', 'cpu'),
            COALESCE(report, '{}'), _record_model.model)
    RETURNING id INTO new_id;

    IF policy = 'always' THEN
        PERFORM gbml.deploy(_record_model.name, next_ver);
    ELSIF policy = 'if_better' THEN
        SELECT m.metrics INTO current FROM gbml.models m WHERE m.name = _record_model.name AND m.deployed;
        new_val := (info -> 'metrics' ->> 'eval_value')::double precision;
        cur_val := (current ->> 'eval_value')::double precision;
        IF current IS NULL OR cur_val IS NULL THEN
            better := true;
        ELSIF new_val IS NULL THEN
            better := false;
        ELSIF COALESCE((info -> 'metrics' ->> 'higher_is_better')::boolean, false) THEN
            better := new_val > cur_val;
        ELSE
            better := new_val < cur_val;
        END IF;
        IF better THEN
            PERFORM gbml.deploy(_record_model.name, next_ver);
        ELSE
            RAISE NOTICE 'gbml.train: version % of "%" not deployed: % = % is not better than the deployed %',
                next_ver, _record_model.name, info -> 'metrics' ->> 'eval_metric', new_val, cur_val;
        END IF;
    END IF;
    RETURN new_id;
END
$$;
