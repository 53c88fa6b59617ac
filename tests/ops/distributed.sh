#!/usr/bin/env bash
# tests/ops/distributed.sh — training across servers (issue 14): a coordinator
# and two shards, each its own throwaway cluster; a table partitioned over
# postgres_fdw foreign tables, one partition on each shard.
#
# Checked: K-Means and boosting on the sharded table give the same model bytes
# as the same rows in one local table (K-Means: features array with k-means++;
# number columns in another column order on one shard, random init,
# spherical; boosting: RMSE and Logloss with a border sample drawn over the
# union's order, subsample, Logloss with 3 Newton steps per tree, RMSE on
# number columns, YetiRank with every query on one shard, one shard's rows in
# temporary files; text, enum and array columns with NULLs and categories only
# one shard has, with an eval set of either kind, and split as sets; K-Means on
# an array column);
# the model records every row; logistic regression reaches
# the single-server SAGA objective within 1e-6; a statement_timeout (K-Means
# and boosting) and a shard stopped with `pg_ctl stop -m immediate`
# mid-training end it with an ERROR (the latter naming the shard) and leave
# no gbml session on the other shard; a query on two shards, K-Means on a
# categorical column, a server that does not list
# gbml in its "extensions", a partitioned table mixing local and foreign
# partitions, and a non-superuser whose connection uses no password are
# refused with errors that name the problem; so are a remote column of
# another kind than its foreign table's and a shard database without gbml;
# foreign tables whose columns are renamed (column_name) train on the rows
# postgres_fdw reads; whole-row scores of foreign rows are computed here,
# under this server's names; statement_timeout ends a training whose shard
# accepts the connection and never answers, whose postmaster stops
# answering while the shard works (its cancel request is not waited for
# long), or that stops reading before a request larger than a socket buffer.
# Starts its own throwaway clusters; prints ok/not ok lines and "N passed, N failed".
cd "$(dirname "$0")" && source ./lib.sh

for c in coord shard1 shard2; do
  new_cluster $c || bail "initdb $c"
  start_cluster $c || bail "start $c"
  q $c postgres "CREATE EXTENSION gbml" || bail "create extension on $c"
done

# Shard s holds the rows with id % 2 = s - 1; shard2's table has its columns in another order.
shard_rows() { # shard number, modulus residue
  q_file shard$1 postgres <<SQL || bail "rows on shard$1"
CREATE TABLE pts AS
SELECT i AS id,
       ARRAY[(i % 7) * 1.5 + sin(i), (i % 5) - cos(i * 0.3), ((i * 37) % 101) / 10.0, (i % 3)::real]::real[] AS features,
       ((i % 7) * 1.5 + sin(i) - ((i * 37) % 101) / 10.0 + 4 * sin(i * 7.1) > 0)::int::real AS label
  FROM generate_series(1, 24000) AS i WHERE i % 2 = $2;
-- a few duplicate rows on both shards (the same features from other ids)
INSERT INTO pts SELECT 100000 + i, ARRAY[1, 2, 3, 4]::real[], 1 FROM generate_series(1, 5) AS i;
CREATE TABLE cols AS SELECT id, features[1]::float8 AS a, features[2]::real AS b, features[3]::numeric AS c, features[4]::int AS d FROM pts;
-- queries for the ranking losses: qid keeps each query on one shard, qid_split deals every query to both
CREATE TABLE rk AS SELECT id, features, (label * 2 + (id % 3))::real AS label, (id / 14) * 2 + $2 AS qid,
       id / 14 AS qid_split FROM pts;
SQL
}
shard_rows 1 0
shard_rows 2 1
q shard2 postgres "CREATE TABLE cols2 AS SELECT d, c, id, b, a FROM cols; DROP TABLE cols; ALTER TABLE cols2 RENAME TO cols" ||
  bail "reorder shard2's columns"

fdw_shards coord shard1 shard2 || bail "postgres_fdw servers on the coordinator"
q_file coord postgres <<SQL || bail "set up the coordinator"
CREATE TABLE pts (id int, features real[], label real) PARTITION BY LIST ((id % 2));
CREATE FOREIGN TABLE pts_0 PARTITION OF pts FOR VALUES IN (0) SERVER shard1 OPTIONS (table_name 'pts');
CREATE FOREIGN TABLE pts_1 PARTITION OF pts FOR VALUES IN (1) SERVER shard2 OPTIONS (table_name 'pts');
CREATE TABLE rk (id int, features real[], label real, qid int, qid_split int) PARTITION BY LIST ((id % 2));
CREATE FOREIGN TABLE rk_0 PARTITION OF rk FOR VALUES IN (0) SERVER shard1 OPTIONS (table_name 'rk');
CREATE FOREIGN TABLE rk_1 PARTITION OF rk FOR VALUES IN (1) SERVER shard2 OPTIONS (table_name 'rk');
CREATE TABLE cols (id int, a float8, b real, c numeric, d int) PARTITION BY LIST ((id % 2));
CREATE FOREIGN TABLE cols_0 PARTITION OF cols FOR VALUES IN (0) SERVER shard1 OPTIONS (table_name 'cols');
CREATE FOREIGN TABLE cols_1 PARTITION OF cols FOR VALUES IN (1) SERVER shard2 OPTIONS (table_name 'cols');
-- the union of the rows on one server, for the reference models
CREATE TABLE pts_local AS SELECT * FROM pts;
CREATE TABLE cols_local AS SELECT * FROM cols;
CREATE TABLE rk_local AS SELECT * FROM rk;
SQL

# same_bytes NAME ALGORITHM TABLE PARAMS [CONDITION]: NAME_dist trained on the sharded TABLE and NAME_one on
# TABLE_local with the same PARAMS (JSON members); t when their model bytes are equal (and CONDITION holds)
same_bytes() {
  q coord postgres "SELECT gbml.train('$1_dist', '$2', '$3', '{$4}');
    SELECT gbml.train('$1_one', '$2', '${3}_local', '{$4}');
    SELECT (SELECT model FROM gbml.models WHERE name = '$1_dist') = (SELECT model FROM gbml.models WHERE name = '$1_one')${5:+ AND $5}" 2>&1 | tail -1
}

# --- same model bytes as one server ---
check "k-means++ on a features array: the sharded table gives the single-server model bytes" t \
  "$(same_bytes km kmeans pts "\"k\": 6, \"random_seed\": 3")"
out=$(q coord postgres "SELECT rows FROM gbml.models WHERE name = 'km_dist'" 2>&1)
check "the sharded model records every row of both shards" 24010 "$out"
# under a small budget: the coordinator's pages of the shards' row order (8 MB a shard whatever the
# rows, before stop 46: a plain "memory limit exceeded") are sized to the rows and the budget
check "k-means++ under memory_limit_mb 4: the same bytes as one server (and as without the limit)" t \
  "$(same_bytes kms kmeans pts "\"k\": 6, \"random_seed\": 3, \"memory_limit_mb\": 4" \
     "(SELECT model FROM gbml.models WHERE name = 'kms_dist') = (SELECT model FROM gbml.models WHERE name = 'km_dist')")"

check "number columns (another column order on one shard), random init, spherical: the same bytes" t \
  "$(same_bytes kc kmeans cols '"k": 5, "init": "random", "spherical": true, "n_init": 2, "exclude_columns": ["id"]')"
