-- pgTAP: the three algorithms through the SQL surface — quality on small
-- data, determinism, registry training, errors with SQLSTATEs.
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gbml;
BEGIN;
SELECT plan(26);
SET LOCAL gbml.progress_interval = 0;

CREATE TEMP TABLE d AS
SELECT i, ARRAY[(i % 17) / 17.0, (i % 13) / 13.0, (i % 7) / 7.0]::real[] AS f,
       ((i % 17) / 17.0 * 2 + ((i % 13) / 13.0) ^ 2)::real AS y, (i / 25)::bigint AS g
  FROM generate_series(1, 2500) AS i;

-- boost: every loss trains and ranks/fits better than a constant
SELECT ok((SELECT gbml.rmse(gbml.predict(m, f), y) FROM d, (SELECT gbml.boost_fit(f, y, '{"iterations": 50}') AS m FROM d) s GROUP BY m)
          < (SELECT stddev_pop(y) FROM d) / 5, 'RMSE boosting fits');
SELECT ok((SELECT gbml.auc(gbml.predict_proba(m, f), (y > 1.2)::int::real) FROM d,
                  (SELECT gbml.boost_fit(f, (y > 1.2)::int::real, '{"loss": "Logloss", "iterations": 30}') AS m FROM d) s GROUP BY m) > 0.98,
          'Logloss boosting separates');
SELECT ok((SELECT avg(n) FROM (SELECT gbml.ndcg(gbml.predict(m, f), round(y)::real, 5) AS n
                                 FROM d, (SELECT gbml.boost_fit(f, round(y)::real, g, jsonb_build_object('loss', l, 'iterations', 20)) AS m FROM d) s
                                GROUP BY g) q) > 0.9, format('%s ranks', l))
  FROM unnest(ARRAY['YetiRank', 'LambdaMART', 'PairLogit', 'QueryRMSE']) AS l;
SELECT is((SELECT gbml.boost_fit(f, y, g, '{"iterations": 10, "threads": 1, "subsample": 0.5}') FROM d),
          (SELECT gbml.boost_fit(f, y, g, '{"iterations": 10, "threads": 2, "subsample": 0.5}') FROM d),
          'boosting: same bytes with 1 and 2 threads');
SELECT throws_ok($$SELECT gbml.boost_fit(f, y, '{"depth": 0}') FROM d$$, '22023', NULL, 'depth out of range');
SELECT throws_ok($$SELECT gbml.boost_fit(f, y, '{"loss": "LambdaMART"}') FROM d$$, '22023', NULL, 'ranking loss without groups');
-- MultiClass: three classes from y; the most probable class is right, the probabilities sum to 1
SELECT ok((SELECT avg((gbml.predict(m, f) = least(floor(y), 2))::int) FROM d,
                  (SELECT gbml.boost_fit(f, least(floor(y), 2)::real, '{"loss": "MultiClass", "iterations": 30}') AS m FROM d) s) > 0.97,
          'MultiClass boosting classifies');
SELECT ok((SELECT bool_and(abs((SELECT sum(p) FROM unnest(gbml.predict_classes(m, f)) AS p) - 1) < 1e-9) FROM d,
                  (SELECT gbml.boost_fit(f, least(floor(y), 2)::real, '{"loss": "MultiClass", "iterations": 5}') AS m FROM d) s),
          'MultiClass probabilities sum to 1');
SELECT throws_ok($$SELECT gbml.boost_fit(f, y, '{"loss": "MultiClass"}') FROM d$$, '22023', NULL, 'MultiClass with labels that are not class ids');

-- kmeans
SELECT is((SELECT count(DISTINCT gbml.kmeans_assign(m, f)) FROM d, (SELECT gbml.kmeans_fit(f, 4) AS m FROM d) s)::int, 4, 'k-means uses 4 clusters');
SELECT is((SELECT gbml.kmeans_fit(f, 4, '{"threads": 1, "random_seed": 3}') FROM d),
          (SELECT gbml.kmeans_fit(f, 4, '{"threads": 2, "random_seed": 3}') FROM d), 'k-means: same bytes with 1 and 2 threads');
SELECT throws_ok($$SELECT gbml.kmeans_fit(f, 5000) FROM d$$, '22023', NULL, 'k > rows');
SELECT throws_ok($$SELECT gbml.kmeans_fit(ARRAY[1, 'Infinity']::real[], 1)$$, '22023', NULL, 'non-finite feature');

-- saga
SELECT ok((SELECT avg((gbml.predict(m, f) = (y > 1.2)::int)::int) FROM d,
                  (SELECT gbml.saga_fit(f, (y > 1.2)::int::real, '{"standardize": true}') AS m FROM d) s) > 0.9, 'logistic SAGA classifies');
SELECT ok((SELECT gbml.rmse(gbml.predict(m, f), y) FROM d, (SELECT gbml.saga_fit(f, y, '{"loss": "squared", "alpha": 0}') AS m FROM d) s GROUP BY m)
          < (SELECT stddev_pop(y) FROM d), 'squared SAGA beats the mean');
SELECT is((SELECT gbml.saga_fit(f, (y > 1.2)::int::real, '{"threads": 1}') FROM d),
          (SELECT gbml.saga_fit(f, (y > 1.2)::int::real, '{"threads": 2}') FROM d), 'SAGA: same bytes with 1 and 2 threads');
SELECT throws_ok($$SELECT gbml.saga_fit(f, 3::real) FROM d$$, '22023', NULL, 'label 3 for logistic');

-- registry with each algorithm
CREATE TEMP TABLE src AS SELECT f AS features, y AS label, g AS group_id FROM d;
SELECT ok(gbml.train('pgtap_boost', 'boost', 'src', '{"iterations": 20, "eval_fraction": 0.2, "early_stopping_rounds": 5}') > 0, 'boost into the registry');
SELECT ok(gbml.train('pgtap_km', 'kmeans', 'SELECT features FROM src', '{"k": 3}') > 0, 'kmeans into the registry (k from params)');
SELECT ok(gbml.train('pgtap_saga', 'saga', 'SELECT features, (label > 1.2) AS label FROM src', '{}') > 0, 'saga into the registry (boolean labels)');
SELECT is((SELECT metrics ->> 'eval_metric' FROM gbml.models WHERE name = 'pgtap_boost'), 'NDCG@10', 'ranking eval metric recorded');
SELECT ok(gbml.predict('pgtap_saga', ARRAY[0.9, 0.9, 0.5]::real[]) = 1, 'scoring the deployed SAGA model by name');
SELECT throws_ok($$SELECT gbml.train('x', 'kmeans', 'src', '{}')$$, '22023', NULL, 'kmeans without k');

SELECT * FROM finish();
ROLLBACK;
