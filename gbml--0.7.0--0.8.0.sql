-- gbml 0.7.0 -> 0.8.0: the registry's "deploy": "if_better" compares a new
-- version with the deployed one only on the same metric over the same kind of
-- set (it compared an RMSE with an NDCG@10, or a training-set figure with an
-- eval set's); gbml.deploy refuses a NULL name or version by saying so.
\echo Use "ALTER EXTENSION gbml UPDATE TO '0.8.0'" to load this file. \quit

CREATE OR REPLACE FUNCTION gbml._record_model(name text, algorithm text, model bytea, policy text, report jsonb) RETURNS bigint
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
        ELSIF (info -> 'metrics' ->> 'eval_metric') IS DISTINCT FROM (current ->> 'eval_metric')
              OR (info -> 'metrics' ->> 'eval_set') IS DISTINCT FROM (current ->> 'eval_set') THEN
            -- another metric, or the same over another kind of set: no comparison to make
            RAISE NOTICE 'gbml.train: version % of "%" not deployed: its % (on the % set) cannot be compared with the deployed version''s % (on the % set)',
                next_ver, _record_model.name, info -> 'metrics' ->> 'eval_metric',
                COALESCE(info -> 'metrics' ->> 'eval_set', 'training'), current ->> 'eval_metric',
                COALESCE(current ->> 'eval_set', 'training')
                USING HINT = pg_catalog.format('Deploy it with gbml.deploy(%L, %s) if it should serve.', _record_model.name, next_ver);
            RETURN new_id;
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

CREATE OR REPLACE FUNCTION gbml.deploy(name text, version integer) RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target bigint;
BEGIN
    IF deploy.name IS NULL OR deploy.version IS NULL THEN
        RAISE EXCEPTION 'gbml.deploy: name and version must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.pg_is_in_recovery() THEN
        RAISE EXCEPTION 'gbml.deploy: the server is read-only (a standby in recovery): the deployed version cannot be changed here'
            USING ERRCODE = 'read_only_sql_transaction',
                  HINT = 'Run gbml.deploy on the primary; the standby follows its registry.';
    END IF;
    IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
        RAISE EXCEPTION 'gbml.deploy: the transaction is read-only: the deployed version cannot be changed'
            USING ERRCODE = 'read_only_sql_transaction',
                  HINT = 'Run it in a read-write transaction (default_transaction_read_only is on, or the transaction was started READ ONLY).';
    END IF;
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
