-- SAGA on the GPU (mini-batch SAGA) through SQL, on the CPU emulation of CUDA
-- (gbml_cuda_emu): it trains, predicts what the CPU's model predicts (another
-- algorithm, so other bytes, the same optimum), says so in the model and the
-- run report; the same bytes on every run and thread count; GROUP BY and the
-- registry; a bad batch_size and the GPU budget are clear ERRORs; nothing held
-- on the device afterwards.
SET gbml.progress_interval = 0;
LOAD 'gbml';
SET gbml.cuda_library = 'gbml_cuda_emu';

CREATE TABLE saga_rows AS
SELECT i, ARRAY[((i * 7919) % 1000) / 500.0 - 1, ((i * 104729) % 1000) / 500.0 - 1,
                ((i * 31) % 97) / 97.0, (hashint4(i) % 1000) / 100.0, (i % 7) * 10]::real[] AS f,
       i % 2 AS part
  FROM generate_series(1, 3000) AS i;
ALTER TABLE saga_rows ADD COLUMN y real, ADD COLUMN cls real, ADD COLUMN w real;
UPDATE saga_rows SET y = 3 * f[1] - 2 * f[2] + 0.1 * f[4] + 0.5 + ((hashint4(i * 13) % 100) / 200.0),
                     cls = (f[1] + f[2] + ((hashint4(i * 17) % 100) / 150.0) > 0.3)::int,
                     w = 1 + i % 3;

