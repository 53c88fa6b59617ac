-- gbml 0.8.0 -> 0.9.0: the columns forms that the planner rewrites a whole-row
-- score into (gbml.predict(model, t) -> gbml._predict_columns(model,
-- 't'::regtype, t.c1, ...)) are STABLE, no longer IMMUTABLE.  postgres_fdw
-- ships an immutable function of a listed extension to the foreign server,
-- where 't'::regtype names that server's type of the same name (its columns
-- in its own order, or none): a whole-row score in a WHERE clause, ORDER BY or
-- aggregate over a foreign table scored the remote columns under other
-- names, silently.  A stable function is evaluated here, on the rows
-- postgres_fdw fetched.  The by-name forms were stable already.
\echo Use "ALTER EXTENSION gbml UPDATE TO '0.9.0'" to load this file. \quit

ALTER FUNCTION gbml._predict_columns(bytea, regtype, "any") STABLE;
ALTER FUNCTION gbml._predict_proba_columns(bytea, regtype, "any") STABLE;
ALTER FUNCTION gbml._kmeans_assign_columns(bytea, regtype, "any") STABLE;
ALTER FUNCTION gbml._kmeans_distance_columns(bytea, regtype, "any") STABLE;
ALTER FUNCTION gbml._predict_classes_columns(bytea, regtype, "any") STABLE;
