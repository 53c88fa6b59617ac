-- Categorical columns (issue 13): text, varchar, enum columns (and those named in
-- categorical_columns) are categories numbered in sorted order; a NULL is a
-- category of its own, a value never seen in training is "unseen" at scoring.
-- SAGA one-hot encodes them (with a cap and an "other" column); K-Means refuses
-- them unless one_hot is asked for; boosting uses one-hot splits and ordered
-- target statistics.
SET gbml.progress_interval = 0;
CREATE TYPE cat_tier AS ENUM ('bronze', 'silver', 'gold');
CREATE TABLE cat_rows (id int, x float8, city text, tier cat_tier, store int, label real);
INSERT INTO cat_rows
SELECT i, (i % 10) / 10.0,
       CASE WHEN i % 50 = 0 THEN NULL ELSE (ARRAY['oslo', 'lima', 'rome', 'kyiv'])[1 + i % 4] END,
       (ARRAY['bronze', 'silver', 'gold']::cat_tier[])[1 + i % 3], i % 7,
       ((i % 4) = 1 OR (i % 4 = 2 AND i % 3 = 2))::int
  FROM generate_series(1, 4000) AS i;
CREATE TABLE cat_rows_shuffled AS SELECT * FROM cat_rows ORDER BY hashint4(id);
CREATE TABLE cat_new (id int, x float8, city text, tier cat_tier, store int);
INSERT INTO cat_new VALUES (1, 0.5, 'lima', 'gold', 2), (2, 0.5, 'paris', 'gold', 2), (3, 0.5, NULL, 'gold', 2);

-- SAGA: the model keeps the categories; NULL and unseen values score through the "other" column
SELECT gbml.train('cat_saga', 'saga', 'SELECT * FROM cat_rows',
                  '{"exclude_columns": ["id"], "categorical_columns": ["store"], "loss": "logistic", "random_seed": 1}') > 0 AS trained;
SELECT f ->> 'name' AS name, f ->> 'type' AS type, f ->> 'kind' AS kind, f -> 'categories' AS categories
  FROM gbml.models, jsonb_array_elements(gbml.model_json(model) -> 'feature_schema') AS f WHERE name = 'cat_saga';
SELECT city, round(avg(gbml.predict_proba('cat_saga', c))::numeric, 2) AS p FROM cat_rows c GROUP BY city ORDER BY city;
SELECT id, gbml.predict_proba('cat_saga', n) BETWEEN 0 AND 1 AS scored FROM cat_new n ORDER BY id;
SELECT name, importance > 0.5 AS dominant FROM gbml.feature_importance((SELECT model FROM gbml.models WHERE name = 'cat_saga')) ORDER BY feature;
-- another scan order, and the aggregate's row form (categories collected as rows come), give the same bytes
SELECT gbml.saga_fit(c, '{"exclude_columns": ["id"], "categorical_columns": ["store"], "loss": "logistic", "random_seed": 1}')
       = (SELECT model FROM gbml.models WHERE name = 'cat_saga') AS aggregate_same_bytes
  FROM cat_rows_shuffled c;

-- K-Means: an ERROR with a hint, unless one_hot
SELECT gbml.train('cat_km', 'kmeans', 'SELECT x, city FROM cat_rows', '{"k": 4}');
SELECT gbml.train('cat_km', 'kmeans', 'SELECT x, city FROM cat_rows', '{"k": 5, "one_hot": true, "random_seed": 3}') > 0 AS trained;
SELECT count(*) AS cities, count(DISTINCT cluster) AS clusters
  FROM (SELECT city, min(gbml.kmeans_assign('cat_km', c)) AS cluster, count(DISTINCT gbml.kmeans_assign('cat_km', c)) AS per_city
          FROM cat_rows c GROUP BY city) s WHERE per_city = 1;
SELECT id, gbml.kmeans_distance('cat_km', n) >= 0 AS scored FROM cat_new n ORDER BY id;

-- a categorical column at scoring time must be categorical-compatible
CREATE TABLE cat_wrong (id int, x float8, city int, tier cat_tier, store int);
INSERT INTO cat_wrong VALUES (1, 0.5, 3, 'gold', 2);
SELECT gbml.predict_proba('cat_saga', w) FROM cat_wrong w;

-- Boosting: one-hot splits for small columns, ordered target statistics for the others
SELECT gbml.train('cat_boost', 'boost', 'SELECT * FROM cat_rows',
                  '{"exclude_columns": ["id"], "categorical_columns": ["store"], "loss": "Logloss", "iterations": 40, "depth": 4, "random_seed": 5}') > 0 AS trained;
SELECT (gbml.model_info(model) -> 'categorical') - 'prior' AS categorical FROM gbml.models WHERE name = 'cat_boost';
SELECT city, round(avg(gbml.predict_proba('cat_boost', c))::numeric, 1) AS p FROM cat_rows c GROUP BY city ORDER BY city;
SELECT id, gbml.predict_proba('cat_boost', n) BETWEEN 0 AND 1 AS scored FROM cat_new n ORDER BY id;
SELECT name, importance > 0.3 AS dominant FROM gbml.feature_importance((SELECT model FROM gbml.models WHERE name = 'cat_boost')) ORDER BY feature;
-- by row = by the equivalent array of category ids (sorted values, 0-based; NULL is NaN)
SELECT count(*) AS rows,
       count(*) FILTER (WHERE gbml.predict('cat_boost', c) = gbml.predict('cat_boost',
           ARRAY[x, coalesce((array_position(ARRAY['kyiv', 'lima', 'oslo', 'rome'], city) - 1)::real, 'NaN'),
                 array_position(ARRAY['bronze', 'gold', 'silver'], tier::text) - 1, store]::real[])) AS same
  FROM cat_rows c;