-- logistic, C = 1, and squared with an elastic net (standardized: f[5] spans 0..60, and raw
-- features that far apart take thousands of epochs on either device): the GPU models predict
-- what the CPU models predict
CREATE TABLE saga_models AS
SELECT (SELECT gbml.saga_fit(f, cls, '{"C": 1, "standardize": true, "tol": 1e-9, "max_iter": 3000, "device": "cpu"}') FROM saga_rows) AS cpu_log,
       (SELECT gbml.saga_fit(f, cls, '{"C": 1, "standardize": true, "tol": 1e-9, "max_iter": 3000, "device": "gpu"}') FROM saga_rows) AS gpu_log,
       (SELECT gbml.saga_fit(f, y, w, '{"loss": "squared", "alpha": 0.05, "l1_ratio": 0.5, "standardize": true,
                                        "tol": 1e-9, "max_iter": 3000, "device": "cpu"}') FROM saga_rows) AS cpu_enet,
       (SELECT gbml.saga_fit(f, y, w, '{"loss": "squared", "alpha": 0.05, "l1_ratio": 0.5, "standardize": true,
                                        "tol": 1e-9, "max_iter": 3000, "device": "gpu", "batch_size": 64}') FROM saga_rows) AS gpu_enet;
SELECT max(abs(gbml.predict_proba(cpu_log, f) - gbml.predict_proba(gpu_log, f))) < 1e-4 AS same_probabilities,
       bool_and(gbml.predict(cpu_log, f) = gbml.predict(gpu_log, f)) AS same_classes,
       max(abs(gbml.predict(cpu_enet, f) - gbml.predict(gpu_enet, f))) < 1e-4 AS same_enet_predictions,
       cpu_log <> gpu_log AS other_bytes
  FROM saga_rows, saga_models GROUP BY cpu_log, gpu_log;
-- elastic net: the same weights are exactly zero on both devices
SELECT (SELECT gbml.model_json(cpu_enet) -> 'coef' ->> 2)::float8 = 0 AS cpu_zero,
       (SELECT gbml.model_json(gpu_enet) -> 'coef' ->> 2)::float8 = 0 AS gpu_zero,
       gbml.model_info(cpu_enet) ->> 'n_nonzero' = gbml.model_info(gpu_enet) ->> 'n_nonzero' AS same_sparsity
  FROM saga_models;

-- the model says which solver made it; the report says where and how
SELECT m ->> 'solver' AS solver, m ->> 'batch_size' AS batch_size, m ->> 'stop_reason' AS stop_reason,
       (m ->> 'step_size')::float8 > 0 AS has_step, (m ->> 'L_max')::float8 >= (m ->> 'L')::float8 AS l_max_bounds_l,
       gbml.model_info(cpu_log) ->> 'solver' AS cpu_solver
  FROM (SELECT gbml.model_info(gpu_log) AS m, cpu_log FROM saga_models) s;
SELECT length(gbml.saga_fit(f, cls, '{"device": "gpu", "max_iter": 5, "tol": 0}')) > 0 AS trained FROM saga_rows;
SELECT r ->> 'device' AS device, r ->> 'gpu_backend' AS backend, r -> 'timings' ->> 'device' AS solver_device,
       r -> 'timings' ->> 'rows_on_device' AS rows_on_device, r -> 'timings' ->> 'batch_size' AS batch_size,
       r -> 'timings' ->> 'epochs' AS epochs, (r -> 'timings' ->> 'step_size')::float8 > 0 AS has_step,
       (r -> 'timings' ->> 'h2d_bytes')::float8 >= 3000 * 5 * 4 AS rows_copied, (r ->> 'gpu_h2d_mb')::float8 > 0 AS h2d_reported
  FROM gbml.last_training_report() AS r;

-- the same bytes on every run and thread count; a batch larger than the table is the table
SELECT (SELECT gbml.saga_fit(f, cls, '{"device": "gpu", "threads": 1, "random_seed": 4, "max_iter": 20}') FROM saga_rows)
     = (SELECT gbml.saga_fit(f, cls, '{"device": "gpu", "threads": 2, "random_seed": 4, "max_iter": 20}') FROM saga_rows) AS same_bytes_any_threads;
SELECT gbml.model_info(gbml.saga_fit(f, cls, '{"device": "gpu", "batch_size": 5000, "max_iter": 3}')) ->> 'batch_size' AS whole_table
  FROM saga_rows;

-- GROUP BY: one model per group, each close to its CPU model
SELECT part, max(abs(gbml.predict(cpu.model, f) - gbml.predict(gpu.model, f))) < 1e-4 AS same_predictions
  FROM (SELECT part, gbml.saga_fit(f, y, '{"loss": "squared", "standardize": true, "tol": 1e-9, "max_iter": 3000, "device": "cpu"}') AS model
          FROM saga_rows GROUP BY part) cpu
  JOIN (SELECT part, gbml.saga_fit(f, y, '{"loss": "squared", "standardize": true, "tol": 1e-9, "max_iter": 3000, "device": "gpu"}') AS model
          FROM saga_rows GROUP BY part) gpu USING (part)
  JOIN saga_rows USING (part)
 GROUP BY part ORDER BY part;

-- the registry records the device and the report
SELECT gbml.train('saga_gpu', 'saga', 'SELECT f AS features, cls AS label FROM saga_rows',
                  '{"C": 1, "standardize": true, "eval_fraction": 0.2, "device": "gpu", "batch_size": 32}') > 0 AS trained;
SELECT version, device, timings -> 'timings' ->> 'batch_size' AS batch_size, metrics ? 'eval_objective' AS has_eval
  FROM gbml.models WHERE name = 'saga_gpu' ORDER BY version;
DELETE FROM gbml.models WHERE name = 'saga_gpu';

-- errors: a bad batch_size, the GPU budget
SELECT gbml.saga_fit(f, cls, '{"device": "gpu", "batch_size": -1}') FROM saga_rows;
SELECT gbml.saga_fit(f, cls, '{"device": "gpu", "batch_size": 2000000}') FROM saga_rows;
SELECT gbml.saga_fit(f, cls, '{"device": "gpu", "batch_size": "big"}') FROM saga_rows;
SELECT gbml.saga_fit(f, cls, '{"device": "gpu", "gpu_memory_limit_mb": 0.001}') FROM saga_rows;

-- past a small memory budget the rows go to temporary files, in smaller chunks:
-- the same bytes as in memory (the device's chunks fall every 256 rows; they
-- followed the dataset's, and a budget's chunks gave other sums); too small a
-- budget names what the host holds (it was the plain "memory limit exceeded")
CREATE TABLE saga_wide AS
SELECT i, ARRAY(SELECT ((hashint4(i * 31 + j) % 1000) / 100.0)::real FROM generate_series(1, 40) AS j) AS f,
       (hashint4(i * 3) & 1)::real AS y
  FROM generate_series(1, 30000) AS i;
CREATE TABLE saga_budget AS
SELECT gbml.saga_fit(f, y, '{"device": "gpu", "max_iter": 3, "tol": 0}') AS m FROM saga_wide;
SELECT gbml.saga_fit(f, y, '{"device": "gpu", "max_iter": 3, "tol": 0, "memory_limit_mb": 4}')
       = (SELECT m FROM saga_budget) AS same_bytes_from_files
  FROM saga_wide;
SELECT r ->> 'device' AS device, (r ->> 'spilled_rows')::bigint AS spilled_rows FROM gbml.last_training_report() AS r;
SELECT gbml.saga_fit(f, y, '{"device": "gpu", "threads": 2, "memory_limit_mb": 2}') FROM saga_wide;
DROP TABLE saga_wide, saga_budget;

-- auto never picks the emulation
SELECT length(gbml.saga_fit(f, cls, '{"device": "auto"}')) > 0 AS trained,
       gbml.last_training_report() ->> 'device' AS device FROM saga_rows;

-- nothing held on the device between trainings
SELECT gbml.gpu_resources() - 'backend' AS held;

DROP TABLE saga_models;
DROP TABLE saga_rows;
RESET gbml.cuda_library;