out2=$(q coord postgres "SELECT bool_and(gbml.kmeans_assign('kc_dist', r) = gbml.kmeans_assign('kc_one', r)) FROM cols_local r" 2>&1)
check "the sharded columns model scores a row like the local one" t "$out2"

# --- the linear model: the single-server optimum ---
lin='"loss": "logistic", "alpha": 0.001, "standardize": true, "exclude_columns": ["id"]'
out=$(q coord postgres "SELECT gbml.train('lin_dist', 'saga', 'pts', '{$lin}');
  SELECT gbml.train('lin_one', 'saga', 'pts_local', '{$lin, \"tol\": 1e-12, \"max_iter\": 20000}');
  SELECT abs(d.obj - o.obj) <= 1e-6 * abs(o.obj)
    FROM (SELECT (metrics->>'objective')::float8 AS obj FROM gbml.models WHERE name = 'lin_dist') d,
         (SELECT (metrics->>'objective')::float8 AS obj FROM gbml.models WHERE name = 'lin_one') o" 2>&1 | tail -1)
check "logistic regression on the sharded table reaches the single-server SAGA objective within 1e-6" t "$out"
out=$(q coord postgres "SELECT count(*) FILTER (WHERE (gbml.predict('lin_dist', features) > 0) = (gbml.predict('lin_one', features) > 0)) * 1.0 / count(*) >= 0.999 FROM pts_local" 2>&1)
check "... and scores the rows like it" t "$out"

# --- boosting: the same model bytes as one server ---
# 24010 rows, a border sample of 5000: drawn over the union's order, gathered from the shards
bst='"iterations": 30, "depth": 5, "border_sample_size": 5000, "exclude_columns": ["id"]'
check "boosting (RMSE, a sampled border set) on the sharded table gives the single-server model bytes" t \
  "$(same_bytes b boost pts "$bst")"
check "... under memory_limit_mb 6 (the sample's places and sort checked against it): the same bytes" t \
  "$(same_bytes bsm boost pts "$bst, \"memory_limit_mb\": 6" \
     "(SELECT model FROM gbml.models WHERE name = 'bsm_dist') = (SELECT model FROM gbml.models WHERE name = 'b_dist')")"
err=$(q_err coord postgres "SELECT gbml.train('bsm2', 'boost', 'pts', '{$bst, \"border_sample_size\": 24010, \"memory_limit_mb\": 1}')")
check_match "... under memory_limit_mb 1: an ERROR naming what did not fit, with the limit to set" \
  'memory limit exceeded by what stays in memory.*(border sample|ordering the).*HINT:.*at least [0-9]+ MB' "$(echo $err)"
check "boosting with Logloss: the same bytes" t \
  "$(same_bytes bl boost pts "$bst, \"loss\": \"Logloss\"")"
bc='"iterations": 20, "depth": 4, "label_column": "a", "exclude_columns": ["id"]'
check "boosting on number columns (another column order on one shard), every row the border sample: the same bytes" t \
  "$(same_bytes bc boost cols "$bc")"
out=$(q coord postgres "SELECT (t->>'shards')::int = 2 AND (t->>'shard_round_trips')::int > 20 FROM (SELECT coalesce(timings->'timings', timings) AS t FROM gbml.models WHERE name = 'b_dist') x" 2>&1)
check "the sharded boosting model's timings report the exchanges with both shards" t "$out"
rk='"iterations": 15, "depth": 4, "border_sample_size": 5000, "group_column": "qid", "exclude_columns": ["id", "qid_split"]'
check "ranking (YetiRank, every query on one shard): the same bytes" t \
  "$(same_bytes r boost rk "$rk")"
err=$(q_err coord postgres "SELECT gbml.train('rs', 'boost', 'rk', '{\"group_column\": \"qid_split\", \"exclude_columns\": [\"id\", \"qid\"]}')")
check_match "a query whose rows are on two shards is refused for a ranking loss, naming it and both shards" \
  'query [0-9]+ has rows on shards shard1 and shard2; a ranking loss needs every query.s rows on one shard' "$(errline "$err")"
check "a pointwise loss with group ids, queries on both shards, subsample and an eval set by query: the same bytes" t \
  "$(same_bytes rp boost rk '"loss": "RMSE", "iterations": 30, "depth": 4, "learning_rate": 0.5, "subsample": 0.7, "eval_fraction": 0.3, "early_stopping_rounds": 3, "border_sample_size": 5000, "group_column": "qid_split", "exclude_columns": ["id", "qid"]')"
check "boosting with subsample (rows drawn by their global index): the same bytes" t \
  "$(same_bytes bs boost pts "$bst, \"subsample\": 0.7")"
check "boosting with Logloss and leaf_estimation_iterations 3: the same bytes" t \
  "$(same_bytes bl3 boost pts "$bst, \"loss\": \"Logloss\", \"leaf_estimation_iterations\": 3")"
q coord postgres "SELECT gbml.train('bn0_one', 'boost', 'pts_local', '{$bst, \"loss\": \"Logloss\", \"score_function\": \"L2\"}')" >/dev/null
out=$(same_bytes bn boost pts "$bst, \"loss\": \"Logloss\", \"score_function\": \"L2\", \"random_strength\": 1" \
  "(SELECT model FROM gbml.models WHERE name = 'bn_one') <> (SELECT model FROM gbml.models WHERE name = 'bn0_one')")
check "boosting with random_strength 1 (its noise scale from the shards): the same bytes, not those without noise" t "$out"
out=$(same_bytes bd boost pts "$bst, \"grow_policy\": \"Depthwise\", \"loss\": \"Logloss\", \"subsample\": 0.8" \
  "(SELECT model FROM gbml.models WHERE name = 'bd_one') <> (SELECT model FROM gbml.models WHERE name = 'bl_one')")
check "boosting with Depthwise trees (each level's node splits sent to the shards), subsample 0.8: the same bytes" t "$out"
mc='"iterations": 8, "depth": 4, "border_sample_size": 5000, "loss": "MultiClass", "exclude_columns": ["id", "qid", "qid_split"]'
out=$(same_bytes bm boost rk "$mc, \"eval_metric\": \"Accuracy\", \"subsample\": 0.8" \
  "(SELECT (gbml.model_info(model) ->> 'classes')::int FROM gbml.models WHERE name = 'bm_dist') = 5")
check "boosting with the MultiClass loss (five classes; the union's class count and base scores, a tree a class): the same bytes" t "$out"
# a budget too small across servers: every step that does not fit says which, on the coordinator or a
# shard (the differential probe found a shard's MultiClass iteration start and the coordinator's pages
# of the row order past every check: the plain "memory limit exceeded: 0.3 MB needed")
for mb in 1 2 3; do
  err=$(q_err coord postgres "SELECT gbml.train('bms$mb', 'boost', 'rk', '{$mc, \"grow_policy\": \"Depthwise\", \"memory_limit_mb\": $mb}')")
  check_match "MultiClass Depthwise at memory_limit_mb $mb: trained, or an ERROR naming the step that did not fit" \
    '^$|memory limit exceeded by what stays in memory.*HINT:.*at least [0-9]+ MB' "$(echo $err)"
