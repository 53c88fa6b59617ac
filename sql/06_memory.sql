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
SELECT pg_sleep(0.5);
SELECT pg_temp.rss_mb() - mb < 40 AS memory_given_back FROM rss_before;
