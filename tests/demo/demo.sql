-- tests/demo/demo.sql — `make demo`: gbml end to end on data shipped in data/.
-- Learning to rank with query groups, K-Means and SAGA, all in SQL.
\pset footer off
\set ECHO none
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gbml;
SET gbml.progress_interval = 0;

\echo
\echo '=== 1. Learning to rank: LightGBM''s lambdarank sample (3,005 docs in 201 queries, 300 features)'
CREATE TABLE rank_train (qid bigint, label real, features real[]);
CREATE TABLE rank_test  (qid bigint, label real, features real[]);
\copy rank_train FROM 'data/rank_train.csv' CSV HEADER
\copy rank_test  FROM 'data/rank_test.csv' CSV HEADER

\echo '--- train a YetiRank model (query id = group_id) into the registry, 20% of queries held out for early stopping'
SELECT gbml.train('ranker', 'boost',
                  'SELECT features, label, qid AS group_id FROM rank_train',
                  '{"loss": "YetiRank", "iterations": 300, "depth": 6, "learning_rate": 0.05,
                    "eval_fraction": 0.2, "early_stopping_rounds": 50}') AS model_id;
SELECT name, version, algorithm, rows, features, deployed,
       metrics ->> 'eval_metric' AS eval_metric, round((metrics ->> 'eval_value')::numeric, 4) AS eval_value,
       round((timings ->> 'train_seconds')::numeric, 2) AS train_s
  FROM gbml.models WHERE name = 'ranker';

\echo '--- test NDCG@10 on unseen queries (exponential gain; a query with no relevant document counts 1)'
SELECT round(avg(ndcg)::numeric, 4) AS test_ndcg_at_10, count(*) AS queries
  FROM (SELECT qid, gbml.ndcg(gbml.predict('ranker', features), label, 10) AS ndcg
          FROM rank_test GROUP BY qid) AS per_query;

\echo '--- ranking one query''s documents in SQL: ORDER BY the model''s score'
SELECT row_number() OVER () AS rank, label AS true_relevance, round(score::numeric, 3) AS score
  FROM (SELECT label, gbml.predict('ranker', features) AS score
          FROM rank_test WHERE qid = 202 ORDER BY score DESC LIMIT 8) AS top;

\echo '--- the five most important features'
SELECT feature, round(importance::numeric, 4) AS importance
  FROM gbml.feature_importance((SELECT model FROM gbml.models WHERE name = 'ranker' AND deployed))
 ORDER BY importance DESC LIMIT 5;

\echo
\echo '=== 2. Spam filtering with SAGA logistic regression (UCI Spambase, 4,601 e-mails, 57 features)'
CREATE TABLE spam (id serial, label real, features real[]);
\copy spam (label, features) FROM 'data/spambase.csv' CSV HEADER
CREATE TABLE spam_models AS
SELECT gbml.saga_fit(features, label, '{"loss": "logistic", "alpha": 0.001, "standardize": true, "max_iter": 2000}') AS model
  FROM spam WHERE id % 5 <> 0;
SELECT round(avg((gbml.predict(model, features) = label)::int)::numeric, 4) AS holdout_accuracy,
       round(gbml.auc(gbml.predict_proba(model, features), label)::numeric, 4) AS holdout_auc
  FROM spam, spam_models WHERE id % 5 = 0 GROUP BY model;
SELECT gbml.model_info(model) ->> 'epochs' AS epochs, gbml.model_info(model) ->> 'stop_reason' AS stop_reason,
       round((gbml.model_info(model) -> 'metrics' ->> 'objective')::numeric, 5) AS objective
  FROM spam_models;

\echo
\echo '=== 3. K-Means: three clusters of e-mails (log-scaled word frequencies), and how they line up with spam'
CREATE TABLE spam_log AS SELECT id, label, ARRAY(SELECT ln(1 + v) FROM unnest(features) AS v)::real[] AS f FROM spam;
CREATE TABLE spam_clusters AS
SELECT gbml.kmeans_fit(f, 3, '{"random_seed": 7, "n_init": 5}') AS model FROM spam_log;
SELECT gbml.kmeans_assign(model, f) AS cluster, count(*) AS emails, round(avg(label)::numeric, 3) AS spam_share,
       round(avg(gbml.kmeans_distance(model, f))::numeric, 2) AS mean_distance
  FROM spam_log, spam_clusters GROUP BY 1 ORDER BY 1;
