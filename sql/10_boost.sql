-- Boosted oblivious trees: every loss on small data, determinism, eval and
-- early stopping, GROUP BY training, bad parameters, ranking with ORDER BY.
SET gbml.progress_interval = 0;
CREATE TABLE reg AS
SELECT i, ARRAY[(i % 17) / 17.0, (i % 13) / 13.0, (i % 7) / 7.0, CASE WHEN i % 11 = 0 THEN 'NaN' ELSE (i % 5) / 5.0 END]::real[] AS f,
       ((i % 17) / 17.0 * 2 + ((i % 13) / 13.0) ^ 2)::real AS y, (i / 20)::bigint AS g, (i % 3)::int AS part
  FROM generate_series(1, 3000) AS i;

-- RMSE: the model explains the target (NaN features are missing values, not errors)
CREATE TABLE m_rmse AS SELECT gbml.boost_fit(f, y, '{"iterations": 100, "depth": 4}') AS model FROM reg;
SELECT gbml.rmse(gbml.predict(model, f), y) < 0.05 AS fits,
       (SELECT stddev_pop(y) FROM reg) > 0.5 AS target_varies,
       gbml.model_info(model) ->> 'loss' AS loss, (gbml.model_info(model) ->> 'trees')::int AS trees
  FROM reg, m_rmse GROUP BY model;

-- Logloss: probabilities separate the classes
CREATE TABLE m_log AS SELECT gbml.boost_fit(f, (y > 1.3)::int::real, '{"loss": "Logloss", "iterations": 60}') AS model FROM reg;
SELECT gbml.auc(gbml.predict_proba(model, f), (y > 1.3)::int::real) > 0.99 AS separates,
       min(gbml.predict_proba(model, f)) >= 0 AND max(gbml.predict_proba(model, f)) <= 1 AS probabilities
  FROM reg, m_log GROUP BY model;
SELECT gbml.boost_fit(f, y, '{"loss": "Logloss"}') FROM reg;
-- Newton leaf estimation (leaf_estimation_iterations): more steps a tree fit the training rows
-- better with the same trees, give the same bytes on any thread count, and are kept in the model
CREATE TABLE m_newton AS
SELECT steps, threads, gbml.boost_fit(f, (y > 1.3)::int::real,
         jsonb_build_object('loss', 'Logloss', 'iterations', 15, 'depth', 3, 'leaf_estimation_iterations', steps, 'threads', threads)) AS model
  FROM reg, (VALUES (1, 2), (10, 1), (10, 2)) AS s(steps, threads) GROUP BY steps, threads;
SELECT (SELECT model FROM m_newton WHERE steps = 10 AND threads = 1) = (SELECT model FROM m_newton WHERE steps = 10 AND threads = 2) AS same_bytes,
       (SELECT gbml.model_info(model) -> 'metrics' ->> 'train_Logloss' FROM m_newton WHERE steps = 10 AND threads = 1)::float8
         < (SELECT gbml.model_info(model) -> 'metrics' ->> 'train_Logloss' FROM m_newton WHERE steps = 1)::float8 AS fits_better,
       (SELECT gbml.model_info(model) -> 'params' ->> 'leaf_estimation_iterations' FROM m_newton WHERE steps = 10 AND threads = 1) AS recorded,
       (SELECT gbml.model_info(model) -> 'params' ? 'leaf_estimation_iterations' FROM m_newton WHERE steps = 1) AS recorded_when_one;
SELECT gbml.boost_fit(f, y, '{"loss": "Logloss", "leaf_estimation_iterations": 0}') FROM reg;

-- border_type: GreedyLogSum spends every border on a feature with a heavy run of ties (Median's
-- quantiles mostly fall inside the run and are lost), gives the same bytes on any thread count,
-- and is kept in the model's params (Median, the default, is not)
CREATE TABLE ties AS
SELECT ARRAY[CASE WHEN i % 5 = 0 THEN (i % 997) / 997.0 ELSE 0 END, (i % 11) / 11.0]::real[] AS f,
       ((i % 997) / 997.0 * (i % 5 = 0)::int + (i % 11) / 11.0)::real AS y
  FROM generate_series(1, 5000) AS i;
