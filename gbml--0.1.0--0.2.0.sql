-- gbml 0.1.0 -> 0.2.0: the GPU runtime (GPU part 1).
-- gbml.devices() also says whether a device is the CPU emulation and how
-- much memory is free; gbml.gpu_resources() shows what this backend holds
-- on the GPU (leak checks after ERROR and cancel).
\echo Use "ALTER EXTENSION gbml UPDATE TO '0.2.0'" to load this file. \quit

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