SELECT gbml.model_info(model) ->> 'iterations' AS iterations, gbml.model_info(model) ->> 'stop_reason' AS stop_reason,
       round((gbml.model_info(model) -> 'metrics' ->> 'inertia')::numeric, 1) AS inertia
  FROM spam_clusters;

\echo
\echo '=== 4. Customer churn from an ordinary table: text columns are categories (5,000 customers, 19 columns, 4 of them text)'
CREATE TABLE churn (label int, state text, account_length int, area_code text, international_plan text,
  voice_mail_plan text, number_vmail_messages int, total_day_minutes float8, total_day_calls int,
  total_day_charge float8, total_eve_minutes float8, total_eve_calls int, total_eve_charge float8,
  total_night_minutes float8, total_night_calls int, total_night_charge float8, total_intl_minutes float8,
  total_intl_calls int, total_intl_charge float8, number_customer_service_calls int);
\copy churn FROM 'data/churn.csv' CSV HEADER
ALTER TABLE churn ADD COLUMN id serial;
\echo '--- one call: every column but the label (and the id) is a feature; the text ones get CatBoost-style ordered target statistics'
SELECT gbml.train('churn', 'boost', 'SELECT * FROM churn WHERE id % 5 <> 0',
                  '{"label_column": "label", "exclude_columns": ["id"], "loss": "Logloss", "iterations": 300, "learning_rate": 0.05}') AS model_id;
\echo '--- held-out AUC, scoring whole rows (columns matched by name)'
SELECT round(gbml.auc(gbml.predict_proba('churn', c), label)::numeric, 4) AS holdout_auc FROM churn c WHERE id % 5 = 0;
\echo '--- the customers most likely to leave'
SELECT id, state, international_plan, number_customer_service_calls,
       round(gbml.predict_proba('churn', c)::numeric, 3) AS p_churn
  FROM churn c WHERE id % 5 = 0 ORDER BY gbml.predict_proba('churn', c) DESC LIMIT 5;
\echo '--- importance by column name'
SELECT name, round(importance::numeric, 3) AS importance
  FROM gbml.feature_importance((SELECT model FROM gbml.models WHERE name = 'churn' AND deployed))
 ORDER BY importance DESC LIMIT 5;

\echo
\echo '=== 5. Four classes: how long will a job run? (4,331 cluster jobs: very fast, fast, moderate, long)'
CREATE TABLE jobs (label text, label_id int, protocol text, compounds int, input_fields int, iterations int,
  num_pending int, hour float8, day text);
\copy jobs FROM 'data/hpc_jobs.csv' CSV HEADER
ALTER TABLE jobs ADD COLUMN id serial;
\echo '--- MultiClass: a tree a class an iteration; protocol and day get a target statistic per class'
SELECT gbml.train('job_time', 'boost', 'SELECT * FROM jobs WHERE id % 5 <> 0',
                  '{"label_column": "label_id", "exclude_columns": ["id", "label"], "loss": "MultiClass",
                    "iterations": 300, "learning_rate": 0.05}') AS model_id;
\echo '--- held-out accuracy: gbml.predict gives the most probable class'
SELECT round(avg((gbml.predict('job_time', j) = label_id)::int)::numeric, 3) AS holdout_accuracy
  FROM jobs j WHERE id % 5 = 0;
\echo '--- the held-out jobs most likely to run long: gbml.predict_classes gives every class''s probability'
SELECT id, protocol, compounds, label AS actual,
       round(((gbml.predict_classes('job_time', j))[4])::numeric, 3) AS p_long
  FROM jobs j WHERE id % 5 = 0 ORDER BY (gbml.predict_classes('job_time', j))[4] DESC LIMIT 5;

\echo
\echo '=== 6. Retraining on a schedule with pg_cron (every night at 03:00)'
CREATE EXTENSION IF NOT EXISTS pg_cron;
SELECT cron.schedule('nightly-ranker', '0 3 * * *',
       $$SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM rank_train',
                           '{"loss": "YetiRank", "iterations": 300, "eval_fraction": 0.2, "deploy": "if_better"}')$$) IS NOT NULL AS scheduled;
SELECT jobname, schedule, left(command, 60) || '...' AS command FROM cron.job WHERE jobname = 'nightly-ranker';
SELECT cron.unschedule('nightly-ranker') AS unscheduled;
\echo
\echo 'Done. Every step above was plain SQL against gbml.'