CREATE TABLE m_borders AS
SELECT kind, threads, gbml.boost_fit(f, y, jsonb_build_object('iterations', 20, 'depth', 3, 'border_count', 8,
                                                             'border_type', kind, 'threads', threads)) AS model
  FROM ties, (VALUES ('Median', 1), ('GreedyLogSum', 1), ('GreedyLogSum', 2)) AS s(kind, threads) GROUP BY kind, threads;
SELECT kind, threads, jsonb_array_length(gbml.model_json(model) -> 'borders' -> 0) AS borders_f1,
       jsonb_array_length(gbml.model_json(model) -> 'borders' -> 1) AS borders_f2,
       gbml.model_info(model) -> 'params' ->> 'border_type' AS recorded
  FROM m_borders ORDER BY kind, threads;
SELECT (SELECT model FROM m_borders WHERE kind = 'GreedyLogSum' AND threads = 1) =
       (SELECT model FROM m_borders WHERE kind = 'GreedyLogSum' AND threads = 2) AS same_bytes,
       (SELECT gbml.rmse(gbml.predict(model, f), y) FROM ties, m_borders WHERE kind = 'GreedyLogSum' AND threads = 1) <
       (SELECT gbml.rmse(gbml.predict(model, f), y) FROM ties, m_borders WHERE kind = 'Median') AS fits_better;
SELECT gbml.boost_fit(f, y, '{"border_type": "Uniform"}') FROM reg;

