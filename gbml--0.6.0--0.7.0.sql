-- gbml 0.6.0 -> 0.7.0: boosting's MultiClass loss (softmax over K classes, K
-- trees an iteration).  gbml.predict on such a model gives the most probable
-- class id; gbml.predict_classes gives every class's probability, element
-- c + 1 for class c, in the same four forms as predict (model bytea or a
-- registered name; a real[] or a whole row, whose columns the planner support
-- passes one by one, as for predict).
\echo Use "ALTER EXTENSION gbml UPDATE TO '0.7.0'" to load this file. \quit

CREATE FUNCTION gbml.predict_classes(model bytea, features real[]) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'gbml_predict_classes_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gbml.predict_classes(name text, features real[]) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'gbml_predict_classes_name' LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION gbml._predict_classes_columns(model bytea, row_type regtype, VARIADIC "any") RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'gbml_predict_classes_columns_bytea' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gbml._predict_classes_columns(name text, row_type regtype, VARIADIC "any") RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'gbml_predict_classes_columns_name' LANGUAGE C STABLE PARALLEL SAFE;

CREATE FUNCTION gbml.predict_classes(model bytea, input record) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'gbml_predict_classes_row_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT gbml._row_support;
CREATE FUNCTION gbml.predict_classes(name text, input record) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'gbml_predict_classes_row_name' LANGUAGE C STABLE STRICT PARALLEL SAFE
    SUPPORT gbml._row_support;

-- An untyped literal matches both the array and the record forms: read it as real[], as predict's text forms do.
CREATE FUNCTION gbml.predict_classes(model bytea, features text) RETURNS double precision[]
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS 'SELECT gbml.predict_classes($1, $2::real[])';
CREATE FUNCTION gbml.predict_classes(name text, features text) RETURNS double precision[]
    LANGUAGE sql STABLE STRICT PARALLEL SAFE AS 'SELECT gbml.predict_classes($1, $2::real[])';

COMMENT ON FUNCTION gbml.predict_classes(bytea, real[]) IS
    'each class''s probability (element c + 1: class c) of a boosting model trained with the MultiClass loss';