done
# an eval_source (the coordinator's rows) with a class no training row has: the class count takes it
# (before, the shards trained five classes and the eval metric read past the predictions' columns)
out=$(same_bytes bme boost rk "$mc, \"eval_source\": \"SELECT id, features, (label + id % 2)::real AS label, qid, qid_split FROM rk_local WHERE id % 97 = 0\"" \
  "(SELECT (gbml.model_info(model) ->> 'classes')::int = 6 AND (gbml.model_info(model) -> 'metrics' ->> 'eval_value')::float8 BETWEEN 0 AND 10
      FROM gbml.models WHERE name = 'bme_dist')")
check "MultiClass with an eval_source holding a sixth class: six classes, a sane eval metric, the same bytes" t "$out"
# eval_fraction: each shard holds out the rows one server would (by their contents); the eval metric
# each tree is an exact sum over the shards, early stopping and the best model's cut are one server's
ev='"iterations": 200, "depth": 5, "learning_rate": 0.5, "border_sample_size": 5000, "exclude_columns": ["id"], "eval_fraction": 0.2, "early_stopping_rounds": 5'
out=$(same_bytes be boost pts "$ev" "(SELECT (i ->> 'stopped_early')::bool AND (i ->> 'trees')::int < (i ->> 'iterations_run')::int
                 AND (i ->> 'eval_rows')::int BETWEEN 3000 AND 6600 AND i -> 'metrics' ->> 'eval_set' = 'eval'
          FROM (SELECT gbml.model_info(model) AS i FROM gbml.models WHERE name = 'be_dist') x)")
check "boosting with eval_fraction, early stopping and the best model's cut: the same bytes as one server" t "$out"
check "ranking with eval queries (NDCG on the held-out queries, early stopping): the same bytes" t \
  "$(same_bytes re boost rk "$rk, \"eval_fraction\": 0.25, \"learning_rate\": 0.8, \"early_stopping_rounds\": 3")"
out=$(same_bytes kef kmeans pts "\"k\": 4, \"eval_fraction\": 0.2" \
  "(SELECT (gbml.model_info(model) ->> 'eval_rows')::int BETWEEN 3000 AND 6600 FROM gbml.models WHERE name = 'kef_dist')")
check "K-Means with eval_fraction (the held-out rows gathered to the coordinator): the same bytes" t "$out"
check "... under memory_limit_mb 3 (the held-out rows gathered in pages the budget holds): the same bytes" t \
  "$(same_bytes kfs kmeans pts "\"k\": 4, \"eval_fraction\": 0.2, \"memory_limit_mb\": 3" \
     "(SELECT model FROM gbml.models WHERE name = 'kfs_dist') = (SELECT model FROM gbml.models WHERE name = 'kef_dist')")"
# the linear model with an eval set ($2: its params): its eval objective within 1e-6 of one server's at the optimum
saga_eval_close() {
  q coord postgres "SELECT gbml.train('$1_dist', 'saga', 'pts', '{$lin, $2}');
    SELECT gbml.train('$1_one', 'saga', 'pts_local', '{$lin, \"tol\": 1e-12, \"max_iter\": 20000, $2}');
    SELECT abs(d - o) <= 1e-6 * abs(o) FROM (SELECT (SELECT (gbml.model_info(model) -> 'metrics' ->> 'eval_objective')::float8 FROM gbml.models WHERE name = '$1_dist') d,
       (SELECT (gbml.model_info(model) -> 'metrics' ->> 'eval_objective')::float8 FROM gbml.models WHERE name = '$1_one') o) x" 2>&1 | tail -1
}
check "the linear model with eval_fraction: its eval objective within 1e-6 of one server's" t "$(saga_eval_close sef '"eval_fraction": 0.2')"
# eval_source: the coordinator reads the eval rows itself and scores them every tree (their labels
# are the training rows' upside down, so the eval error grows and training stops early)
es='"iterations": 200, "depth": 5, "learning_rate": 0.5, "border_sample_size": 5000, "exclude_columns": ["id"], "early_stopping_rounds": 5, "eval_source": "SELECT features, 1 - label AS label FROM pts_local WHERE id % 7 = 3"'
out=$(same_bytes bes boost pts "$es" "(SELECT (i ->> 'trees')::int < (i ->> 'iterations_run')::int AND (i ->> 'stopped_early')::bool AND (i ->> 'eval_rows')::int = (SELECT count(*) FROM pts_local WHERE id % 7 = 3)
          FROM (SELECT gbml.model_info(model) AS i FROM gbml.models WHERE name = 'bes_dist') x)")
check "boosting with an eval_source (scored on the coordinator), early stopping and the cut: the same bytes" t "$out"
check "boosting on number columns with an eval_source (read through the columns' plan): the same bytes" t \
  "$(same_bytes bces boost cols "$bc, \"eval_source\": \"SELECT * FROM cols_local WHERE id % 5 = 1\"")"
out=$(same_bytes kes kmeans pts "\"k\": 4, \"eval_source\": \"SELECT * FROM pts_local WHERE id % 3 = 0\"" \
  "(SELECT gbml.model_info(model) -> 'metrics' ->> 'eval_metric' FROM gbml.models WHERE name = 'kes_dist') = 'eval_inertia'")
check "K-Means with an eval_source (its inertia on the coordinator): the same bytes" t "$out"
check "the linear model with an eval_source: its eval objective within 1e-6 of one server's" t \
  "$(saga_eval_close ses '"eval_source": "SELECT * FROM pts_local WHERE id % 3 = 0"')"
auc='"loss": "Logloss", "eval_metric": "AUC", "iterations": 60, "depth": 5, "learning_rate": 0.5, "border_sample_size": 5000, "eval_fraction": 0.2, "early_stopping_rounds": 4'
out=$(same_bytes ba boost pts "$auc" \
  "(SELECT gbml.model_info(model) -> 'metrics' ->> 'eval_metric' FROM gbml.models WHERE name = 'ba_dist') = 'AUC'")
check "boosting with AUC on an eval set (the shards' predictions gathered each iteration): the same bytes" t "$out"

# --- categorical columns (text, an enum), an array column and NULLs across servers ---
# Each shard has categories the other lacks; shard2's columns are in another order.
for c in coord shard1 shard2; do
  q $c postgres "CREATE TYPE dev AS ENUM ('phone', 'tablet', 'desktop', 'tv')" >/dev/null || bail "enum on $c"
done
cat_rows() { # shard number, residue, the extra category prefix
  q_file shard$1 postgres <<SQL || bail "categorical rows on shard$1"
CREATE TABLE cat AS
SELECT i AS id, (i % 11) * 0.7 + sin(i) AS price,
       CASE WHEN i % 13 = 0 THEN NULL WHEN i % 17 = 0 THEN '$3' || (i % 5) ELSE 'r' || ((i * 7) % 30) END AS region,
       (ARRAY['phone', 'tablet', 'desktop', 'tv'])[1 + i % 4]::dev AS device,
       ARRAY[cos(i), (i % 9) / 3.0]::real[] AS vec, (i * 5) % 23 + 100 * $2 AS store,
       ((i * 7) % 30) * 0.4 + (i % 4) * 0.8 + ((i * 5) % 23) * 0.05 + sin(i * 3.3) AS label
  FROM generate_series(1, 8000) AS i WHERE i % 2 = $2;
SQL
}
cat_rows 1 0 east
cat_rows 2 1 west
q shard2 postgres "CREATE TABLE cat2 AS SELECT vec, label, store, device, id, region, price FROM cat; DROP TABLE cat; ALTER TABLE cat2 RENAME TO cat" ||
  bail "reorder shard2's categorical columns"
