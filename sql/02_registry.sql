-- The model registry: gbml.train reads a table or a query with a cursor,
-- records versions, deploys per policy; gbml.predict(name, ...) scores with
-- the deployed version.
CREATE TABLE train_rows AS
SELECT ARRAY[(i % 7)::real, 1]::real[] AS features, (i % 4)::real AS label, (i % 10)::bigint AS group_id
  FROM generate_series(1, 20000) AS i;

SELECT gbml.train('m1', 'mean', 'train_rows') AS id1 \gset
SELECT gbml.train('m1', 'mean', 'SELECT features, label * 2 AS label FROM train_rows') AS id2 \gset
SELECT name, version, algorithm, rows, features, device, deployed, params ->> 'passes' AS passes,
       metrics ? 'eval_value' AS has_metric, timings ? 'train_seconds' AS has_timing
  FROM gbml.models ORDER BY version;
SELECT :id2 > :id1 AS ids_increase;

-- the deployed version scores; rolling back changes the answer
SELECT gbml.predict('m1', ARRAY[0, 0]::real[]) AS v2_prediction;
SELECT gbml.deploy('m1', 1) = :id1 AS rolled_back;
SELECT gbml.predict('m1', ARRAY[0, 0]::real[]) AS v1_prediction;
SELECT count(*) FILTER (WHERE deployed) AS deployed_count FROM gbml.models WHERE name = 'm1';
-- introspection by name reads the deployed version (a string literal picks the name form)
SELECT gbml.model_info('m1') = gbml.model_info(model) AS info_by_name,
       gbml.model_json('m1') = gbml.model_json(model) AS json_by_name,
       gbml.model_info('m1') <> gbml.model_info((SELECT model FROM gbml.models WHERE name = 'm1' AND version = 2)) AS not_v2
  FROM gbml.models WHERE name = 'm1' AND deployed;
SELECT gbml.model_info('no_such_model');
SELECT * FROM gbml.feature_importance('no_such_model');

-- the name is looked up once per query: a query over many rows sees one version
SELECT count(DISTINCT gbml.predict('m1', features)) AS distinct_scores FROM train_rows;

-- if_better keeps the deployed version unless the eval metric improves (lower RMSE here)
SELECT gbml.train('m1', 'mean', 'SELECT features, label * 10 AS label FROM train_rows',
                  '{"deploy": "if_better"}') IS NOT NULL AS trained;
SELECT version, deployed FROM gbml.models WHERE name = 'm1' ORDER BY version;
SELECT gbml.train('m1', 'mean', 'SELECT features, 1::real AS label FROM train_rows',
                  '{"deploy": "if_better"}') IS NOT NULL AS trained;
SELECT version, deployed FROM gbml.models WHERE name = 'm1' ORDER BY version;
SELECT gbml.train('m1', 'mean', 'train_rows', '{"deploy": "never"}') IS NOT NULL AS trained;
SELECT version, deployed FROM gbml.models WHERE name = 'm1' ORDER BY version;
-- ... and compares only the same metric on the same kind of set: another algorithm's metric (or an
-- eval set's against the training set's) is a NOTICE, the version kept but not deployed
SELECT gbml.train('m1', 'kmeans', 'train_rows', '{"k": 2, "deploy": "if_better"}') IS NOT NULL AS trained;
SELECT version, deployed FROM gbml.models WHERE name = 'm1' ORDER BY version;
SELECT gbml.deploy('m1', NULL);

-- held-out eval share, eval_source, renamed columns, weights
SELECT gbml.train('m2', 'mean', 'train_rows', '{"eval_fraction": 0.2}') AS id \gset
SELECT (gbml.model_info(model) ->> 'eval_rows')::int BETWEEN 2000 AND 6000 AS eval_share_ok,
       rows + (gbml.model_info(model) ->> 'eval_rows')::int AS all_rows
  FROM gbml.models WHERE id = :id;
