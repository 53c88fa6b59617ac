-- The GPU backend through SQL, on the CPU emulation of CUDA (gbml_cuda_emu):
-- every boosting loss trains on the GPU with the CPU's model bytes; device
-- choice, budget, fallbacks and errors; nothing held on the device after
-- trainings, errors and 100 cancelled trainings.
SET gbml.progress_interval = 0;
-- a backend that never asks for a GPU never loads a CUDA library
SELECT gbml.predict(gbml.boost_fit(ARRAY[i, i % 3]::real[], i::real, '{"iterations": 2, "device": "cpu"}'),
                    ARRAY[1, 2]::real[]) > 0 AS scored
  FROM generate_series(1, 50) AS i;
SELECT pg_read_file('/proc/' || pg_backend_pid() || '/maps') ~ 'gbml_cuda' AS cuda_library_loaded;
LOAD 'gbml';
-- only a superuser picks the library, and only a plain name in $libdir
CREATE ROLE gbml_gpu_user;
SET ROLE gbml_gpu_user;
SET gbml.cuda_library = 'gbml_cuda_emu';
RESET ROLE;
SET gbml.cuda_library = '../../tmp/evil';
SET gbml.cuda_library = 'gbml_cuda_emu';
SELECT id, name, compute_capability, emulated, memory_mb > 0 AS has_memory FROM gbml.devices();

CREATE TABLE gpu_rows AS
SELECT i, ARRAY[(hashint4(i) % 1000) / 1000.0, (hashint4(i + 7) % 100) / 100.0, (i % 13) / 13.0,
                CASE WHEN i % 17 = 0 THEN 'NaN' ELSE (hashint4(i * 3) % 50) / 50.0 END,
                (i % 5)]::real[] AS f,
       ((hashint4(i) % 1000) / 500.0 + (i % 13) / 13.0 + (hashint4(i * 11) % 10) / 20.0)::real AS y,
       (i / 19)::bigint AS g, (1 + i % 4)::real AS w, i % 2 AS part
  FROM generate_series(1, 2500) AS i;

-- every loss: the GPU gives the CPU's bytes (subsample and a deep tree too; MultiClass: a tree a class)
SELECT loss,
       (SELECT gbml.boost_fit(f, CASE WHEN loss = 'Logloss' THEN (y > 1.5)::int::real WHEN loss = 'MultiClass' THEN greatest(0, least(floor(y), 3))::real WHEN grouped THEN round(y)::real ELSE y END,
                              CASE WHEN grouped THEN g END, params || '{"device": "cpu"}') FROM gpu_rows)
     = (SELECT gbml.boost_fit(f, CASE WHEN loss = 'Logloss' THEN (y > 1.5)::int::real WHEN loss = 'MultiClass' THEN greatest(0, least(floor(y), 3))::real WHEN grouped THEN round(y)::real ELSE y END,
                              CASE WHEN grouped THEN g END, params || '{"device": "gpu"}') FROM gpu_rows) AS same_bytes,
       gbml.last_training_report() ->> 'device' AS last_device,
       gbml.last_training_report() ->> 'gpu_backend' AS backend
  FROM (VALUES ('RMSE', false, jsonb_build_object('loss', 'RMSE', 'iterations', 15)),
               ('RMSE', false, jsonb_build_object('loss', 'RMSE', 'iterations', 4, 'depth', 9, 'border_count', 255, 'subsample', 0.8)),
               ('Logloss', false, jsonb_build_object('loss', 'Logloss', 'iterations', 15, 'subsample', 0.7)),
               ('Logloss', false, jsonb_build_object('loss', 'Logloss', 'iterations', 10, 'score_function', 'L2', 'leaf_estimation_iterations', 3, 'random_strength', 1)),
               ('QueryRMSE', true, jsonb_build_object('loss', 'QueryRMSE', 'iterations', 10)),
               ('PairLogit', true, jsonb_build_object('loss', 'PairLogit', 'iterations', 10)),
               ('YetiRank', true, jsonb_build_object('loss', 'YetiRank', 'iterations', 10, 'subsample', 0.8)),
               ('LambdaMART', true, jsonb_build_object('loss', 'LambdaMART', 'iterations', 10)),
               ('MultiClass', false, jsonb_build_object('loss', 'MultiClass', 'iterations', 6, 'subsample', 0.8))) AS c(loss, grouped, params)
 ORDER BY 1, 2;