-- score_function L2 (CatBoost's): Logloss's splits scored on the row weights, the hessians only in
-- the leaf values; another model than NewtonL2 (auto for Logloss), the same bytes on any thread
-- count, kept in the model; L2 is for Logloss and YetiRank, NewtonL2 not for YetiRank
CREATE TABLE m_score AS
SELECT score, threads, gbml.boost_fit(f, (y > 1.3)::int::real,
         jsonb_build_object('loss', 'Logloss', 'iterations', 15, 'depth', 3, 'score_function', score,
                            'leaf_estimation_iterations', 3, 'threads', threads)) AS model
  FROM reg, (VALUES ('auto', 1), ('NewtonL2', 1), ('L2', 1), ('L2', 2)) AS s(score, threads) GROUP BY score, threads;
SELECT (SELECT model FROM m_score WHERE score = 'L2' AND threads = 1) = (SELECT model FROM m_score WHERE score = 'L2' AND threads = 2) AS same_bytes,
       (SELECT gbml.model_json(model) -> 'trees' FROM m_score WHERE score = 'auto') =
       (SELECT gbml.model_json(model) -> 'trees' FROM m_score WHERE score = 'NewtonL2') AS auto_is_newton,
       (SELECT gbml.model_json(model) -> 'trees' FROM m_score WHERE score = 'L2' AND threads = 1) <>
       (SELECT gbml.model_json(model) -> 'trees' FROM m_score WHERE score = 'NewtonL2') AS l2_differs,
       (SELECT gbml.auc(gbml.predict_proba(model, f), (y > 1.3)::int::real) FROM reg, m_score WHERE score = 'L2' AND threads = 1) > 0.99 AS separates,
       (SELECT gbml.model_info(model) -> 'params' ->> 'score_function' FROM m_score WHERE score = 'L2' AND threads = 1) AS recorded,
       (SELECT gbml.model_info(model) -> 'params' ? 'score_function' FROM m_score WHERE score = 'auto') AS recorded_when_auto;
SELECT gbml.boost_fit(f, y, '{"score_function": "L2"}') FROM reg;
SELECT gbml.boost_fit(f, y, g, '{"loss": "YetiRank", "score_function": "NewtonL2"}') FROM reg;

-- random_strength (CatBoost's split noise): another model, the same bytes on any thread count, kept in the model
CREATE TABLE m_noise AS
SELECT strength, threads, gbml.boost_fit(f, (y > 1.3)::int::real,
         jsonb_build_object('loss', 'Logloss', 'iterations', 15, 'depth', 3, 'score_function', 'L2',
                            'random_strength', strength, 'threads', threads)) AS model
  FROM reg, (VALUES (0, 1), (1, 1), (1, 2)) AS s(strength, threads) GROUP BY strength, threads;
SELECT (SELECT model FROM m_noise WHERE strength = 1 AND threads = 1) = (SELECT model FROM m_noise WHERE strength = 1 AND threads = 2) AS same_bytes,
       (SELECT gbml.model_json(model) -> 'trees' FROM m_noise WHERE strength = 1 AND threads = 1) <>
       (SELECT gbml.model_json(model) -> 'trees' FROM m_noise WHERE strength = 0) AS noise_differs,
       (SELECT gbml.model_info(model) -> 'params' ->> 'random_strength' FROM m_noise WHERE strength = 1 AND threads = 1) AS recorded,
       (SELECT gbml.model_info(model) -> 'params' ? 'random_strength' FROM m_noise WHERE strength = 0) AS recorded_when_0;
SELECT gbml.boost_fit(f, y, '{"random_strength": -1}') FROM reg;

-- grow_policy Depthwise (a split per node): the same bytes on any thread count, kept in the model,
-- 2^depth - 1 splits a tree in model_json; it fits, and SQL's scores give the trainer's own RMSE
CREATE TABLE m_depthwise AS
SELECT policy, threads, gbml.boost_fit(f, y, jsonb_build_object('iterations', 60, 'depth', 4, 'grow_policy', policy, 'threads', threads)) AS model
  FROM reg, (VALUES ('Depthwise', 1), ('Depthwise', 2), ('SymmetricTree', 2)) AS s(policy, threads) GROUP BY policy, threads;
SELECT (SELECT model FROM m_depthwise WHERE policy = 'Depthwise' AND threads = 1) = (SELECT model FROM m_depthwise WHERE policy = 'Depthwise' AND threads = 2) AS same_bytes,
       (SELECT gbml.model_info(model) -> 'params' ->> 'grow_policy' FROM m_depthwise WHERE policy = 'Depthwise' AND threads = 1) AS recorded,
       (SELECT gbml.model_info(model) -> 'params' ? 'grow_policy' FROM m_depthwise WHERE policy = 'SymmetricTree') AS recorded_when_symmetric,
       (SELECT jsonb_array_length(gbml.model_json(model) -> 'trees' -> 0 -> 'splits') FROM m_depthwise WHERE policy = 'Depthwise' AND threads = 1) AS splits_a_tree,
       (SELECT gbml.model_json(model) -> 'trees' -> 0 -> 'node_splits' FROM m_depthwise WHERE policy = 'Depthwise' AND threads = 1) AS node_splits;
SELECT policy, gbml.rmse(gbml.predict(model, f), y) < 0.05 AS fits,
       abs(gbml.rmse(gbml.predict(model, f), y) - (gbml.model_info(model) -> 'metrics' ->> 'train_RMSE')::float8) < 1e-9 AS scores_match_trainer
  FROM reg, m_depthwise WHERE threads = 2 GROUP BY policy, model ORDER BY policy;
SELECT gbml.boost_fit(f, y, '{"grow_policy": "Lossguide"}') FROM reg;

-- Ranking losses on queries of 20 documents: each beats a random order on NDCG@10
CREATE TABLE rank_base AS
SELECT g, avg(ndcg) AS random_ndcg FROM (
  SELECT g, gbml.ndcg(hashint4(i)::float8, round(y)::real, 10) AS ndcg FROM reg GROUP BY g) s GROUP BY g;
CREATE TABLE rank_models AS
SELECT loss, gbml.boost_fit(f, round(y)::real, g, jsonb_build_object('loss', loss, 'iterations', 40)) AS model
  FROM reg, (VALUES ('YetiRank'), ('LambdaMART'), ('PairLogit'), ('QueryRMSE')) AS l(loss) GROUP BY loss;
SELECT loss, round(avg(ndcg)::numeric, 2) > (SELECT round(avg(random_ndcg)::numeric, 2) + 0.1 FROM rank_base) AS beats_random,
       avg(ndcg) > 0.9 AS ranks_well
  FROM (SELECT loss, g, gbml.ndcg(gbml.predict(model, f), round(y)::real, 10) AS ndcg
          FROM reg, rank_models GROUP BY loss, g) s
 GROUP BY loss ORDER BY loss;
-- the default loss with groups is YetiRank
SELECT gbml.model_info(gbml.boost_fit(f, round(y)::real, g, '{"iterations": 3}')) ->> 'loss' AS default_ranking_loss FROM reg;

-- determinism: same data and seed, any thread count, any plan -> same bytes
SELECT (SELECT gbml.boost_fit(f, y, g, '{"iterations": 20, "threads": 1, "subsample": 0.7, "random_seed": 3}') FROM reg)
     = (SELECT gbml.boost_fit(f, y, g, '{"iterations": 20, "threads": 2, "subsample": 0.7, "random_seed": 3}') FROM reg)
       AS same_bytes_any_threads,
       (SELECT gbml.boost_fit(f, y, g, '{"iterations": 20, "subsample": 0.7, "random_seed": 3}') FROM reg)
    <> (SELECT gbml.boost_fit(f, y, g, '{"iterations": 20, "subsample": 0.7, "random_seed": 4}') FROM reg)
       AS seed_matters;
SET max_parallel_workers_per_gather = 2;
-- the partial-state functions are costed high so plans stay serial: make them cheap to force parallel
ALTER FUNCTION gbml._fit_serialize(internal) COST 1;
ALTER FUNCTION gbml._fit_deserialize(bytea, internal) COST 1;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SELECT (SELECT gbml.boost_fit(f, y, '{"iterations": 10}') FROM reg) = (SELECT model FROM m_rmse) AS fresh_model_differs_by_iterations;
SELECT (SELECT gbml.boost_fit(f, y, '{"iterations": 100, "depth": 4}') FROM reg) = (SELECT model FROM m_rmse) AS parallel_same_bytes;
RESET max_parallel_workers_per_gather;
ALTER FUNCTION gbml._fit_serialize(internal) COST 100000000;
ALTER FUNCTION gbml._fit_deserialize(bytea, internal) COST 100000000;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

-- eval set and early stopping: a held-out share of the groups
SELECT (info ->> 'eval_rows')::int > 0 AS has_eval, (info ->> 'stopped_early')::boolean AS stopped_early,
       (info ->> 'trees')::int < 2000 AS fewer_trees, (info ->> 'trees')::int = (info ->> 'best_iteration')::int AS kept_best,
       info -> 'metrics' ->> 'eval_metric' AS eval_metric
  FROM (SELECT gbml.model_info(gbml.boost_fit(f, y, '{"iterations": 2000, "learning_rate": 0.5, "eval_fraction": 0.3,
                                                      "early_stopping_rounds": 10}')) AS info FROM reg) s;

-- GROUP BY: one model per group
SELECT part, (gbml.model_info(gbml.boost_fit(f, y, '{"iterations": 5}')) ->> 'rows')::int AS rows
  FROM reg GROUP BY part ORDER BY part;

-- ranking a query's rows with ORDER BY
SELECT i, round(y::numeric, 2) AS y FROM reg, m_rmse WHERE g = 7 ORDER BY gbml.predict(model, f) DESC LIMIT 3;

-- introspection
SELECT jsonb_array_length(gbml.model_json(model) -> 'trees') AS trees,
       jsonb_array_length(gbml.model_json(model) -> 'trees' -> 0 -> 'leaf_values') AS leaves
  FROM m_rmse;
SELECT round(sum(importance)::numeric, 6) AS total_importance,
       (array_agg(feature ORDER BY importance DESC))[1] AS top_feature
  FROM gbml.feature_importance((SELECT model FROM m_rmse));

-- bad parameters and input: clear errors
SELECT gbml.boost_fit(f, y, '{"depth": 11}') FROM reg;
SELECT gbml.boost_fit(f, y, '{"border_count": 256}') FROM reg;
SELECT gbml.boost_fit(f, y, '{"loss": "Hinge"}') FROM reg;
SELECT gbml.boost_fit(f, y, '{"learning_rate": 0}') FROM reg;
SELECT gbml.boost_fit(f, y, '{"loss": "YetiRank"}') FROM reg;
SELECT gbml.boost_fit(f, NULL::real) FROM reg;
SELECT gbml.boost_fit(ARRAY[1, NULL]::real[], 1::real);
SELECT gbml.predict(model, ARRAY[1, 2]::real[]) FROM m_rmse;
-- a model takes NaN (missing) at scoring too
SELECT gbml.predict(model, ARRAY['NaN', 'NaN', 'NaN', 'NaN']::real[]) IS NOT NULL AS scores_missing FROM m_rmse;
-- one aggregate trains one model: params or k that differ between rows are an ERROR (which row's the
-- model took would depend on the scan order); the same value computed per row is fine
SELECT gbml.boost_fit(f, y, CASE WHEN i < 5 THEN '{"iterations": 2}'::jsonb ELSE '{"iterations": 3}'::jsonb END) FROM reg;
SELECT length(gbml.boost_fit(f, y, ('{"iterations": ' || 2 + 0 * i || '}')::jsonb)) > 0 AS same_params_per_row FROM reg;
SELECT gbml.kmeans_fit(f, 1 + i % 2, '{}') FROM reg;
SELECT gbml.kmeans_fit(r, 1 + i % 2, '{}') FROM (SELECT i, f[1] AS a FROM reg) r;
-- relevance labels past 1000 overflow NDCG's gain 2^label - 1 (NaN): an ERROR naming the label, for a
-- ranking loss, the NDCG metric and the gbml.ndcg aggregate, whose k must be one per query
SELECT gbml.boost_fit(f, CASE WHEN i = 7 THEN 2000 ELSE y END, g, '{"loss": "LambdaMART", "iterations": 2}') FROM reg;
SELECT gbml.boost_fit(f, CASE WHEN i = 7 THEN 2000 ELSE y END, g, '{"eval_metric": "NDCG", "loss": "RMSE", "iterations": 2}') FROM reg;
SELECT gbml.ndcg(i, CASE WHEN i = 7 THEN 2000 ELSE y END, 5) FROM reg;
SELECT gbml.ndcg(i, y, 1 + i % 2) FROM reg;
-- ... while the losses that order by label differences take any label
SELECT length(gbml.boost_fit(f, (2000 * y)::real, g, '{"loss": "YetiRank", "iterations": 2}')) > 0 AS yetirank_any_label FROM reg;
-- labels of 1e30: squared gradients past float's range; the model's split gains (float32) are capped,
-- so the model loads and scores (its gains were infinite, and loading refused the model)
SELECT gbml.predict(m, ARRAY[0.5, 0.5, 0.5, 0.5]::real[]) IS NOT NULL AS loads
  FROM (SELECT gbml.boost_fit(f, CASE WHEN i % 2 = 0 THEN 1e30 ELSE -1e30 END::real, '{"iterations": 3}') AS m FROM reg) s;
-- early_stopping_rounds without an eval set has nothing to watch: a NOTICE, every iteration trains
SELECT (gbml.model_info(gbml.boost_fit(f, y, '{"early_stopping_rounds": 2, "iterations": 7}')) ->> 'trees')::int AS trees FROM reg;