-- another scan order, and the aggregate's row form, give the same bytes
SELECT gbml.boost_fit(c, '{"exclude_columns": ["id"], "categorical_columns": ["store"], "loss": "Logloss", "iterations": 40, "depth": 4, "random_seed": 5}')
       = (SELECT model FROM gbml.models WHERE name = 'cat_boost') AS aggregate_same_bytes
  FROM cat_rows_shuffled c;
-- with an eval set, the run is the same from either scan order
SELECT (SELECT gbml.boost_fit(c, '{"exclude_columns": ["id"], "loss": "Logloss", "iterations": 20, "eval_fraction": 0.25}') FROM cat_rows c)
     = (SELECT gbml.boost_fit(s, '{"exclude_columns": ["id"], "loss": "Logloss", "iterations": 20, "eval_fraction": 0.25}') FROM cat_rows_shuffled s)
       AS eval_same_bytes;

-- Depthwise trees that split categories as sets: each distinct set a model feature of its own
-- (transform "set"), the columns split as sets counted, the rows scored by SQL as the trainer
-- scored them (its training Logloss), the same bytes from either scan order; symmetric trees refuse
SELECT gbml.train('cat_sets', 'boost', 'SELECT * FROM cat_rows',
                  '{"exclude_columns": ["id"], "categorical_columns": ["store"], "loss": "Logloss", "iterations": 30, "depth": 3,
                    "grow_policy": "Depthwise", "categorical_split": "sets"}') > 0 AS trained;
SELECT gbml.model_info('cat_sets') -> 'categorical' ->> 'split_as_sets' AS split_as_sets,
       (SELECT count(*) FROM jsonb_array_elements(gbml.model_json('cat_sets') -> 'categorical' -> 'model_features') f
         WHERE f ->> 'transform' = 'set') > 0 AS has_set_features,
       (SELECT count(*) FROM jsonb_array_elements(gbml.model_json('cat_sets') -> 'categorical' -> 'model_features') f
         WHERE f ->> 'transform' IN ('ctr_mean', 'slot')) AS statistics_or_slots,
       abs((SELECT -avg(label * ln(p) + (1 - label) * ln(1 - p)) FROM (SELECT label, gbml.predict_proba('cat_sets', c) AS p FROM cat_rows c) s)
           - (gbml.model_info('cat_sets') -> 'metrics' ->> 'train_Logloss')::float8) < 1e-9 AS scores_match_trainer;
SELECT id, gbml.predict_proba('cat_sets', n) BETWEEN 0 AND 1 AS scored FROM cat_new n ORDER BY id;
SELECT gbml.boost_fit(s, '{"exclude_columns": ["id"], "categorical_columns": ["store"], "loss": "Logloss", "iterations": 30, "depth": 3,
                           "grow_policy": "Depthwise", "categorical_split": "sets"}')
       = (SELECT model FROM gbml.models WHERE name = 'cat_sets') AS aggregate_same_bytes
  FROM cat_rows_shuffled s;
SELECT gbml.boost_fit(c, '{"exclude_columns": ["id"], "categorical_split": "sets"}') FROM cat_rows c;

-- no leak: a category per row (an id as text) with labels that nothing predicts.  Ordered
-- statistics give every row only the prior, so the model cannot fit the training labels
-- through it; a statistic that saw the row's own label would separate them perfectly.
CREATE TABLE cat_leak AS
SELECT i, 'u' || i AS uid, (hashint4(i * 31) % 2 = 0)::int::real AS label FROM generate_series(1, 3000) AS i;
SELECT gbml.train('cat_leak', 'boost', 'SELECT uid, label FROM cat_leak',
                  '{"loss": "Logloss", "iterations": 30, "depth": 4, "ctr_counter": false}') > 0 AS trained;
SELECT gbml.auc(gbml.predict('cat_leak', l), label) < 0.6 AS no_fit_through_the_row_label FROM cat_leak l;

-- a domain over text: a model trained through it scores the base table's plain text, and the
-- other way round (a view's domain is no other kind of column)
CREATE DOMAIN city_name AS text CHECK (VALUE <> '');
CREATE TABLE cat_dom AS SELECT id, x, city::city_name AS city, label FROM cat_rows;
SELECT gbml.train('cat_dom', 'boost', 'cat_dom', '{"exclude_columns": ["id"], "iterations": 10, "depth": 3}') > 0 AS trained;
SELECT gbml.train('cat_plain', 'boost', 'SELECT id, x, city, label FROM cat_rows', '{"exclude_columns": ["id"], "iterations": 10, "depth": 3}') > 0 AS trained;
SELECT bool_and(gbml.predict('cat_dom', r) = gbml.predict('cat_dom', d)) AS domain_model_scores_text,
       bool_and(gbml.predict('cat_plain', d) = gbml.predict('cat_plain', r)) AS text_model_scores_domain
  FROM cat_rows r JOIN cat_dom d USING (id);