-- GROUP BY: one model per group, each the CPU's
SELECT part, cpu.model = gpu.model AS same_bytes
  FROM (SELECT part, gbml.boost_fit(f, y, '{"iterations": 8, "device": "cpu"}') AS model FROM gpu_rows GROUP BY part) cpu
  JOIN (SELECT part, gbml.boost_fit(f, y, '{"iterations": 8, "device": "gpu"}') AS model FROM gpu_rows GROUP BY part) gpu
 USING (part) ORDER BY part;

-- grow_policy Depthwise (a split per node) trains on the GPU too, with the CPU's bytes
SELECT c.name,
       (SELECT gbml.boost_fit(f, CASE WHEN params ->> 'loss' = 'Logloss' THEN (y > 1.5)::int::real WHEN params ->> 'loss' = 'MultiClass' THEN greatest(0, least(floor(y), 3))::real ELSE y END,
                              params || '{"grow_policy": "Depthwise", "device": "cpu"}') FROM gpu_rows)
     = (SELECT gbml.boost_fit(f, CASE WHEN params ->> 'loss' = 'Logloss' THEN (y > 1.5)::int::real WHEN params ->> 'loss' = 'MultiClass' THEN greatest(0, least(floor(y), 3))::real ELSE y END,
                              params || '{"grow_policy": "Depthwise", "device": "gpu"}') FROM gpu_rows) AS same_bytes,
       gbml.last_training_report() ->> 'device' AS last_device
  FROM (VALUES ('RMSE', jsonb_build_object('loss', 'RMSE', 'iterations', 8)),
               ('RMSE depth 9, subsample', jsonb_build_object('loss', 'RMSE', 'iterations', 4, 'depth', 9, 'subsample', 0.8, 'min_child_weight', 0)),
               ('Logloss, random_strength', jsonb_build_object('loss', 'Logloss', 'iterations', 10, 'random_strength', 1)),
               ('MultiClass', jsonb_build_object('loss', 'MultiClass', 'iterations', 5)),
               ('MultiClass, XGBoost''s hessian', jsonb_build_object('loss', 'MultiClass', 'iterations', 5, 'multiclass_hessian_factor', 2))) AS c(name, params)
 ORDER BY 1;
-- categories split as sets by each node, from a table's columns (the device applies each node's set)
CREATE TABLE gpu_cats AS
SELECT i, (ARRAY['oslo', 'lima', 'rome', 'kyiv', 'pune', 'baku', 'riga', 'suva'])[1 + i % 8] AS city, (i % 10) / 10.0 AS x,
       (i % 8 IN (1, 4, 6) OR (i % 8 = 2 AND i % 10 > 4) OR hashint4(i) % 7 = 0)::int AS label
  FROM generate_series(1, 3000) AS i;
SELECT gbml.train('gpu_sets', 'boost', 'SELECT city, x, label FROM gpu_cats',
                  '{"label_column": "label", "loss": "Logloss", "iterations": 12, "depth": 4, "grow_policy": "Depthwise",
                    "categorical_split": "sets", "device": "gpu"}') > 0 AS trained;
SELECT gbml.train('gpu_sets', 'boost', 'SELECT city, x, label FROM gpu_cats',
                  '{"label_column": "label", "loss": "Logloss", "iterations": 12, "depth": 4, "grow_policy": "Depthwise",
                    "categorical_split": "sets", "device": "cpu"}') > 0 AS trained;
SELECT version, device, gbml.model_info(model) -> 'categorical' ->> 'split_as_sets' AS split_as_sets,
       md5(model) = (SELECT md5(model) FROM gbml.models WHERE name = 'gpu_sets' AND version = 1) AS same_as_v1
  FROM gbml.models WHERE name = 'gpu_sets' ORDER BY version;
DELETE FROM gbml.models WHERE name = 'gpu_sets';
DROP TABLE gpu_cats;

-- the registry: eval set, early stopping, the device recorded in gbml.models
SELECT gbml.train('gpu_ranker', 'boost', 'SELECT f AS features, round(y)::real AS label, g AS group_id FROM gpu_rows',
                  '{"iterations": 40, "eval_fraction": 0.25, "early_stopping_rounds": 5, "device": "gpu"}') > 0 AS trained;
SELECT gbml.train('gpu_ranker', 'boost', 'SELECT f AS features, round(y)::real AS label, g AS group_id FROM gpu_rows',
                  '{"iterations": 40, "eval_fraction": 0.25, "early_stopping_rounds": 5, "device": "cpu"}') > 0 AS trained;
SELECT version, device, (timings ->> 'device') AS report_device,
       md5(model) = (SELECT md5(model) FROM gbml.models WHERE name = 'gpu_ranker' AND version = 1) AS same_as_v1
  FROM gbml.models WHERE name = 'gpu_ranker' ORDER BY version;

