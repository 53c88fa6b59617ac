-- K-Means on the GPU and split between the GPU and the CPU threads (device
-- 'hybrid'), through SQL, on the CPU emulation of CUDA (gbml_cuda_emu):
-- every init, the spherical mode, n_init, given centroids, an eval set and
-- GROUP BY give the CPU's model bytes; the run report shows where the fit ran
-- and the hybrid split of each iteration; errors; nothing held afterwards.
SET gbml.progress_interval = 0;
LOAD 'gbml';
SET gbml.cuda_library = 'gbml_cuda_emu';

CREATE TABLE km_rows AS
SELECT i, ARRAY[(i % 4) * 3 + (hashint4(i) % 1000) / 1000.0, (i % 4 = 1)::int * 5 + (hashint4(i + 7) % 100) / 100.0,
                (hashint4(i * 3) % 50) / 50.0, 1000 + (i % 3) + (hashint4(i * 5) % 10) / 10.0]::real[] AS f,
       i % 2 AS part
  FROM generate_series(1, 3000) AS i;

-- each configuration: CPU, GPU and hybrid give the same bytes
SELECT name,
       (SELECT gbml.kmeans_fit(f, k, params || '{"device": "cpu"}') FROM km_rows)
     = (SELECT gbml.kmeans_fit(f, k, params || '{"device": "gpu"}') FROM km_rows) AS gpu_same_bytes,
       (SELECT gbml.kmeans_fit(f, k, params || '{"device": "cpu"}') FROM km_rows)
     = (SELECT gbml.kmeans_fit(f, k, params || '{"device": "hybrid"}') FROM km_rows) AS hybrid_same_bytes,
       gbml.last_training_report() ->> 'device' AS last_device
  FROM (VALUES ('k-means++', 5, '{"random_seed": 3}'::jsonb),
               ('random, n_init 3', 4, '{"init": "random", "n_init": 3, "random_seed": 8}'),
               ('spherical', 3, '{"spherical": true, "random_seed": 1}'),
               ('given centroids', 2, '{"init": [[0, 0, 0, 1000], [9, 5, 1, 1002]]}')) AS c(name, k, params)
 ORDER BY 1;

-- the report: where the fit ran, device and CPU seconds, the split of every iteration
SELECT gbml.kmeans_fit(f, 6, '{"device": "hybrid", "min_frac_changed": 0, "tol": 0, "max_iter": 5}') IS NOT NULL AS trained
  FROM km_rows;
SELECT r ->> 'device' AS device, r -> 'timings' ->> 'device' AS kmeans_device,
       jsonb_array_length(r -> 'timings' -> 'gpu_row_share') AS splits,
       (r -> 'timings' -> 'gpu_row_share' ->> 0)::float8 BETWEEN 0.4 AND 0.6 AS starts_half_and_half,
       (r -> 'timings' ->> 'gpu_seconds')::float8 > 0 AS gpu_worked,
       (r -> 'timings' ->> 'cpu_seconds')::float8 > 0 AS cpu_worked
  FROM gbml.last_training_report() AS r;

-- GROUP BY, and the registry with an eval set: the CPU's bytes and metrics
SELECT part, cpu.model = hyb.model AS same_bytes
  FROM (SELECT part, gbml.kmeans_fit(f, 3, '{"device": "cpu"}') AS model FROM km_rows GROUP BY part) cpu
  JOIN (SELECT part, gbml.kmeans_fit(f, 3, '{"device": "hybrid"}') AS model FROM km_rows GROUP BY part) hyb
 USING (part) ORDER BY part;
SELECT gbml.train('km_gpu', 'kmeans', 'SELECT f AS features FROM km_rows', '{"k": 4, "eval_fraction": 0.2, "device": "gpu"}') > 0 AS trained;
SELECT gbml.train('km_gpu', 'kmeans', 'SELECT f AS features FROM km_rows', '{"k": 4, "eval_fraction": 0.2, "device": "cpu"}') > 0 AS trained;
SELECT version, device, md5(model) = (SELECT md5(model) FROM gbml.models WHERE name = 'km_gpu' AND version = 1) AS same_as_v1,
       metrics ->> 'eval_inertia' = (SELECT metrics ->> 'eval_inertia' FROM gbml.models WHERE name = 'km_gpu' AND version = 1) AS same_eval
  FROM gbml.models WHERE name = 'km_gpu' ORDER BY version;

-- the GPU's budget: an ERROR naming it for device gpu; hybrid keeps what fits and gives the same bytes
SELECT gbml.kmeans_fit(f, 3, '{"device": "gpu", "gpu_memory_limit_mb": 0.3}') FROM km_rows;
SELECT (SELECT gbml.kmeans_fit(f, 3, '{"device": "hybrid", "gpu_memory_limit_mb": 1.1}') FROM km_rows)
     = (SELECT gbml.kmeans_fit(f, 3, '{"device": "cpu"}') FROM km_rows) AS same_bytes_within_budget;

-- nothing held on the device afterwards
SELECT gbml.gpu_resources() ->> 'contexts' AS contexts, gbml.gpu_resources() ->> 'device_bytes' AS device_bytes;

-- with a library but no usable GPU, hybrid is an error like gpu (terse: the DETAIL names the driver only with nvcc)
SET gbml.cuda_library = 'gbml_cuda';
\set VERBOSITY terse
SELECT gbml.kmeans_fit(f, 3, '{"device": "hybrid"}') FROM km_rows;
\set VERBOSITY default
