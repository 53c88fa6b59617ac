-- Boosting's MultiClass loss (softmax over K classes, a tree a class an
-- iteration): trained from columns and through the aggregate, scored by
-- row, by array, by name and by bytea; predict gives the most probable
-- class, predict_classes every class's probability; the errors name what
-- to do instead.
SET gbml.progress_interval = 0;
CREATE TABLE jobs (id int, size float8, hour float8, queue text, class int);
INSERT INTO jobs
SELECT i, (hashint4(i) % 1000) / 1000.0 + 1, (i % 24)::float8,
       (ARRAY['batch', 'web', 'etl'])[1 + i % 3],
       CASE WHEN (hashint4(i) % 1000) / 1000.0 + 1 < 0.8 THEN 0
            WHEN i % 24 < 12 THEN 1 WHEN i % 3 = 0 THEN 2 ELSE 3 END
  FROM generate_series(1, 3000) AS i;
SELECT class, count(*) FROM jobs GROUP BY class ORDER BY class;

-- from the table's columns, queue one-hot (3 categories); an eval set with early stopping
SELECT gbml.train('jobs', 'boost', 'SELECT * FROM jobs WHERE hashint4(id) % 4 <> 0',
       '{"label_column": "class", "exclude_columns": ["id"], "loss": "MultiClass", "iterations": 200,
         "depth": 4, "learning_rate": 0.3, "one_hot_max_size": 4, "early_stopping_rounds": 10,
         "eval_source": "SELECT * FROM jobs WHERE hashint4(id) % 4 = 0"}') > 0 AS trained;
SELECT i ->> 'loss' AS loss, i ->> 'classes' AS classes, (i ->> 'trees')::int % 4 = 0 AS whole_iterations,
       (i ->> 'trees')::int = 4 * (i ->> 'best_iteration')::int AS best_kept,
       i -> 'metrics' ->> 'eval_metric' AS metric, (i -> 'metrics' ->> 'eval_value')::float8 < 0.2 AS fits
  FROM gbml.model_info('jobs') AS i;

-- predict: the most probable class; predict_classes: the four probabilities (element c + 1: class c)
SELECT avg((gbml.predict('jobs', j) = class)::int) > 0.95 AS accurate,
       bool_and(abs((SELECT sum(p) FROM unnest(gbml.predict_classes('jobs', j)) AS p) - 1) < 1e-9) AS sums_to_one,
       bool_and(array_length(gbml.predict_classes('jobs', j), 1) = 4) AS four,
       bool_and(gbml.predict('jobs', j) + 1 = (SELECT o FROM unnest(gbml.predict_classes('jobs', j)) WITH ORDINALITY AS u(p, o)
                                                ORDER BY p DESC, o LIMIT 1)) AS predict_is_argmax
  FROM jobs j WHERE hashint4(id) % 4 = 0;
-- the whole row passes its columns one by one
EXPLAIN (VERBOSE, COSTS OFF) SELECT gbml.predict_classes('jobs', j) FROM jobs j;
-- ranking by one class's probability inside ORDER BY
SELECT class, count(*) FROM (SELECT class FROM jobs j ORDER BY (gbml.predict_classes('jobs', j))[3] DESC LIMIT 50) t
 GROUP BY class ORDER BY class;
-- a record that is not a table's row, the model's bytes, and a row in another column order: the same
SELECT gbml.predict_classes('jobs', j) = gbml.predict_classes('jobs', (SELECT r FROM (SELECT class, queue, hour, size FROM jobs WHERE id = 7) r)) AS same_by_record,
       gbml.predict_classes((SELECT model FROM gbml.models WHERE name = 'jobs' AND deployed), j) = gbml.predict_classes('jobs', j) AS same_by_bytes
  FROM jobs j WHERE id = 7;

-- the aggregate on a real[]: the same model bytes whatever the rows' order
CREATE TABLE jobs_arrays AS
SELECT id, ARRAY[size, hour]::real[] AS f, class::real AS y FROM jobs;
SELECT (SELECT gbml.boost_fit(f, y, '{"loss": "MultiClass", "iterations": 20, "depth": 3}') FROM jobs_arrays)
     = (SELECT gbml.boost_fit(f, y, '{"loss": "MultiClass", "iterations": 20, "depth": 3}')
          FROM (SELECT * FROM jobs_arrays ORDER BY hashint4(id)) s) AS same_bytes_any_order;
SELECT round(p::numeric, 3) AS p
  FROM unnest(gbml.predict_classes((SELECT gbml.boost_fit(f, y, '{"loss": "MultiClass", "iterations": 20, "depth": 3}')
                                      FROM jobs_arrays), ARRAY[0.5, 3]::real[])) AS p;

-- multiclass_hessian_factor: the hessian's K/(K-1) by default (LightGBM's); the same
-- factor asked for gives the same trees (the model records it, so other bytes),
-- XGBoost's 2 smaller Newton steps: each first tree's leaves about 2/3 of the default's
CREATE TABLE jobs_factor AS
SELECT hf, (SELECT gbml.boost_fit(f, y, jsonb_build_object('loss', 'MultiClass', 'iterations', 1, 'depth', 2, 'l2_leaf_reg', 0)
                                  || coalesce(jsonb_build_object('multiclass_hessian_factor', hf), '{}'))
              FROM jobs_arrays) AS model
  FROM (VALUES (NULL::float8), (4.0 / 3), (2)) AS v(hf);
