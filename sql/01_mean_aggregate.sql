-- The aggregate plumbing, exercised with the trivial "mean" model kind:
-- training, scoring, introspection, GROUP BY, parallel plans, and input errors.
CREATE TABLE pts AS
SELECT i AS id, (i % 3)::bigint AS grp,
       ARRAY[(i % 7)::real, (i % 11)::real / 10, 1]::real[] AS features,
       ((i % 5) + 10 * (i % 3))::real AS label
  FROM generate_series(1, 3000) AS i;

CREATE TABLE m AS SELECT gbml.mean_fit(features, label) AS model FROM pts;
SELECT substr(model, 1, 4) AS magic, length(model) > 24 AS has_payload FROM m;
SELECT round(gbml.predict(model, ARRAY[0, 0, 0]::real[])::numeric, 6) AS mean_label,
       (SELECT round(avg(label)::numeric, 6) FROM pts) AS expected FROM m;
SELECT gbml.model_info(model) - 'prepare_seconds' - 'train_seconds' - 'timings' AS info FROM m;
SELECT gbml.model_json(model) -> 'feature_means' AS feature_means FROM m;
SELECT * FROM gbml.feature_importance((SELECT model FROM m));

-- one model per group
SELECT grp, round(gbml.predict(gbml.mean_fit(features, label), ARRAY[1, 1, 1]::real[])::numeric, 4) AS mean
  FROM pts GROUP BY grp ORDER BY grp;

-- weighted rows through params-free overload and params overload
SELECT round(gbml.predict(gbml.mean_fit(features, label, '{"passes": 3}'), ARRAY[1, 2, 3]::real[])::numeric, 6)
  FROM pts;