-- rows stream to the device during the scan (once the first chunk is full: 8,192 rows of
-- 40 features here), in any order, and train the CPU's bytes; a parallel plan's partial
-- states stay on the host and give the same bytes too
CREATE TABLE wide_rows AS
SELECT i, array_agg(CASE WHEN (i + j) % 53 = 0 THEN 'NaN'::real ELSE ((hashint4(i * 41 + j) % 1000) / 1000.0)::real END ORDER BY j) AS f,
       ((hashint4(i * 41 + 1) % 1000) / 1000.0 + (hashint4(i * 41 + 2) % 1000) / 500.0)::real AS y
  FROM generate_series(1, 20000) AS i, generate_series(1, 40) AS j GROUP BY i;
SELECT (SELECT gbml.boost_fit(f, y, '{"iterations": 6, "device": "cpu"}') FROM wide_rows)
     = (SELECT gbml.boost_fit(f, y, '{"iterations": 6, "device": "gpu"}') FROM (SELECT * FROM wide_rows ORDER BY hashint4(i)) s) AS same_bytes,
       gbml.last_training_report() ->> 'device_note' AS how;
SELECT (SELECT gbml.boost_fit(f, y, '{"iterations": 4, "grow_policy": "Depthwise", "device": "cpu"}') FROM wide_rows)
     = (SELECT gbml.boost_fit(f, y, '{"iterations": 4, "grow_policy": "Depthwise", "device": "gpu"}') FROM (SELECT * FROM wide_rows ORDER BY hashint4(i)) s) AS depthwise_same_bytes,
       gbml.last_training_report() ->> 'device_note' AS how;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
ALTER TABLE wide_rows SET (parallel_workers = 2);
SELECT (SELECT gbml.boost_fit(f, y, '{"iterations": 6, "device": "cpu"}') FROM wide_rows)
     = (SELECT gbml.boost_fit(f, y, '{"iterations": 6, "device": "gpu"}') FROM wide_rows) AS same_bytes_parallel;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
SELECT gbml.train('gpu_streamed', 'boost', 'SELECT f AS features, y AS label FROM wide_rows',
                  '{"iterations": 6, "eval_fraction": 0.2, "device": "gpu"}') > 0 AS trained;
SELECT gbml.train('gpu_streamed', 'boost', 'SELECT f AS features, y AS label FROM wide_rows ORDER BY i DESC',
                  '{"iterations": 6, "eval_fraction": 0.2, "device": "cpu"}') > 0 AS trained;
SELECT version, device, timings ->> 'device_note' AS how,
       md5(model) = (SELECT md5(model) FROM gbml.models WHERE name = 'gpu_streamed' AND version = 1) AS same_as_v1
  FROM gbml.models WHERE name = 'gpu_streamed' ORDER BY version;
DELETE FROM gbml.models WHERE name = 'gpu_streamed';
DROP TABLE wide_rows;

-- auto never picks the emulation; K-Means trains on the GPU too (sql/14 compares its bytes)
SELECT length(gbml.boost_fit(f, y, '{"iterations": 2, "device": "auto"}')) > 0 AS trained,
       gbml.last_training_report() ->> 'device' AS device FROM gpu_rows;
SELECT gbml.kmeans_assign(gbml.kmeans_fit(f[1:3], 3, '{"device": "gpu", "random_seed": 1}'), ARRAY[0.5, 0.5, 0.5]::real[]) >= 0 AS clustered,
       gbml.last_training_report() ->> 'device' AS device
  FROM gpu_rows;

-- the GPU memory budget: an ERROR with a hint under "gpu"; a wrong library or gpu_id is clear too
SELECT gbml.boost_fit(f, y, '{"iterations": 2, "device": "gpu", "gpu_memory_limit_mb": 0.01}') FROM gpu_rows;
SET gbml.gpu_memory_limit = '1MB';
SELECT gbml.boost_fit(f, y, '{"iterations": 2, "device": "gpu"}') IS NOT NULL AS fits_in_1mb FROM gpu_rows;
RESET gbml.gpu_memory_limit;
SELECT gbml.boost_fit(f, y, '{"iterations": 2, "device": "gpu", "gpu_id": 3}') FROM gpu_rows;
SET gbml.cuda_library = 'gbml_no_such_backend';
SELECT gbml.boost_fit(f, y, '{"iterations": 2, "device": "gpu"}') FROM gpu_rows;
SELECT count(*) AS devices FROM gbml.devices();
SET gbml.cuda_library = 'gbml_cuda_emu';

