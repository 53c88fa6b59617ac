-- gbml 0.5.0 -> 0.6.0: model_info, model_json and feature_importance take a
-- registered model's name, as predict and kmeans_assign do: the deployed
-- version of that name.  Before, gbml.model_info('churn') resolved the
-- untyped literal to bytea and reported the name's bytes as "too short to be
-- a gbml model"; a string literal now resolves to the name form (text is the
-- preferred type of its category), a bytea value to the bytea form as before.
\echo Use "ALTER EXTENSION gbml UPDATE TO '0.6.0'" to load this file. \quit

-- The deployed model of `name`, or the same ERROR as predict's by name.
CREATE FUNCTION gbml._deployed_model(name text, caller text) RETURNS bytea
    LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    m bytea;
BEGIN
    SELECT r.model INTO m FROM gbml.models r WHERE r.name = _deployed_model.name AND r.deployed;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no deployed model named "%"', caller, name
            USING ERRCODE = 'undefined_object',
                  HINT = format('Train one with gbml.train(''%s'', ...) or deploy a version with gbml.deploy.', name);
    END IF;
    RETURN m;
END $$;

CREATE FUNCTION gbml.model_info(name text) RETURNS jsonb
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    AS $$ SELECT gbml.model_info(gbml._deployed_model(name, 'gbml.model_info')) $$;
COMMENT ON FUNCTION gbml.model_info(text) IS
    'model_info of the deployed version of the named model (gbml.models)';
CREATE FUNCTION gbml.model_json(name text) RETURNS jsonb
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    AS $$ SELECT gbml.model_json(gbml._deployed_model(name, 'gbml.model_json')) $$;
COMMENT ON FUNCTION gbml.model_json(text) IS
    'model_json of the deployed version of the named model (gbml.models)';
-- model_name, not name: the result has a column "name" (the feature's)
CREATE FUNCTION gbml.feature_importance(model_name text)
    RETURNS TABLE (feature integer, importance double precision, name text)
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    AS $$ SELECT * FROM gbml.feature_importance(gbml._deployed_model(model_name, 'gbml.feature_importance')) $$;
COMMENT ON FUNCTION gbml.feature_importance(text) IS
    'feature_importance of the deployed version of the named model (gbml.models)';
