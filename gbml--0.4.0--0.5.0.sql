-- gbml 0.4.0 -> 0.5.0: scoring a whole row of more than 98 columns without a
-- composite datum per row (issue 13).  The planner support of gbml.predict,
-- predict_proba, kmeans_assign and kmeans_distance (record forms) rewrites a
-- table's whole row into its columns; a function takes at most 100 arguments,
-- so a wider row's columns now go in packs of up to 100, each one call of
-- this function: a bytea of the columns' values (by-reference values copied).
-- Internal: only the _columns forms read a pack, and only from a direct call.
\echo Use "ALTER EXTENSION gbml UPDATE TO '0.5.0'" to load this file. \quit

CREATE FUNCTION gbml._column_pack(VARIADIC "any") RETURNS bytea
    AS 'MODULE_PATHNAME', 'gbml_column_pack' LANGUAGE C IMMUTABLE PARALLEL SAFE;