-- small host budgets: a training aggregate's whole rows with a text column go
-- to temporary files on the GPU too (they stayed on the host: an ERROR past
-- the budget) and give the CPU's bytes in any scan order; a budget too small
-- names the step (a chunk as large as the default's failed with the plain
-- "memory limit exceeded")
CREATE TABLE gpu_cats AS
SELECT i, 'city ' || (hashint4(i) & 63) AS city,
       ARRAY(SELECT ((hashint4(i * 31 + j) % 1000) / 100.0)::real FROM generate_series(1, 40) AS j) AS f,
       (hashint4(i * 3) & 1)::real AS y
  FROM generate_series(1, 30000) AS i;
CREATE TABLE gpu_cat_fits AS
SELECT gbml.boost_fit(s, '{"label_column": "y", "exclude_columns": ["i"], "iterations": 3, "device": "cpu"}') AS m
  FROM gpu_cats s;
SELECT gbml.boost_fit(s, '{"label_column": "y", "exclude_columns": ["i"], "iterations": 3, "device": "gpu", "memory_limit_mb": 8}')
       = (SELECT m FROM gpu_cat_fits) AS gpu_spilled_same_bytes
  FROM (SELECT * FROM gpu_cats ORDER BY i DESC) s;
SELECT r ->> 'device' AS device, (r ->> 'spilled_rows')::bigint AS spilled_rows FROM gbml.last_training_report() AS r;
SELECT gbml.boost_fit(f, y, '{"iterations": 2, "device": "gpu", "threads": 2, "memory_limit_mb": 2}') FROM gpu_cats;
-- and no budget gives the plain message on the GPU (budgets_named: 00_setup)
SELECT shape, budgets_named(fit) AS outcome FROM (VALUES
  ('boost, eval share', $q$SELECT gbml.boost_fit(f, y, '{"iterations": 2, "eval_fraction": 0.2, "device": "gpu", "threads": 2, "memory_limit_mb": %s}') FROM gpu_cats$q$),
  ('boost rows, eval share', $q$SELECT gbml.boost_fit(s, '{"label_column": "y", "exclude_columns": ["i"], "iterations": 2, "eval_fraction": 0.2, "device": "gpu", "threads": 2, "memory_limit_mb": %s}') FROM gpu_cats s$q$),
  ('kmeans one-hot', $q$SELECT gbml.kmeans_fit(s, 6, '{"exclude_columns": ["i", "y"], "one_hot": true, "device": "gpu", "threads": 2, "memory_limit_mb": %s}') FROM gpu_cats s$q$),
  ('saga arrays', $q$SELECT gbml.saga_fit(f, y, '{"max_iter": 2, "device": "gpu", "threads": 2, "memory_limit_mb": %s}') FROM gpu_cats$q$),
  ('saga one-hot', $q$SELECT gbml.saga_fit(s, '{"label_column": "y", "exclude_columns": ["i"], "max_iter": 2, "device": "gpu", "threads": 2, "memory_limit_mb": %s}') FROM gpu_cats s$q$)
) AS shapes (shape, fit);
DROP TABLE gpu_cats, gpu_cat_fits;

-- this backend asked: the emulation is loaded now (and only here, never in the postmaster)
SELECT pg_read_file('/proc/' || pg_backend_pid() || '/maps') ~ 'gbml_cuda_emu' AS emulation_loaded,
       pg_read_file('/proc/' || split_part(pg_read_file('postmaster.pid'), E'\n', 1) || '/maps') ~ 'gbml_cuda' AS in_postmaster;
-- nothing held on the device between trainings
SELECT gbml.gpu_resources() - 'backend' AS held;

-- 100 trainings cancelled by statement_timeout in the middle: nothing leaks
CREATE TABLE cancel_outcomes (outcome text);
CREATE FUNCTION try_gpu_fit() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM gbml.boost_fit(f, y, '{"iterations": 100000, "device": "gpu"}') FROM gpu_rows;
    INSERT INTO cancel_outcomes VALUES ('finished');
EXCEPTION WHEN query_canceled THEN
    INSERT INTO cancel_outcomes VALUES ('canceled');
END $$;
SET statement_timeout = '120ms';
\set ECHO none
\o /dev/null
SELECT 'SELECT try_gpu_fit()' FROM generate_series(1, 100) \gexec
\o
\set ECHO all
RESET statement_timeout;
SELECT outcome, count(*) FROM cancel_outcomes GROUP BY outcome;
SELECT gbml.gpu_resources() - 'backend' AS held_after_cancels;
DROP FUNCTION try_gpu_fit();
DROP TABLE cancel_outcomes, gpu_rows;
DELETE FROM gbml.models WHERE name = 'gpu_ranker';
DROP ROLE gbml_gpu_user;
