-- gbml 0.3.0 -> 0.4.0: training across servers (issue 14).
-- gbml.train on a partitioned table whose partitions are postgres_fdw foreign
-- tables trains on the shards where the rows are: the coordinator connects to
-- each foreign server (as the caller, through the user mapping) and calls these
-- functions there, one query per step to every shard at once.  A shard keeps
-- its rows and working state for the length of that connection's transaction;
-- nothing is written on the shard.  Internal: called by the coordinator only.
CREATE FUNCTION gbml._shard_open(source text, algorithm text, params jsonb) RETURNS bytea
    AS 'MODULE_PATHNAME', 'gbml_shard_open' LANGUAGE C VOLATILE;
CREATE FUNCTION gbml._shard_step(request bytea) RETURNS bytea
    AS 'MODULE_PATHNAME', 'gbml_shard_step' LANGUAGE C VOLATILE;
CREATE FUNCTION gbml._shard_close() RETURNS void
    AS 'MODULE_PATHNAME', 'gbml_shard_close' LANGUAGE C VOLATILE;
-- 1 while this session holds a shard's training state, else 0
CREATE FUNCTION gbml._shard_sessions() RETURNS integer
    AS 'MODULE_PATHNAME', 'gbml_shard_sessions' LANGUAGE C VOLATILE;