-- a parallel plan gives the same model bytes as a serial one
SET max_parallel_workers_per_gather = 0;
CREATE TABLE serial_model AS SELECT gbml.mean_fit(features, label) AS model FROM pts;
-- the trainers that walk chunks (K-Means sums, SAGA's epoch plan) too: merged partial
-- states are rewritten into the serial chunk layout before training
CREATE TABLE serial_others AS
SELECT gbml.kmeans_fit(features, 4) AS km,
       gbml.saga_fit(features, (label > 12)::int::real, '{"alpha": 0.01}') AS sg,
       gbml.boost_fit(features, label, '{"iterations": 5}') AS bo
  FROM pts;
SET max_parallel_workers_per_gather = 2;
-- the partial-state functions are costed high so plans stay serial: make them cheap to force parallel
ALTER FUNCTION gbml._fit_serialize(internal) COST 1;
ALTER FUNCTION gbml._fit_deserialize(bytea, internal) COST 1;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT gbml.mean_fit(features, label) FROM pts;
CREATE TABLE parallel_model AS SELECT gbml.mean_fit(features, label) AS model FROM pts;
SELECT (SELECT model FROM serial_model) = (SELECT model FROM parallel_model) AS same_bytes,
       (SELECT model FROM serial_model) = (SELECT model FROM m) AS same_as_first;
CREATE TABLE parallel_others AS
SELECT gbml.kmeans_fit(features, 4) AS km,
       gbml.saga_fit(features, (label > 12)::int::real, '{"alpha": 0.01}') AS sg,
       gbml.boost_fit(features, label, '{"iterations": 5}') AS bo
  FROM pts;
SELECT s.km = p.km AS kmeans_same, s.sg = p.sg AS saga_same, s.bo = p.bo AS boost_same
  FROM serial_others s, parallel_others p;
RESET max_parallel_workers_per_gather;
ALTER FUNCTION gbml._fit_serialize(internal) COST 100000000;
ALTER FUNCTION gbml._fit_deserialize(bytea, internal) COST 100000000;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET parallel_leader_participation;

-- bad input: every problem is an ERROR that names it
SELECT gbml.mean_fit(f, l) FROM (VALUES (ARRAY[1, 2]::real[], 1::real), (NULL, 2)) AS t(f, l);
SELECT gbml.mean_fit(f, l) FROM (VALUES (ARRAY[1, 2]::real[], 1::real), (ARRAY[1, NULL]::real[], 2)) AS t(f, l);
SELECT gbml.mean_fit(f, l) FROM (VALUES (ARRAY[1, 2]::real[], 1::real), (ARRAY[1, 2, 3]::real[], 2)) AS t(f, l);
SELECT gbml.mean_fit(f, l) FROM (VALUES (ARRAY[1, 2]::real[], 1::real), (ARRAY[1, 'NaN']::real[], 2)) AS t(f, l);
SELECT gbml.mean_fit(f, l) FROM (VALUES (ARRAY[1, 2]::real[], 1::real), (ARRAY[1, 'Infinity']::real[], 2)) AS t(f, l);
SELECT gbml.mean_fit(f, l) FROM (VALUES (ARRAY[1, 2]::real[], 'NaN'::real)) AS t(f, l);
SELECT gbml.mean_fit(f, l) FROM (VALUES (ARRAY[1, 2]::real[], NULL::real)) AS t(f, l);
SELECT gbml.mean_fit(f, l) FROM (VALUES (ARRAY[[1, 2], [3, 4]]::real[], 1::real)) AS t(f, l);
SELECT gbml.mean_fit(f, l) FROM (VALUES ('{}'::real[], 1::real)) AS t(f, l);
SELECT gbml.mean_fit(features, label) FROM pts WHERE false;
-- bad params
SELECT gbml.mean_fit(features, label, '{"passes": 0}') FROM pts;
SELECT gbml.mean_fit(features, label, '{"passes": "many"}') FROM pts;
SELECT gbml.mean_fit(features, label, '{"pases": 2}') FROM pts;
SELECT gbml.mean_fit(features, label, '[1, 2]') FROM pts;
SELECT gbml.mean_fit(features, label, '{"threads": -1}') FROM pts;
SELECT gbml.mean_fit(features, label, '{"device": "tpu"}') FROM pts;
SELECT gbml.mean_fit(features, label, '{"threads": {"a": 1}}') FROM pts;
-- JSON null means "the default"
SELECT length(gbml.mean_fit(features, label, '{"passes": null}')) > 0 AS ok FROM pts;

-- scoring errors
SELECT gbml.predict(model, ARRAY[1, 2]::real[]) FROM m;
SELECT gbml.predict(model, ARRAY[1, 'NaN', 2]::real[]) FROM m;
SELECT gbml.predict(model, ARRAY[1, NULL, 2]::real[]) FROM m;
SELECT gbml.kmeans_assign(model, ARRAY[1, 2, 3]::real[]) FROM m;
SELECT gbml.predict(model, NULL) IS NULL AS null_in_null_out FROM m;

-- devices and memory budget
SET gbml.device = 'gpu';
-- terse: the DETAIL (why no GPU is usable) differs between a build with and without nvcc
\set VERBOSITY terse
SELECT gbml.mean_fit(features, label) FROM pts;
\set VERBOSITY default
RESET gbml.device;
SELECT length(gbml.mean_fit(features, label, '{"device": "cpu"}')) > 0 AS cpu_ok FROM pts;
SET gbml.memory_limit = '1MB';
SELECT gbml.mean_fit(ARRAY[i, i, i, i, i, i, i, i]::real[], 1) FROM generate_series(1, 100000) AS i;
RESET gbml.memory_limit;
SELECT gbml.mean_fit(ARRAY[i, i]::real[], 1, '{"memory_limit_mb": 0.5}') FROM generate_series(1, 100000) AS i;

-- a model stored compressed in line is recognised row after row without decompressing
CREATE TABLE packed (model bytea);
ALTER TABLE packed ALTER COLUMN model SET STORAGE MAIN;
INSERT INTO packed SELECT gbml.mean_fit(array_fill(1::real, ARRAY[800]), (i % 3)::real) FROM generate_series(1, 30) AS i;
SELECT pg_column_compression(model) IS NOT NULL AS compressed, length(model) > 3000 AS big FROM packed;
SELECT count(*) AS rows, min(gbml.predict(p.model, array_fill(i::real, ARRAY[800]))) = 1 AS same_score
  FROM packed p, generate_series(1, 2000) AS i;