SELECT coalesce(hf::text, 'default') AS factor, gbml.model_info(model) -> 'params' -> 'multiclass_hessian_factor' AS recorded,
       (SELECT array_agg(round(p::numeric, 4)) FROM unnest(gbml.predict_classes(model, ARRAY[1.5, 7]::real[])) AS p) AS probabilities
  FROM jobs_factor ORDER BY hf NULLS FIRST;
SELECT round(((SELECT (gbml.model_json(model) -> 'trees' -> 0 -> 'leaf_values' ->> 0)::float8 FROM jobs_factor WHERE hf = 2) /
              (SELECT (gbml.model_json(model) -> 'trees' -> 0 -> 'leaf_values' ->> 0)::float8 FROM jobs_factor WHERE hf IS NULL))::numeric, 4)
       AS first_leaf_ratio;
SELECT gbml.boost_fit(f, y, '{"loss": "RMSE", "multiclass_hessian_factor": 2}') FROM jobs_arrays;

-- the aggregate's whole-row form: gbml.train's bytes on the same rows, in any order (queue one-hot)
SELECT gbml.train('jobs_agg', 'boost', 'SELECT * FROM jobs',
       '{"label_column": "class", "exclude_columns": ["id"], "loss": "MultiClass", "iterations": 10, "depth": 3,
         "one_hot_max_size": 4}') > 0 AS trained;
SELECT (SELECT gbml.boost_fit(j, '{"label_column": "class", "exclude_columns": ["id"], "loss": "MultiClass",
                                   "iterations": 10, "depth": 3, "one_hot_max_size": 4}')
          FROM (SELECT * FROM jobs ORDER BY hashint4(id + 1)) j)
     = (SELECT model FROM gbml.models WHERE name = 'jobs_agg' AND deployed) AS same_bytes_as_train;

-- queue past one_hot_max_size (2): ordered target statistics, one a class (and a counter)
SELECT gbml.train('jobs_ctr', 'boost', 'SELECT * FROM jobs WHERE hashint4(id) % 4 <> 0',
       '{"label_column": "class", "exclude_columns": ["id"], "loss": "MultiClass", "iterations": 60, "depth": 4,
         "learning_rate": 0.3}') > 0 AS trained;
SELECT (SELECT string_agg(f ->> 'transform' || coalesce(' ' || (f ->> 'class'), ''), ', ' ORDER BY (f ->> 'model_feature')::int)
          FROM jsonb_array_elements(gbml.model_json('jobs_ctr') -> 'categorical' -> 'model_features') AS f) AS model_features;
SELECT gbml.model_info('jobs_ctr') -> 'categorical' AS categorical,
       (SELECT avg((gbml.predict('jobs_ctr', j) = class)::int) FROM jobs j WHERE hashint4(id) % 4 = 0) > 0.95 AS accurate;

-- a class only the eval rows have (an eval share can hold a rare class's every row): the class
-- count is the largest label of both + 1, the class gets a small probability; queue's statistics
-- stay one a training class
SELECT gbml.train('jobs_rare', 'boost', 'SELECT * FROM jobs WHERE hashint4(id) % 4 <> 0',
       '{"label_column": "class", "exclude_columns": ["id"], "loss": "MultiClass", "iterations": 20, "depth": 3,
         "eval_source": "SELECT id, size, hour, queue, CASE WHEN id % 100 = 0 THEN 4 ELSE class END AS class FROM jobs WHERE hashint4(id) % 4 = 0"}') > 0 AS trained;
SELECT i ->> 'classes' AS classes, (i ->> 'trees')::int AS trees,
       (SELECT count(*) FROM jsonb_array_elements(gbml.model_json('jobs_rare') -> 'categorical' -> 'model_features') AS f
         WHERE f ->> 'class' IS NOT NULL) AS class_statistics,
       (SELECT max((gbml.predict_classes('jobs_rare', j))[5]) FROM jobs j) < 0.05 AS rare_class_unlikely
  FROM gbml.model_info('jobs_rare') AS i;

-- errors
SELECT gbml.predict_proba('jobs', j) FROM jobs j LIMIT 1;
SELECT gbml.predict_classes(gbml.boost_fit(f, y, '{"iterations": 2}'), ARRAY[1, 2]::real[]) FROM jobs_arrays;
SELECT gbml.boost_fit(f, (y + 0.5)::real, '{"loss": "MultiClass"}') FROM jobs_arrays;
SELECT gbml.boost_fit(f, y, '{"loss": "MultiClass", "classes_count": 3}') FROM jobs_arrays;
SELECT gbml.boost_fit(f, 0::real, '{"loss": "MultiClass"}') FROM jobs_arrays;
SELECT gbml.boost_fit(f, y, '{"loss": "MultiClass", "eval_metric": "AUC"}') FROM jobs_arrays;
SELECT gbml.boost_fit(f, y, '{"loss": "RMSE", "eval_metric": "Accuracy"}') FROM jobs_arrays;
