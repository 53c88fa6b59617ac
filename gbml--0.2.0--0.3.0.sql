-- gbml 0.2.0 -> 0.3.0: models trained from ordinary columns (issue 13).
-- gbml.train takes a source without a features array: its columns are the
-- features (numbers, booleans, text and enum categories, arrays of numbers),
-- by name; the model keeps their names and categories.  These functions
-- score a whole row against such a model, matching its columns by name once
-- per query: ORDER BY gbml.predict('churn', c) DESC with c the table's alias.
\echo Use "ALTER EXTENSION gbml UPDATE TO '0.3.0'" to load this file. \quit

-- Planner support: a table's whole row becomes its columns, one argument each
-- (no composite datum formed per row); the _columns forms take them.
CREATE FUNCTION gbml._row_support(internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_row_support' LANGUAGE C STRICT;
CREATE FUNCTION gbml._predict_columns(model bytea, row_type regtype, VARIADIC "any") RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_columns_bytea' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gbml._predict_columns(name text, row_type regtype, VARIADIC "any") RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_columns_name' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION gbml._predict_proba_columns(model bytea, row_type regtype, VARIADIC "any") RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_proba_columns_bytea' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gbml._predict_proba_columns(name text, row_type regtype, VARIADIC "any") RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_proba_columns_name' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION gbml._kmeans_assign_columns(model bytea, row_type regtype, VARIADIC "any") RETURNS integer
    AS 'MODULE_PATHNAME', 'gbml_kmeans_assign_columns_bytea' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gbml._kmeans_assign_columns(name text, row_type regtype, VARIADIC "any") RETURNS integer
    AS 'MODULE_PATHNAME', 'gbml_kmeans_assign_columns_name' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION gbml._kmeans_distance_columns(model bytea, row_type regtype, VARIADIC "any") RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_kmeans_distance_columns_bytea' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gbml._kmeans_distance_columns(name text, row_type regtype, VARIADIC "any") RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_kmeans_distance_columns_name' LANGUAGE C STABLE PARALLEL SAFE;

CREATE FUNCTION gbml.predict(model bytea, input record) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_row_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE SUPPORT gbml._row_support;
CREATE FUNCTION gbml.predict(name text, input record) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_row_name' LANGUAGE C STABLE STRICT PARALLEL SAFE SUPPORT gbml._row_support;
CREATE FUNCTION gbml.predict_proba(model bytea, input record) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_proba_row_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE SUPPORT gbml._row_support;
CREATE FUNCTION gbml.predict_proba(name text, input record) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_predict_proba_row_name' LANGUAGE C STABLE STRICT PARALLEL SAFE SUPPORT gbml._row_support;
CREATE FUNCTION gbml.kmeans_assign(model bytea, input record) RETURNS integer
    AS 'MODULE_PATHNAME', 'gbml_kmeans_assign_row_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE SUPPORT gbml._row_support;
CREATE FUNCTION gbml.kmeans_assign(name text, input record) RETURNS integer
    AS 'MODULE_PATHNAME', 'gbml_kmeans_assign_row_name' LANGUAGE C STABLE STRICT PARALLEL SAFE SUPPORT gbml._row_support;
CREATE FUNCTION gbml.kmeans_distance(model bytea, input record) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_kmeans_distance_row_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE SUPPORT gbml._row_support;
CREATE FUNCTION gbml.kmeans_distance(name text, input record) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_kmeans_distance_row_name' LANGUAGE C STABLE STRICT PARALLEL SAFE SUPPORT gbml._row_support;
COMMENT ON FUNCTION gbml.predict(text, record) IS
    'score a whole row (a table alias) with the deployed model trained from columns; its columns are matched by name once per query';
COMMENT ON FUNCTION gbml.predict(bytea, record) IS
    'score a whole row (a table alias) with a model trained from columns; its columns are matched by name once per query';

-- With the record forms beside the real[] forms, an untyped literal such as
-- '{1,2,3}' would match both; these text forms keep such calls working by
-- reading the literal as real[] (inlined SQL functions: no cost per row).
CREATE FUNCTION gbml.predict(model bytea, features text) RETURNS double precision
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS 'SELECT gbml.predict($1, $2::real[])';
CREATE FUNCTION gbml.predict(name text, features text) RETURNS double precision
    LANGUAGE sql STABLE STRICT PARALLEL SAFE AS 'SELECT gbml.predict($1, $2::real[])';
CREATE FUNCTION gbml.predict_proba(model bytea, features text) RETURNS double precision
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS 'SELECT gbml.predict_proba($1, $2::real[])';
CREATE FUNCTION gbml.predict_proba(name text, features text) RETURNS double precision
    LANGUAGE sql STABLE STRICT PARALLEL SAFE AS 'SELECT gbml.predict_proba($1, $2::real[])';
CREATE FUNCTION gbml.kmeans_assign(model bytea, features text) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS 'SELECT gbml.kmeans_assign($1, $2::real[])';
CREATE FUNCTION gbml.kmeans_assign(name text, features text) RETURNS integer
    LANGUAGE sql STABLE STRICT PARALLEL SAFE AS 'SELECT gbml.kmeans_assign($1, $2::real[])';
CREATE FUNCTION gbml.kmeans_distance(model bytea, features text) RETURNS double precision
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS 'SELECT gbml.kmeans_distance($1, $2::real[])';
CREATE FUNCTION gbml.kmeans_distance(name text, features text) RETURNS double precision
    LANGUAGE sql STABLE STRICT PARALLEL SAFE AS 'SELECT gbml.kmeans_distance($1, $2::real[])';

-- feature_importance names each feature (NULL for a model trained on an array)
DROP FUNCTION gbml.feature_importance(bytea);
CREATE FUNCTION gbml.feature_importance(model bytea)
    RETURNS TABLE (feature integer, importance double precision, name text)
    AS 'MODULE_PATHNAME', 'gbml_feature_importance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION gbml.feature_importance(bytea) IS
    'per input feature: its 1-based position, its share of the model''s importance, and its column name (models trained from columns)';

-- The training aggregates on whole rows: boost_fit(t, '{"label_column": "clicked"}') FROM t.
-- The row's columns are the features as in gbml.train (label, group and weight
-- columns by name from the params).  No parallel partial states: categorical
-- values are collected as the rows come and numbered in sorted order at the end.
CREATE FUNCTION gbml._boost_fit_row_trans(internal, record, jsonb) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_boost_fit_row_trans' LANGUAGE C;
CREATE FUNCTION gbml._kmeans_fit_row_trans(internal, record, integer, jsonb) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_kmeans_fit_row_trans' LANGUAGE C;
CREATE FUNCTION gbml._saga_fit_row_trans(internal, record, jsonb) RETURNS internal
    AS 'MODULE_PATHNAME', 'gbml_saga_fit_row_trans' LANGUAGE C;
CREATE AGGREGATE gbml.boost_fit(input record, params jsonb) (
    SFUNC = gbml._boost_fit_row_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE);
CREATE AGGREGATE gbml.kmeans_fit(input record, k integer, params jsonb) (
    SFUNC = gbml._kmeans_fit_row_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE);
CREATE AGGREGATE gbml.saga_fit(input record, params jsonb) (
    SFUNC = gbml._saga_fit_row_trans, STYPE = internal,
    FINALFUNC = gbml._fit_final, FINALFUNC_MODIFY = READ_WRITE);
