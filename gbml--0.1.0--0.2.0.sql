-- gbml 0.1.0 -> 0.2.0: the GPU runtime (GPU part 1).
-- gbml.devices() also says whether a device is the CPU emulation and how
-- much memory is free; gbml.gpu_resources() shows what this backend holds
-- on the GPU (leak checks after ERROR and cancel).
\echo Use "ALTER EXTENSION gbml UPDATE TO '0.2.0'" to load this file. \quit

-- gbml.devices() gains two result columns, so it is dropped and re-created: name
-- whatever uses it (a view) instead of PostgreSQL's generic "use DROP ... CASCADE".
DO $$
DECLARE users text;
BEGIN
    SELECT string_agg(DISTINCT CASE WHEN d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
                        THEN (SELECT pg_catalog.pg_describe_object('pg_catalog.pg_class'::pg_catalog.regclass, r.ev_class, 0)
                                FROM pg_catalog.pg_rewrite r WHERE r.oid = d.objid)
                        ELSE pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid) END, ', ') INTO users
      FROM pg_catalog.pg_depend d
     WHERE d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND d.refobjid = 'gbml.devices()'::pg_catalog.regprocedure AND d.deptype = 'n';
    IF users IS NOT NULL THEN
        RAISE EXCEPTION 'gbml 0.2.0 changes the result columns of gbml.devices(); these objects use it: %', users
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = 'Drop them, run ALTER EXTENSION gbml UPDATE, then re-create them (free_mb and emulated are added).';
    END IF;
END $$;
DROP FUNCTION gbml.devices();
CREATE FUNCTION gbml.devices()
    RETURNS TABLE (id integer, name text, memory_mb bigint, compute_capability text,
                   free_mb bigint, emulated boolean)
    AS 'MODULE_PATHNAME', 'gbml_devices' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION gbml.devices() IS
    'GPUs usable by the CUDA backend that gbml.cuda_library names (empty without one); emulated = the CPU emulation';

CREATE FUNCTION gbml.gpu_resources() RETURNS jsonb
    AS 'MODULE_PATHNAME', 'gbml_sql_gpu_resources' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION gbml.gpu_resources() IS
    'What this backend holds through the CUDA backend now: contexts, device and pinned bytes and allocations, streams, events (all 0 between trainings)';

-- Every scoring function takes a model bytea or a registered name (the deployed
-- version, looked up once per query): K-Means' two get their by-name forms.
CREATE FUNCTION gbml.kmeans_assign(name text, features real[]) RETURNS integer
    AS 'MODULE_PATHNAME', 'gbml_kmeans_assign_name' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gbml.kmeans_distance(name text, features real[]) RETURNS double precision
    AS 'MODULE_PATHNAME', 'gbml_kmeans_distance_name' LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- gbml.deploy says at once that a standby or a read-only transaction cannot change
-- the deployed version (it failed deep in its UPDATE with PostgreSQL's generic message).
CREATE OR REPLACE FUNCTION gbml.deploy(name text, version integer) RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target bigint;
BEGIN
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
