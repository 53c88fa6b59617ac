-- K-Means: determinism with a seed, the stop rules, empty clusters, k > rows,
-- GROUP BY training, assign/distance on a stored model, NULL/NaN input.
SET gbml.progress_interval = 0;
-- three well separated blobs of 300 points
CREATE TABLE blobs AS
SELECT i, c, ARRAY[c * 10 + ((i * 7919) % 1000) / 1000.0, c * -5 + ((i * 104729) % 1000) / 1000.0]::real[] AS f
  FROM generate_series(1, 900) AS i, LATERAL (SELECT i % 3 AS c) AS cc;

CREATE TABLE km AS SELECT gbml.kmeans_fit(f, 3, '{"random_seed": 1}') AS model FROM blobs;
-- every true blob maps to exactly one cluster, and the clusters are balanced
SELECT count(DISTINCT (c, gbml.kmeans_assign(model, f))) AS pairs,
       count(DISTINCT gbml.kmeans_assign(model, f)) AS clusters
  FROM blobs, km;
SELECT gbml.model_info(model) ->> 'stop_reason' AS stop_reason,
       (gbml.model_info(model) ->> 'iterations')::int < 20 AS few_iterations,
       round((gbml.model_info(model) -> 'metrics' ->> 'inertia')::numeric, 1) AS inertia,
       gbml.model_info(model) -> 'cluster_sizes' AS sizes
  FROM km;
-- distance: the inertia is the sum of squared distances
SELECT round(sum(gbml.kmeans_distance(model, f) ^ 2)::numeric, 1) AS sum_sq_distance FROM blobs, km;
SELECT jsonb_array_length(gbml.model_json(model) -> 'centroids') AS centroids FROM km;

-- determinism: same seed -> same bytes, whatever the thread count; another seed may differ
SELECT (SELECT gbml.kmeans_fit(f, 5, '{"random_seed": 2, "threads": 1}') FROM blobs)
     = (SELECT gbml.kmeans_fit(f, 5, '{"random_seed": 2, "threads": 2}') FROM blobs) AS same_bytes_any_threads;

-- stop rules: max_iter, min_frac_changed, tol; random init; explicit centroids
SELECT gbml.model_info(gbml.kmeans_fit(f, 3, '{"max_iter": 1, "tol": 0, "min_frac_changed": 0}')) ->> 'stop_reason' AS one_iteration FROM blobs;
SELECT gbml.model_info(gbml.kmeans_fit(f, 3, '{"init": [[0, 0], [10, -5], [20, -10]], "tol": 0, "min_frac_changed": 0}')) ->> 'stop_reason' AS from_given_centroids FROM blobs;
SELECT gbml.model_info(gbml.kmeans_fit(f, 3, '{"init": "random", "n_init": 3, "random_seed": 5}')) ->> 'n_init' AS n_init FROM blobs;
-- empty clusters are refilled with the farthest point: 5 identical starting centroids still give 5 non-empty clusters
SELECT (SELECT bool_and(s::int > 0) FROM jsonb_array_elements_text(gbml.model_info(m) -> 'cluster_sizes') AS s) AS no_empty_cluster
  FROM (SELECT gbml.kmeans_fit(f, 5, '{"init": [[0, 0], [0, 0], [0, 0], [0, 0], [0, 0]]}') AS m FROM blobs) s;

-- spherical (cosine) mode
SELECT gbml.kmeans_assign(model, ARRAY[1, 0]::real[]) = gbml.kmeans_assign(model, ARRAY[5, 0]::real[]) AS scale_free,
       round(gbml.kmeans_distance(model, ARRAY[3, 0]::real[])::numeric, 6) AS cosine_distance
  FROM (SELECT gbml.kmeans_fit(ARRAY[1 + i % 2, (i % 2) * 3]::real[], 2, '{"spherical": true}') AS model
          FROM generate_series(1, 100) AS i) s;

-- GROUP BY: one model per group
SELECT c, (gbml.model_info(gbml.kmeans_fit(f, 2)) ->> 'rows')::int AS rows FROM blobs GROUP BY c ORDER BY c;

-- errors
SELECT gbml.kmeans_fit(f, 1000) FROM blobs WHERE i < 10;
SELECT gbml.kmeans_fit(f, 0) FROM blobs;
SELECT gbml.kmeans_fit(f, NULL) FROM blobs;
SELECT gbml.kmeans_fit(f, 3, '{"init": [[1, 2, 3]]}') FROM blobs;
SELECT gbml.kmeans_fit(f, 3, '{"init": "kmeans||"}') FROM blobs;
SELECT gbml.kmeans_fit(ARRAY[1, 'NaN']::real[], 1);
SELECT gbml.kmeans_fit(NULL::real[], 1);
SELECT gbml.kmeans_fit(ARRAY[0, 0]::real[], 1, '{"spherical": true}');
SELECT gbml.kmeans_distance(model, ARRAY[1, 'NaN']::real[]) FROM km;
SELECT gbml.predict_proba(model, ARRAY[1, 2]::real[]) FROM km;

-- by name: the deployed version, like gbml.predict; a name mistaken for a bytea gets a hint
SELECT gbml.train('blob_clusters', 'kmeans', 'SELECT f AS features FROM blobs', '{"k": 3, "random_seed": 1}') > 0 AS trained;
SELECT bool_and(gbml.kmeans_assign('blob_clusters', f) = gbml.kmeans_assign(m.model, f)) AS same_clusters,
       bool_and(gbml.kmeans_distance('blob_clusters', f) = gbml.kmeans_distance(m.model, f)) AS same_distances
  FROM blobs, (SELECT model FROM gbml.models WHERE name = 'blob_clusters' AND deployed) m;
SELECT gbml.kmeans_assign('live'::bytea, ARRAY[1, 2]::real[]);
SELECT gbml.kmeans_assign('no_such_model', ARRAY[1, 2]::real[]);
DELETE FROM gbml.models WHERE name = 'blob_clusters';
-- an eval share is drawn by the rows' contents: 100 equal rows all held out say so
SELECT gbml.kmeans_fit(ARRAY[2, 1]::real[], 1, '{"eval_fraction": 0.5}') FROM generate_series(1, 100);