q_file coord postgres <<SQL || bail "the categorical table on the coordinator"
CREATE TABLE cat (id int, price float8, region text, device dev, vec real[], store int, label float8) PARTITION BY LIST ((id % 2));
CREATE FOREIGN TABLE cat_0 PARTITION OF cat FOR VALUES IN (0) SERVER shard1 OPTIONS (table_name 'cat');
CREATE FOREIGN TABLE cat_1 PARTITION OF cat FOR VALUES IN (1) SERVER shard2 OPTIONS (table_name 'cat');
CREATE TABLE cat_local AS SELECT * FROM cat;
SQL
ct='"iterations": 25, "depth": 4, "exclude_columns": ["id"], "one_hot_max_size": 4, "ctr_counter": true'
check "boosting on text, enum and array columns with NULLs (one-hot, ordered target statistics): the same bytes as one server" t \
  "$(same_bytes ct boost cat "$ct")"
out=$(q coord postgres "SELECT jsonb_array_length(f -> 'categories') FROM gbml.models, jsonb_array_elements(gbml.model_json(model) -> 'feature_schema') AS f WHERE name = 'ct_dist' AND f ->> 'name' = 'region'" 2>&1)
check "the sharded model's region feature has the union's 40 categories (30, 5 on each shard only)" 40 "$out"
check "... with eval_fraction and early stopping: the same bytes" t \
  "$(same_bytes cte boost cat "$ct, \"eval_fraction\": 0.2, \"learning_rate\": 0.8, \"iterations\": 200, \"early_stopping_rounds\": 3")"
check "... with an eval_source holding a category no shard has: the same bytes" t \
  "$(same_bytes cts boost cat "$ct, \"eval_source\": \"SELECT id, price, CASE WHEN id % 2 = 0 THEN upper(region) ELSE region END AS region, device, vec, store, label FROM cat_local WHERE id % 9 = 4\"")"
check "... with an integer column made categorical (categorical_columns; each shard's stores its own): the same bytes" t \
  "$(same_bytes cti boost cat "$ct, \"categorical_columns\": [\"store\"]" \
     "(SELECT jsonb_array_length(f -> 'categories') FROM gbml.models, jsonb_array_elements(gbml.model_json(model) -> 'feature_schema') AS f WHERE name = 'cti_dist' AND f ->> 'name' = 'store') = 46")"
check "... with Depthwise trees splitting categories as sets: the same bytes" t \
  "$(same_bytes ctd boost cat "$ct, \"grow_policy\": \"Depthwise\", \"categorical_split\": \"sets\"")"
out=$(q coord postgres "SELECT bool_and(gbml.predict('ct_dist', r) = gbml.predict('ct_one', r)) FROM cat_local r" 2>&1)
check "the sharded categorical model scores whole rows like the local one" t "$out"
# query ids of 10 consecutive ids: every query has rows on both shards (ids alternate between them)
for c in shard1 shard2; do
  q $c postgres "ALTER TABLE cat ADD COLUMN qid int; UPDATE cat SET qid = id / 10" >/dev/null || bail "query ids on $c"
done
q coord postgres "ALTER TABLE cat ADD COLUMN qid int; ALTER TABLE cat_local ADD COLUMN qid int; UPDATE cat_local SET qid = id / 10" >/dev/null ||
  bail "query ids on the coordinator"
check "... with query ids whose queries span both shards (a pointwise loss; the statistics along the union's order), subsample and an eval set by query: the same bytes" t \
  "$(same_bytes ctq boost cat "$ct, \"loss\": \"RMSE\", \"group_column\": \"qid\", \"subsample\": 0.8, \"eval_fraction\": 0.2, \"early_stopping_rounds\": 3, \"iterations\": 60")"
for c in coord shard1 shard2; do
  q $c postgres "ALTER TABLE cat DROP COLUMN qid" >/dev/null || bail "drop the query ids on $c"
done
q coord postgres "ALTER TABLE cat_local DROP COLUMN qid" >/dev/null || bail "drop the local query ids"
check "K-Means on a number and an array column across servers: the same bytes" t \
  "$(same_bytes ka kmeans cat '"k": 3, "feature_columns": ["price", "vec"]')"
# K-Means and the linear models one-hot encode categories by the union's rows per category (the probe counts them)
ko='"k": 3, "exclude_columns": ["id"], "one_hot": true'
check "K-Means with one_hot on text, enum and array columns with NULLs across servers: the same bytes" t \
  "$(same_bytes ko kmeans cat "$ko")"
out=$(q coord postgres "SELECT bool_and(gbml.kmeans_assign('ko_dist', r) = gbml.kmeans_assign('ko_one', r)) FROM cat_local r" 2>&1)
check "the sharded one-hot K-Means model assigns whole rows like the local one" t "$out"
check "... with an integer column made categorical and an eval_source holding a category no shard has: the same bytes" t \
  "$(same_bytes kos kmeans cat "$ko, \"categorical_columns\": [\"store\"], \"eval_source\": \"SELECT id, price, CASE WHEN id % 2 = 0 THEN upper(region) ELSE region END AS region, device, vec, store, label FROM cat_local WHERE id % 9 = 4\"")"
err=$(q_err coord postgres "SELECT gbml.train('kc_bad', 'kmeans', 'cat', '{\"k\": 3, \"exclude_columns\": [\"id\"]}')")
check_match "K-Means on a categorical column without one_hot across servers is refused as on one server, naming it" \
  'column "region" \(text\) is categorical, and K-Means measures distances between numbers' "$(errline "$err")"
check_match "... with the shard's hint" 'Pass "one_hot": true' "$(hintline "$err")"
check "... with eval_fraction (each shard counts its training rows' categories, the eval rows encoded on the coordinator): the same bytes" t \
  "$(same_bytes kof kmeans cat "$ko, \"eval_fraction\": 0.2")"