SELECT gbml.train('m3', 'mean', 'train_rows',
                  '{"eval_source": "SELECT features, label FROM train_rows LIMIT 7"}') AS id \gset
SELECT gbml.model_info(model) ->> 'eval_rows' AS eval_rows FROM gbml.models WHERE id = :id;
-- an eval_source with no rows is an ERROR that says so
SELECT gbml.train('m3', 'mean', 'train_rows', '{"eval_source": "SELECT features, label FROM train_rows WHERE false"}');
CREATE TABLE renamed AS SELECT features AS x, label AS y, (1 + (label > 2)::int)::real AS w FROM train_rows;
SELECT gbml.train('m4', 'mean', 'public.renamed',
                  '{"features_column": "x", "label_column": "y", "weight_column": "w"}') AS id \gset
-- weighted mean: labels 3 count twice
SELECT rows, round(gbml.predict(model, ARRAY[0, 0]::real[])::numeric, 6) AS weighted_mean,
       (SELECT round((sum(y * w) / sum(w))::numeric, 6) FROM renamed) AS expected
  FROM gbml.models WHERE id = :id;
-- the run report: times, threads, device
SELECT timings ? 'train_seconds' AS has_seconds, (timings ->> 'threads')::int AS threads
  FROM gbml.models WHERE id = :id;
SELECT gbml.last_training_report() ? 'train_seconds' AS session_report;
-- a training that fails leaves no report (not the one before it)
SELECT gbml.train('m_fails', 'mean', 'SELECT features FROM train_rows', '{}');
SELECT gbml.last_training_report() IS NULL AS no_report_after_a_failure;

-- errors
SELECT gbml.train('m5', 'forest', 'train_rows');
SELECT gbml.train('m5', 'mean', 'no_such_table');
SELECT gbml.train('m5', 'mean', 'SELECT label FROM train_rows');
SELECT gbml.train('m5', 'mean', 'SELECT features FROM train_rows');
SELECT gbml.train('m5', 'mean', 'SELECT features, label FROM train_rows WHERE false');
SELECT gbml.train('', 'mean', 'train_rows');
SELECT gbml.train('m5', 'mean', 'train_rows', '{"deploy": "sometimes"}');
SELECT gbml.deploy('m1', 99);
SELECT gbml.predict('nope', ARRAY[1, 2]::real[]);
SELECT count(*) AS m5_versions FROM gbml.models WHERE name = 'm5';
-- an error after the first full chunk (its successor is being pre-faulted on a helper
-- thread) unwinds cleanly, through gbml.train and through an aggregate
CREATE TABLE late_bad AS
SELECT CASE WHEN i = 100000 THEN NULL ELSE ARRAY[i, 1]::real[] END AS features, 1::real AS label
  FROM generate_series(1, 120000) AS i;
SELECT gbml.train('late', 'mean', 'late_bad');
SELECT gbml.mean_fit(features, label) FROM (SELECT * FROM late_bad ORDER BY (features IS NULL), label) s;
SELECT gbml.mean_fit(features, label) IS NOT NULL AS still_trains FROM late_bad WHERE features IS NOT NULL;
-- wide, compressed feature arrays are read batch by batch
CREATE TABLE wide AS SELECT array_fill((i % 5)::real, ARRAY[1000]) AS features, (i % 5)::real AS label
  FROM generate_series(1, 25000) AS i;
SELECT pg_column_compression(features) IS NOT NULL AS compressed FROM wide LIMIT 1;
SELECT gbml.train('wide', 'mean', 'wide') AS id \gset
SELECT rows, features, round(gbml.predict(model, array_fill(0::real, ARRAY[1000]))::numeric, 3) AS mean
  FROM gbml.models WHERE id = :id;

-- a read-only transaction (as on a standby) cannot record a version: a clear ERROR up front
BEGIN READ ONLY;
SELECT gbml.train('ro_model', 'mean', 'SELECT ARRAY[1, 2]::real[] AS features, 1::real AS label');
ROLLBACK;
