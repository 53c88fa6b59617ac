-- Memory is given back: big training blocks (8 MB and more) are mapped
-- outside PostgreSQL's allocator and unmapped when the aggregate's memory
-- context goes away (after the query, and on ERROR) by a helper thread.
-- A leak would show in the backend's resident set: four trainings over
-- ~70 MB of rows each (past the 64 MB from which a helper thread unmaps),
-- two of them ending in an ERROR after collecting, must leave it about where
-- it was.
SET gbml.progress_interval = 0;
CREATE TEMP TABLE wide AS
SELECT i, array_fill(((i % 97) / 97.0)::real, ARRAY[110]) AS f, (i % 3)::real AS y
  FROM generate_series(1, 160000) AS i;
CREATE FUNCTION pg_temp.rss_mb() RETURNS float8 LANGUAGE sql AS $$
  SELECT (regexp_match(pg_read_file('/proc/self/status'), 'VmRSS:\s+(\d+)'))[1]::float8 / 1024
$$;
-- warm up (first use loads the library and fills caches)
SELECT length(gbml.mean_fit(f, y)) > 0 AS trained FROM wide;
SELECT pg_sleep(0.3);
CREATE TEMP TABLE rss_before AS SELECT pg_temp.rss_mb() AS mb;
SELECT length(gbml.mean_fit(f, y)) > 0 AS trained FROM wide;
SELECT length(gbml.mean_fit(f, y)) > 0 AS trained FROM wide;
-- labels 0..2 are not Logloss labels: ERROR after every row was collected
SELECT gbml.boost_fit(f, y, '{"loss": "Logloss", "iterations": 1}') FROM wide;
SELECT gbml.boost_fit(f, y, '{"loss": "Logloss", "iterations": 1}') FROM wide;
-- the unmapping runs on a helper thread: give it up to 5 s on a busy machine
CREATE FUNCTION pg_temp.rss_settled(base float8) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. 50 LOOP
    IF pg_temp.rss_mb() - base < 40 THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.1);
  END LOOP;
  RETURN false;
END $$;
SELECT pg_temp.rss_settled(mb) AS memory_given_back FROM rss_before;

-- Big engine blocks are mapped directly but still count in their context's
-- memory, so a hashed GROUP BY over a fit aggregate spills at work_mem
-- instead of holding every group (each group here allocates an 8 MB chunk).
CREATE TEMP TABLE grouped AS
SELECT i / 10000 AS g, array_fill(((i % 89) / 89.0)::real, ARRAY[32]) AS f, (i % 5)::real AS y
  FROM generate_series(0, 29999) AS i;
ANALYZE grouped;
CREATE FUNCTION pg_temp.hash_batches(q text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, COSTS OFF, TIMING OFF) ' || q INTO plan;
  RETURN (plan -> 0 -> 'Plan' ->> 'HashAgg Batches')::int;
END $$;
SET enable_sort = off;
SET max_parallel_workers_per_gather = 0;
SET work_mem = '4MB';
SELECT pg_temp.hash_batches('SELECT g, gbml.mean_fit(f, y) FROM grouped GROUP BY g') > 1 AS spilled;
SELECT g, length(gbml.mean_fit(f, y)) > 0 AS trained FROM grouped GROUP BY g ORDER BY g;
RESET work_mem;
RESET max_parallel_workers_per_gather;
RESET enable_sort;
