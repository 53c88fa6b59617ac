-- SAGA: each loss and penalty against known optima, label encodings,
-- determinism, the non-convergence notice, GROUP BY, bad labels and input.
SET gbml.progress_interval = 0;
CREATE TABLE lin AS
SELECT i, ARRAY[((i * 7919) % 1000) / 500.0 - 1, ((i * 104729) % 1000) / 500.0 - 1]::real[] AS f
  FROM generate_series(1, 2000) AS i;
ALTER TABLE lin ADD COLUMN y real;
UPDATE lin SET y = 3 * f[1] - 2 * f[2] + 0.5;

-- squared loss, no penalty: recovers the exact line y = 3 x1 - 2 x2 + 0.5
SELECT round((m -> 'coef' ->> 0)::numeric, 3) AS w1, round((m -> 'coef' ->> 1)::numeric, 3) AS w2,
       round((m ->> 'intercept')::numeric, 3) AS b
  FROM (SELECT gbml.model_json(gbml.saga_fit(f, y, '{"loss": "squared", "alpha": 0, "tol": 1e-8}')) AS m FROM lin) s;
-- a regression has no probability: predict_proba is an ERROR naming gbml.predict
SELECT gbml.predict_proba(gbml.saga_fit(f, y, '{"loss": "squared"}'), ARRAY[1, 2]::real[]) FROM lin;
-- ridge: with standardized... closed form for orthogonal-ish data is not exact; check shrinkage instead
SELECT abs((m1 -> 'coef' ->> 0)::float8) > abs((m2 -> 'coef' ->> 0)::float8) AS ridge_shrinks
  FROM (SELECT gbml.model_json(gbml.saga_fit(f, y, '{"loss": "squared", "alpha": 0.01}')) AS m1,
               gbml.model_json(gbml.saga_fit(f, y, '{"loss": "squared", "alpha": 1}')) AS m2 FROM lin) s;
-- lasso: a useless feature gets exactly zero weight
SELECT (m -> 'coef' ->> 2)::float8 = 0 AS noise_zeroed, (m ->> 'n_nonzero')::int AS nonzero
  FROM (SELECT gbml.model_json(gbml.saga_fit(f || ARRAY[((i * 31) % 97) / 97.0]::real[], y,
                                             '{"loss": "squared", "alpha": 0.05, "l1_ratio": 1}')) AS m FROM lin) s;

-- logistic: labels 0/1, -1/+1 and boolean give the same model; predict returns the user's encoding
CREATE TABLE logi AS SELECT i, f, (f[1] + f[2] > 0.1) AS cls FROM lin;
-- (rows are ordered by content, so the encodings visit rows in different orders: compare to 1e-3)
SELECT abs((a ->> 0)::float8 - (b ->> 0)::float8) < 1e-3 AND abs((a ->> 1)::float8 - (b ->> 1)::float8) < 1e-3 AS encodings_agree
  FROM (SELECT (SELECT gbml.model_json(gbml.saga_fit(f, cls::int::real, '{"tol": 1e-9}')) -> 'coef' FROM logi) AS a,
               (SELECT gbml.model_json(gbml.saga_fit(f, CASE WHEN cls THEN 1 ELSE -1 END::real, '{"tol": 1e-9}')) -> 'coef' FROM logi) AS b) s;
SELECT round(avg((gbml.predict(m, f) = cls::int)::int)::numeric, 2) >= 0.97 AS accurate,
       min(gbml.predict_proba(m, f)) >= 0 AND max(gbml.predict_proba(m, f)) <= 1 AS probabilities,
       array_agg(DISTINCT gbml.predict(m2, f) ORDER BY gbml.predict(m2, f)) AS pm1_labels
  FROM logi, (SELECT gbml.saga_fit(f, cls::int::real, '{"alpha": 0.0001}') AS m,
                     gbml.saga_fit(f, CASE WHEN cls THEN 1 ELSE -1 END::real) AS m2 FROM logi) s;
SELECT gbml.model_info(gbml.saga_fit(f, cls::int::real)) ->> 'label_encoding' AS encoding FROM logi;

-- weights: a weight of 2 equals the row twice.  The objective divides by the row count n, so
-- 2,000 weighted rows (sum of weights 3,000) with alpha 0.15 match 3,000 rows with alpha 0.1.
SELECT (SELECT gbml.model_json(gbml.saga_fit(f, y, w, '{"loss": "squared", "alpha": 0.15, "tol": 1e-10, "max_iter": 5000}')) -> 'coef'
          FROM (SELECT f, y, (1 + (i % 2))::real AS w FROM lin) s) AS weighted,
       (SELECT gbml.model_json(gbml.saga_fit(f, y, '{"loss": "squared", "alpha": 0.1, "tol": 1e-10, "max_iter": 5000}')) -> 'coef'
          FROM (SELECT f, y FROM lin UNION ALL SELECT f, y FROM lin WHERE i % 2 = 1) s) AS duplicated \gset
SELECT abs((:'weighted'::jsonb ->> 0)::float8 - (:'duplicated'::jsonb ->> 0)::float8) < 1e-4 AS weight_is_repetition;

-- determinism: same seed -> same bytes whatever the thread count
SELECT (SELECT gbml.saga_fit(f, cls::int::real, '{"threads": 1, "random_seed": 9}') FROM logi)
     = (SELECT gbml.saga_fit(f, cls::int::real, '{"threads": 2, "random_seed": 9}') FROM logi) AS same_bytes_any_threads;

-- standardization is learned at train time and applied at predict time
SELECT round(avg((gbml.predict(m, ARRAY[f[1] * 1000, f[2]]::real[]) = cls::int)::int)::numeric, 2) >= 0.97 AS standardized_accurate
  FROM logi, (SELECT gbml.saga_fit(ARRAY[f[1] * 1000, f[2]]::real[], cls::int::real, '{"standardize": true}') AS m FROM logi) s;

-- not converging within max_iter raises a NOTICE and says so in the metadata
SELECT gbml.model_info(gbml.saga_fit(f, cls::int::real, '{"max_iter": 1, "tol": 1e-12}')) ->> 'converged' AS converged FROM logi;

-- GROUP BY: one model per group
SELECT i % 2 AS part, gbml.model_info(gbml.saga_fit(f, y, '{"loss": "squared"}')) ->> 'rows' AS rows
  FROM lin GROUP BY 1 ORDER BY 1;

-- errors
SELECT gbml.saga_fit(f, 2::real) FROM lin;
SELECT gbml.saga_fit(f, y) FROM lin;
SELECT gbml.saga_fit(f, NULL::real) FROM lin;
SELECT gbml.saga_fit(ARRAY[1, 'NaN']::real[], 1::real);
SELECT gbml.saga_fit(f, y, '{"loss": "hinge"}') FROM lin;
SELECT gbml.saga_fit(f, y, '{"l1_ratio": 2}') FROM lin;
SELECT gbml.saga_fit(f, y, -1::real, '{"loss": "squared"}') FROM lin;
SELECT gbml.predict(gbml.saga_fit(f, y, '{"loss": "squared"}'), ARRAY[1]::real[]) FROM lin;
SELECT gbml.saga_fit(f, 0::real) FROM lin;