lc='"loss": "squared", "alpha": 0.01, "standardize": true, "exclude_columns": ["id"], "max_categories": 12, "categorical_columns": ["store"]'
out=$(q coord postgres "SELECT gbml.train('lc_dist', 'saga', 'cat', '{$lc}');
  SELECT gbml.train('lc_one', 'saga', 'cat_local', '{$lc, \"tol\": 1e-12, \"max_iter\": 20000}');
  SELECT abs(d.obj - o.obj) <= 1e-6 * abs(o.obj) AND gbml.model_json(d.model) -> 'columns' = gbml.model_json(o.model) -> 'columns'
    FROM (SELECT (metrics->>'objective')::float8 AS obj, model FROM gbml.models WHERE name = 'lc_dist') d,
         (SELECT (metrics->>'objective')::float8 AS obj, model FROM gbml.models WHERE name = 'lc_one') o" 2>&1 | tail -1)
check "a linear model on the categorical columns across servers (the 12 most frequent of each, by the union's counts): one server's columns, its objective within 1e-6" t "$out"
out=$(q coord postgres "SELECT gbml.train('lcf_dist', 'saga', 'cat', '{$lc, \"eval_fraction\": 0.2}');
  SELECT gbml.train('lcf_one', 'saga', 'cat_local', '{$lc, \"eval_fraction\": 0.2, \"tol\": 1e-12, \"max_iter\": 20000}');
  SELECT abs(d.e - o.e) <= 1e-4 * abs(o.e) AND gbml.model_json(d.model) -> 'columns' = gbml.model_json(o.model) -> 'columns'
    FROM (SELECT (gbml.model_info(model) -> 'metrics' ->> 'eval_objective')::float8 AS e, model FROM gbml.models WHERE name = 'lcf_dist') d,
         (SELECT (gbml.model_info(model) -> 'metrics' ->> 'eval_objective')::float8 AS e, model FROM gbml.models WHERE name = 'lcf_one') o" 2>&1 | tail -1)
check "... with eval_fraction: one server's columns (the training rows' counts), its eval objective within 1e-4" t "$out"

# --- a shard whose every row eval_fraction holds out (a partition of one row) ---
# held_out ALGO COLUMNS PARAMS: the first v in 1..60 whose row (ARRAY[v, -v] AS features, then
# COLUMNS) one server's split (eval_fraction 0.3) holds out of a table of it alone
held_out() {
  local v err
  for v in $(seq 1 60); do
    err=$(q_err coord postgres "SELECT gbml.train('probe', '$1', 'SELECT ARRAY[$v, -$v]::real[] AS features$2', '{$3\"eval_fraction\": 0.3}')")
    case "$err" in *"leaves no training rows"*) echo "$v"; return 0 ;; esac
  done
  return 1
}
# one_row_partition TABLE V: TABLE (id, features, label) of 500 rows on shard1 and the row
# (1, ARRAY[V, -V], 0.5) alone on shard2, and TABLE_local, its copy on the coordinator
one_row_partition() {
  q shard1 postgres "CREATE TABLE $1 AS SELECT i AS id, ARRAY[cos(i), sin(i * 1.7)]::real[] AS features,
      (2 * cos(i) + sin(i * 1.7))::real AS label FROM generate_series(0, 998, 2) AS i" &&
    q shard2 postgres "CREATE TABLE $1 AS SELECT 1 AS id, ARRAY[$2, -$2]::real[] AS features, 0.5::real AS label" &&
    q coord postgres "CREATE TABLE $1 (id int, features real[], label real) PARTITION BY LIST ((id % 2));
      CREATE FOREIGN TABLE ${1}_0 PARTITION OF $1 FOR VALUES IN (0) SERVER shard1 OPTIONS (table_name '$1');
      CREATE FOREIGN TABLE ${1}_1 PARTITION OF $1 FOR VALUES IN (1) SERVER shard2 OPTIONS (table_name '$1');
      CREATE TABLE ${1}_local AS SELECT * FROM $1"
}
# same_eval_rows NAME: the sharded and the local model of NAME have the same eval rows
same_eval_rows() {
  echo "(SELECT (gbml.model_info(model) ->> 'eval_rows') = (SELECT gbml.model_info(model) ->> 'eval_rows' FROM gbml.models WHERE name = '${1}_one') FROM gbml.models WHERE name = '${1}_dist')"
}
lone=$(held_out kmeans ", 0.5::real AS label" '"k": 1, ') || bail "no row that eval_fraction 0.3 holds out among 60"
one_row_partition few "$lone" || bail "the table with a one-row partition"
check "K-Means with eval_fraction where one shard's every row is held out: gathered, the same bytes" t \
  "$(same_bytes kfew kmeans few '"k": 3, "eval_fraction": 0.3' "$(same_eval_rows kfew)")"
# boosting: that shard keeps its eval row, takes part in every step and scores it each tree
lone=$(held_out boost ", 0.5::real AS label" "") || bail "no labelled row that eval_fraction 0.3 holds out among 60"
one_row_partition fewb "$lone" || bail "the labelled table with a one-row partition"
check "boosting with eval_fraction where one shard's every row is held out: it scores its eval row, the same bytes" t \
  "$(same_bytes bfew boost fewb '"iterations": 40, "learning_rate": 0.5, "eval_fraction": 0.3, "early_stopping_rounds": 3' \
     "$(same_eval_rows bfew)")"

# --- no state left on a shard ---
sessions() { q $1 postgres "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'gbml shard'" 2>&1; }
settled() { # cluster: 0 gbml shard sessions within 10 s
  local i
  for ((i = 0; i < 100; i++)); do [ "$(sessions $1)" = 0 ] && return 0; sleep 0.1; done
  return 1
}
settled shard1 && settled shard2 && ok "after the trainings no gbml session is left on either shard" ||
  notok "gbml sessions left on the shards: $(sessions shard1), $(sessions shard2)"

# --- cancel: statement_timeout while the shards work ---
q_file shard1 postgres <<'SQL' >/dev/null || bail "big rows on shard1"
CREATE TABLE big AS SELECT i AS id, ARRAY(SELECT random() FROM generate_series(1, 32))::real[] AS features
  FROM generate_series(1, 150000) AS i;
SQL
q_file shard2 postgres <<'SQL' >/dev/null || bail "big rows on shard2"
CREATE TABLE big AS SELECT i AS id, ARRAY(SELECT random() FROM generate_series(1, 32))::real[] AS features
  FROM generate_series(1, 150000) AS i;
SQL
q_file coord postgres <<'SQL' >/dev/null || bail "the big sharded table"
CREATE TABLE big (id int, features real[]) PARTITION BY HASH (id);
CREATE FOREIGN TABLE big_0 PARTITION OF big FOR VALUES WITH (MODULUS 2, REMAINDER 0) SERVER shard1 OPTIONS (table_name 'big');
CREATE FOREIGN TABLE big_1 PARTITION OF big FOR VALUES WITH (MODULUS 2, REMAINDER 1) SERVER shard2 OPTIONS (table_name 'big');
SQL
big_params='{"k": 1000, "max_iter": 100000, "tol": 0, "min_frac_changed": 0, "exclude_columns": ["id"]}'
start=$SECONDS
err=$(q_err coord postgres "SET statement_timeout = '3s'; SELECT gbml.train('km_big', 'kmeans', 'big', '$big_params')")
secs=$((SECONDS - start))
check_match "statement_timeout ends a training across servers" "canceling statement due to statement timeout" "$(errline "$err")"
[ $secs -le 8 ] && ok "... within a few seconds of the timeout ($secs s)" || notok "the timeout took $secs s"
settled shard1 && settled shard2 && ok "after the cancel no gbml session is left on either shard" ||
  notok "gbml sessions left after the cancel: $(sessions shard1), $(sessions shard2)"
start=$SECONDS
err=$(q_err coord postgres "SET statement_timeout = '3s'; SELECT gbml.train('b_big', 'boost', 'big', '{\"iterations\": 100000, \"depth\": 8, \"label_column\": \"id\"}')")
secs=$((SECONDS - start))
check_match "statement_timeout ends a boosting training across servers" "canceling statement due to statement timeout" "$(errline "$err")"
[ $secs -le 8 ] && ok "... within a few seconds of the timeout ($secs s)" || notok "the timeout took $secs s"
settled shard1 && settled shard2 && ok "after the boosting cancel no gbml session is left on either shard" ||
  notok "gbml sessions left after the boosting cancel: $(sessions shard1), $(sessions shard2)"

# --- boosting with one shard's rows in temporary files (its memory budget is small) ---
q shard2 postgres "ALTER DATABASE postgres SET gbml.memory_limit = '32MB'" >/dev/null
q coord postgres "CREATE TABLE big_local AS SELECT * FROM big" >/dev/null
temp_bytes() { q shard2 postgres "SELECT temp_bytes FROM pg_stat_database WHERE datname = 'postgres'" 2>&1; }
temp_before=$(temp_bytes)
bb='"iterations": 8, "depth": 5, "border_sample_size": 20000, "label_column": "id"'
check "boosting with one shard's rows spilled to temporary files: the same bytes" t \
  "$(same_bytes bb boost big "$bb")"
for ((i = 0; i < 50; i++)); do [ "$(temp_bytes)" -gt "$temp_before" ] 2>/dev/null && break; sleep 0.1; done
[ "$(temp_bytes)" -gt "$temp_before" ] 2>/dev/null && ok "... and that shard did write temporary files ($(( $(temp_bytes) - temp_before )) bytes)" ||
  notok "shard2 wrote no temporary files (temp_bytes $temp_before -> $(temp_bytes))"
q shard2 postgres "ALTER DATABASE postgres RESET gbml.memory_limit" >/dev/null

# --- a shard that goes down mid-training ---
bg coord postgres "$OPS_WORK/down.out" train_down "SELECT gbml.train('km_down', 'kmeans', 'big', '$big_params')"
poll shard2 postgres 30 "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'gbml shard' AND state = 'active'" >/dev/null ||
  notok "the training never reached shard2"
sleep 1
as_pg "$PGBIN/pg_ctl" -D "$OPS_WORK/shard2/data" -m immediate -w -t 30 stop >/dev/null
wait "$BG_PID"
check_match "a shard stopped mid-training fails it with an ERROR naming the shard" 'ERROR: .*shard "shard2"' "$(tr '\n' ' ' <"$OPS_WORK/down.out")"
settled shard1 && ok "after the failure no gbml session is left on the other shard" ||
  notok "gbml sessions left on shard1: $(sessions shard1)"
start_cluster shard2 || bail "restart shard2"
wait_ready shard2 || bail "shard2 ready"

# --- refusals ---
q coord postgres "CREATE SERVER plain FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$OPS_WORK/shard1', port '${OPS_PORT[shard1]}', dbname 'postgres');
  CREATE USER MAPPING FOR postgres SERVER plain OPTIONS (user 'postgres');
  CREATE TABLE p2 (id int, features real[]) PARTITION BY LIST ((id % 2));
  CREATE FOREIGN TABLE p2_0 PARTITION OF p2 FOR VALUES IN (0) SERVER plain OPTIONS (table_name 'pts');
  CREATE TABLE p2_1 PARTITION OF p2 FOR VALUES IN (1);
  CREATE TABLE p3 (id int, features real[]) PARTITION BY LIST ((id % 2));
  CREATE FOREIGN TABLE p3_0 PARTITION OF p3 FOR VALUES IN (0) SERVER plain OPTIONS (table_name 'pts');" >/dev/null
err=$(q_err coord postgres "SELECT gbml.train('x', 'kmeans', 'p3', '{\"k\": 2, \"exclude_columns\": [\"id\"]}')")
check_match "a server without gbml in its extensions option is refused, with the fix" \
  'does not list gbml in its "extensions" option.*HINT: .*ALTER SERVER plain OPTIONS \(ADD extensions' "$(tr '\n' ' ' <<<"$err")"
err=$(q_err coord postgres "SELECT gbml.train('x', 'kmeans', 'p2', '{\"k\": 2, \"exclude_columns\": [\"id\"]}')")
check_match "local and foreign partitions mixed are refused" "has 1 foreign and 1 local partitions" "$(errline "$err")"
q coord postgres "CREATE ROLE analyst LOGIN; GRANT USAGE ON SCHEMA gbml TO analyst; GRANT SELECT ON pts TO analyst;
  GRANT INSERT, UPDATE, SELECT ON gbml.models TO analyst; GRANT USAGE ON SEQUENCE gbml.models_id_seq TO analyst;
  CREATE USER MAPPING FOR analyst SERVER shard1 OPTIONS (user 'postgres');
  CREATE USER MAPPING FOR analyst SERVER shard2 OPTIONS (user 'postgres')" >/dev/null
err=$("$PGBIN/psql" -X -q -At -h "$OPS_WORK/coord" -p "${OPS_PORT[coord]}" -U analyst -d postgres \
  -c "SELECT gbml.train('x', 'kmeans', 'pts', '{\"k\": 2, \"exclude_columns\": [\"id\"]}')" 2>&1 >/dev/null | sed 's/^psql:[^:]*:[0-9]*: //')
check_match "a non-superuser whose connection to a shard uses no password is refused (postgres_fdw's rule)" \
  "did not use a password" "$(errline "$err")"
# ... unless a superuser gave the mapping password_required 'false', as postgres_fdw allows
q coord postgres "CREATE ROLE trusted_analyst LOGIN; GRANT USAGE ON SCHEMA gbml TO trusted_analyst; GRANT SELECT ON pts TO trusted_analyst;
  GRANT INSERT, UPDATE, SELECT ON gbml.models TO trusted_analyst; GRANT USAGE ON SEQUENCE gbml.models_id_seq TO trusted_analyst;
  CREATE USER MAPPING FOR trusted_analyst SERVER shard1 OPTIONS (user 'postgres', password_required 'false');
  CREATE USER MAPPING FOR trusted_analyst SERVER shard2 OPTIONS (user 'postgres', password_required 'false')" >/dev/null
out=$("$PGBIN/psql" -X -q -At -h "$OPS_WORK/coord" -p "${OPS_PORT[coord]}" -U trusted_analyst -d postgres \
  -c "SELECT gbml.train('pw', 'kmeans', 'pts', '{\"k\": 2, \"exclude_columns\": [\"id\"]}') > 0" 2>&1)
check "a non-superuser whose mapping has password_required 'false' trains (postgres_fdw's exception)" t "$out"

# --- the foreign tables' own settings ---
# columns renamed by postgres_fdw's column_name option (a and b swapped on both partitions): the shards
# read the remote columns the foreign tables name, as a query through postgres_fdw does
q coord postgres "CREATE TABLE cols_ren (id int, a float8, b real, c numeric, d int) PARTITION BY LIST ((id % 2));
  CREATE FOREIGN TABLE cols_ren_0 PARTITION OF cols_ren FOR VALUES IN (0) SERVER shard1
    OPTIONS (table_name 'cols');
  CREATE FOREIGN TABLE cols_ren_1 PARTITION OF cols_ren FOR VALUES IN (1) SERVER shard2
    OPTIONS (table_name 'cols');
  ALTER FOREIGN TABLE cols_ren_0 ALTER COLUMN a OPTIONS (column_name 'b'), ALTER COLUMN b OPTIONS (column_name 'a');
  ALTER FOREIGN TABLE cols_ren_1 ALTER COLUMN a OPTIONS (column_name 'b'), ALTER COLUMN b OPTIONS (column_name 'a');
  CREATE TABLE cols_ren_local AS SELECT * FROM cols_ren" >/dev/null || notok "the renamed columns' table"
check "K-Means on foreign tables whose columns are renamed (column_name): the bytes of the rows postgres_fdw reads" t \
  "$(same_bytes kren kmeans cols_ren '"k": 3, "exclude_columns": ["id"]')"
check "boosting, its label a renamed column: the same" t \
  "$(same_bytes bren boost cols_ren '"iterations": 10, "depth": 4, "label_column": "a", "exclude_columns": ["id"]')"
# scoring whole rows of a sharded table (a WHERE clause postgres_fdw could ship) where one shard's
# table has two columns of one type in the other order: scored here, under this server's names
q shard1 postgres "CREATE TABLE sw AS SELECT id, a, b::float8 AS b FROM cols" >/dev/null
q shard2 postgres "CREATE TABLE sw AS SELECT id, b::float8 AS b, a FROM cols" >/dev/null
# sharded_kmeans NAME "COLUMNS": the coordinator's NAME over both shards' NAME, its local copy, and
# K-Means model kNAME (k 3) trained on that copy; prints the model's subquery
sharded_kmeans() {
  q coord postgres "CREATE TABLE $1 ($2) PARTITION BY LIST ((id % 2));
    CREATE FOREIGN TABLE $1_0 PARTITION OF $1 FOR VALUES IN (0) SERVER shard1 OPTIONS (table_name '$1');
    CREATE FOREIGN TABLE $1_1 PARTITION OF $1 FOR VALUES IN (1) SERVER shard2 OPTIONS (table_name '$1');
    CREATE TABLE $1_local AS SELECT * FROM $1;
    SELECT gbml.train('k$1', 'kmeans', '$1_local', '{\"k\": 3, \"exclude_columns\": [\"id\"]}')" >/dev/null
  echo "(SELECT model FROM gbml.models WHERE name = 'k$1')"
}
ksw=$(sharded_kmeans sw "id int, a float8, b float8")
out=$(q coord postgres "SELECT (SELECT count(*) FROM sw WHERE gbml.kmeans_assign($ksw, sw) = 0)
                             = (SELECT count(*) FROM sw_local sw WHERE gbml.kmeans_assign($ksw, sw) = 0)" 2>&1)
check "a whole-row score in a WHERE clause on a sharded table (columns in another order on a shard) counts the local rows" t "$out"
out=$(q coord postgres "SELECT (SELECT array_agg(id) FROM (SELECT id FROM sw_1 ORDER BY gbml.kmeans_distance($ksw, sw_1) DESC, id LIMIT 5) x)
                             = (SELECT array_agg(id) FROM (SELECT id FROM sw_local s WHERE id % 2 = 1 ORDER BY gbml.kmeans_distance($ksw, s) DESC, id LIMIT 5) x)" 2>&1)
check "... and ORDER BY a whole-row score with LIMIT on one foreign table ranks its rows as the local copy" t "$out"
# the same with 120 columns (the columns go in gbml._column_pack calls, the tableoid after them),
# shard2's in the reverse order
wcols=$(for i in $(seq 1 120); do printf ', sin(id * %d) AS c%d' "$i" "$i"; done)
rcols=$(for i in $(seq 120 -1 1); do printf ', c%d' "$i"; done)
q shard1 postgres "CREATE TABLE wide AS SELECT id $wcols FROM generate_series(0, 3998, 2) AS id" >/dev/null
q shard2 postgres "CREATE TABLE wide0 AS SELECT id $wcols FROM generate_series(1, 3999, 2) AS id;
  CREATE TABLE wide AS SELECT id $rcols FROM wide0" >/dev/null
kwide=$(sharded_kmeans wide "id int $(for i in $(seq 1 120); do printf ', c%d float8' "$i"; done)")
out=$(q coord postgres "SELECT (SELECT count(*) FROM wide WHERE gbml.kmeans_assign($kwide, wide) = 0)
                             = (SELECT count(*) FROM wide_local wide WHERE gbml.kmeans_assign($kwide, wide) = 0)" 2>&1)
check "... on 120 columns, reversed on a shard (the packed columns form): the local rows' count" t "$out"
# a remote column of another type than the foreign table's: text on the shard, numeric here
q shard1 postgres "CREATE TABLE cols_txt AS SELECT id, a, b, c::text AS c, d FROM cols" >/dev/null
q coord postgres "CREATE TABLE ctxt (id int, a float8, b real, c numeric, d int) PARTITION BY LIST ((id % 2));
  CREATE FOREIGN TABLE ctxt_0 PARTITION OF ctxt FOR VALUES IN (0) SERVER shard1 OPTIONS (table_name 'cols_txt')" >/dev/null
err=$(q_err coord postgres "SELECT gbml.train('x', 'kmeans', 'ctxt', '{\"k\": 2, \"exclude_columns\": [\"id\"]}')")
check_match "a remote column of another kind than the foreign table's (text for numeric) is refused, naming it" \
  'shard "shard1": .*column "c" is categorical here \(type text\) but not on the coordinator' "$(errline "$err")"
# a foreign table declaring a column its remote table lacks, left out with exclude_columns: trains
# on the other columns, as a query through postgres_fdw reads them (the shard had checked the
# caller's exclude_columns against its own table)
q shard1 postgres "CREATE TABLE cols_less AS SELECT id, a, b, d FROM cols" >/dev/null
q coord postgres "CREATE TABLE cless (id int, a float8, b real, c numeric, d int) PARTITION BY LIST ((id % 2));
  CREATE FOREIGN TABLE cless_0 PARTITION OF cless FOR VALUES IN (0) SERVER shard1 OPTIONS (table_name 'cols_less')" >/dev/null
out=$(q coord postgres "SELECT gbml.train('cless_dist', 'kmeans', 'cless', '{\"k\": 3, \"exclude_columns\": [\"id\", \"c\"]}');
  SELECT gbml.train('cless_one', 'kmeans', 'SELECT id, a, b, d FROM cless', '{\"k\": 3, \"exclude_columns\": [\"id\"]}');
  SELECT (SELECT model FROM gbml.models WHERE name = 'cless_dist') = (SELECT model FROM gbml.models WHERE name = 'cless_one')" 2>&1 | tail -1)
check "a foreign table's column the remote table lacks, excluded: the bytes of the other columns read through postgres_fdw" t "$out"
# a shard database without gbml (the server still lists it)
q shard1 postgres "CREATE DATABASE bare" >/dev/null
q shard1 bare "CREATE TABLE pts (id int, features real[])" >/dev/null
q coord postgres "CREATE SERVER bare FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host '$OPS_WORK/shard1', port '${OPS_PORT[shard1]}', dbname 'bare', extensions 'gbml');
  CREATE USER MAPPING FOR postgres SERVER bare OPTIONS (user 'postgres');
  CREATE TABLE pbare (id int, features real[]) PARTITION BY LIST ((id % 2));
  CREATE FOREIGN TABLE pbare_0 PARTITION OF pbare FOR VALUES IN (0) SERVER bare OPTIONS (table_name 'pts')" >/dev/null
err=$(q_err coord postgres "SELECT gbml.train('x', 'kmeans', 'pbare', '{\"k\": 2, \"exclude_columns\": [\"id\"]}')")
check_match "a shard database without the gbml extension is named, with the fix" \
  'shard "bare" has no gbml extension.*HINT: .*CREATE EXTENSION gbml' "$(tr '\n' ' ' <<<"$err")"

# --- cancel when a shard does not answer ---
# a server that accepts connections and never says a word: connecting to it waits on the latch
mkdir -p "$OPS_WORK/silent"
perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $ARGV[0], Listen => 8) or die;
  chmod 0777, $ARGV[0]; while (my $c = $s->accept) { push @held, $c }' "$OPS_WORK/silent/.s.PGSQL.5999" &
OPS_BG_PIDS+=($!)
q coord postgres "CREATE SERVER silent FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host '$OPS_WORK/silent', port '5999', dbname 'postgres', extensions 'gbml');
  CREATE USER MAPPING FOR postgres SERVER silent OPTIONS (user 'postgres');
  CREATE TABLE psilent (id int, features real[]) PARTITION BY LIST ((id % 2));
  CREATE FOREIGN TABLE psilent_0 PARTITION OF psilent FOR VALUES IN (0) SERVER shard1 OPTIONS (table_name 'pts');
  CREATE FOREIGN TABLE psilent_1 PARTITION OF psilent FOR VALUES IN (1) SERVER silent OPTIONS (table_name 'pts')" >/dev/null
for ((i = 0; i < 50; i++)); do [ -S "$OPS_WORK/silent/.s.PGSQL.5999" ] && break; sleep 0.1; done
# wait_at_most PID SECONDS: until the background psql PID ends, or SECONDS pass (then it is killed: a
# build that waits for ever must fail this test, not hang it); the seconds waited in WAITED
wait_at_most() {
  local start=$SECONDS
  while kill -0 "$1" 2>/dev/null && [ $((SECONDS - start)) -lt "$2" ]; do sleep 0.2; done
  kill "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  WAITED=$((SECONDS - start))
}
bg coord postgres "$OPS_WORK/silent.out" train_silent "SET statement_timeout = '2s'; SELECT gbml.train('x', 'kmeans', 'psilent', '{\"k\": 2, \"exclude_columns\": [\"id\"]}')"
wait_at_most "$BG_PID" 30
check_match "statement_timeout ends a training whose shard accepts the connection and never answers" \
  "canceling statement due to statement timeout" "$(tr '\n' ' ' <"$OPS_WORK/silent.out")"
[ $WAITED -le 6 ] && ok "... within a few seconds of the timeout ($WAITED s)" || notok "the timeout took $WAITED s"
# a shard whose postmaster stops answering while its backend is busy (here: waiting for a lock):
# the cancel request to it is not waited for past about two seconds
bg shard1 postgres "$OPS_WORK/lock.out" holder "BEGIN; LOCK pts IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(30); COMMIT"
poll shard1 postgres 10 "SELECT count(*) > 0 FROM pg_locks WHERE mode = 'AccessExclusiveLock' AND relation = 'pts'::regclass" >/dev/null
pm=$(head -1 "$OPS_WORK/shard1/data/postmaster.pid")
bg coord postgres "$OPS_WORK/stopped.out" train_stopped "SET statement_timeout = '3s'; SELECT gbml.train('x', 'kmeans', 'pts', '{\"k\": 2, \"exclude_columns\": [\"id\"]}')"
train_pid=$BG_PID
poll shard1 postgres 10 "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'gbml shard' AND wait_event_type = 'Lock'" >/dev/null ||
  notok "the training never waited for the lock on shard1"
kill -STOP "$pm"
wait_at_most "$train_pid" 30
kill -CONT "$pm"
check_match "statement_timeout ends a training whose shard's postmaster has stopped answering" \
  "canceling statement due to statement timeout" "$(tr '\n' ' ' <"$OPS_WORK/stopped.out")"
[ $WAITED -le 8 ] && ok "... within a few seconds of the timeout ($WAITED s after the shard stopped answering)" ||
  notok "the timeout took $WAITED s after the shard stopped answering"
q shard1 postgres "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'holder'" >/dev/null
settled shard1 && settled shard2 && ok "after it no gbml session is left on either shard" ||
  notok "gbml sessions left: $(sessions shard1), $(sessions shard2)"
# a shard that stops reading (its backend stopped) while the coordinator reads its eval_source (a
# 4 s sleep), then is sent a request larger than a socket's buffer (the union's 100,000 categories
# of 64 characters, about 7 MB, in its open): the send waits on the latch, not inside libpq
for s in 1 2; do
  q shard$s postgres "CREATE TABLE bigcat AS SELECT i AS id, sin(i) AS a, md5(i::text) || md5((i * 7)::text) AS cat,
    (i % 3)::real AS label FROM generate_series($s, 200000, 2) AS i" >/dev/null
done
q coord postgres "CREATE TABLE bigcat (id int, a float8, cat text, label real) PARTITION BY LIST ((id % 2));
  CREATE FOREIGN TABLE bigcat_1 PARTITION OF bigcat FOR VALUES IN (1) SERVER shard1 OPTIONS (table_name 'bigcat');
  CREATE FOREIGN TABLE bigcat_0 PARTITION OF bigcat FOR VALUES IN (0) SERVER shard2 OPTIONS (table_name 'bigcat');
  CREATE TABLE bigcat_eval AS SELECT * FROM bigcat LIMIT 100;
  CREATE FUNCTION slow_true() RETURNS boolean LANGUAGE plpgsql AS 'BEGIN PERFORM pg_sleep(4); RETURN true; END'" >/dev/null
bg coord postgres "$OPS_WORK/unread.out" train_unread "SET statement_timeout = '6s'; SELECT gbml.train('x', 'boost', 'bigcat',
  '{\"iterations\": 3, \"exclude_columns\": [\"id\"], \"eval_source\": \"SELECT * FROM bigcat_eval WHERE (SELECT slow_true())\"}')"
train_pid=$BG_PID
poll coord postgres 20 "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'train_unread' AND wait_event = 'PgSleep'" >/dev/null ||
  notok "the training never read its eval_source"
shard_pid=$(q shard2 postgres "SELECT pid FROM pg_stat_activity WHERE application_name = 'gbml shard'")
kill -STOP $shard_pid
wait_at_most "$train_pid" 30
kill -CONT $shard_pid
check_match "statement_timeout ends a training whose shard stopped reading before a large request" \
  "canceling statement due to statement timeout" "$(tr '\n' ' ' <"$OPS_WORK/unread.out")"
[ $WAITED -le 10 ] && ok "... within a few seconds of the timeout ($WAITED s after the shard stopped reading)" ||
  notok "the timeout took $WAITED s after the shard stopped reading"
settled shard1 && settled shard2 && ok "after it no gbml session is left on either shard" ||
  notok "gbml sessions left: $(sessions shard1), $(sessions shard2)"

finish
