-- Rows past the memory budget go to temporary files (issue 12), at a small
-- scale: 80,000 rows of 100 features (30.5 MB of float features) trained with
-- memory_limit_mb = 7.5 (K-Means: the features are 4x the budget) and
-- 26 (boosting, whose bins alone are a quarter of the features, and its
-- per-row state as much again; 16 puts its bins in a file too) give the
-- same model bytes as with the whole table in memory; the run report and the
-- registry show what went through the files; temp_file_limit, a cancel and
-- an ERROR inside a subtransaction leave no file behind.
SET gbml.progress_interval = 0;
LOAD 'gbml';

CREATE TABLE spill_rows AS
SELECT i, i / 12 AS query,
       ARRAY(SELECT ((hashint4(i * 101 + j) % 1000) / 100.0 + (i % 5) * (j % 3))::real
               FROM generate_series(1, 100) AS j) AS f,
       ((i % 5) + (hashint4(i) % 3 = 0)::int)::real AS relevance,
       (i % 5 >= 2)::int::real AS clicked
  FROM generate_series(1, 80000) AS i;
-- the same rows in another physical order: spilled rows must not depend on the scan order
CREATE TABLE spill_rows_shuffled AS SELECT * FROM spill_rows ORDER BY hashint4(i + 17);

CREATE FUNCTION spill_report() RETURNS TABLE (spilled boolean, rows_in_files bigint, wrote_mb boolean, read_mb boolean)
LANGUAGE sql AS $$
  SELECT (r ->> 'spilled_rows')::bigint > 0, (r ->> 'spilled_rows')::bigint,
         (r ->> 'temp_written_mb')::float8 > 0, (r ->> 'temp_read_mb')::float8 > 0
    FROM gbml.last_training_report() AS r $$;

-- K-Means: in memory, then past a budget a quarter of the features, from another scan order
CREATE TEMP TABLE fits AS
SELECT 'kmeans in memory' AS fit, gbml.kmeans_fit(f, 8, '{"random_seed": 4, "max_iter": 20}') AS model FROM spill_rows;
SELECT * FROM spill_report();
INSERT INTO fits
SELECT 'kmeans spilled', gbml.kmeans_fit(f, 8, '{"random_seed": 4, "max_iter": 20, "memory_limit_mb": 7.5}')
  FROM spill_rows_shuffled;
SELECT * FROM spill_report();
SELECT (r ->> 'peak_memory_mb')::float8 <= 7.5 AS within_budget FROM gbml.last_training_report() AS r;

-- boosting with a ranking loss (YetiRank by query), an eval share
INSERT INTO fits
SELECT 'boost in memory', gbml.boost_fit(f, relevance, query, '{"iterations": 15, "depth": 4, "eval_fraction": 0.2}')
  FROM spill_rows;
INSERT INTO fits
SELECT 'boost spilled', gbml.boost_fit(f, relevance, query, '{"iterations": 15, "depth": 4, "eval_fraction": 0.2, "memory_limit_mb": 26}')
  FROM spill_rows_shuffled;
SELECT * FROM spill_report();
SELECT (r ->> 'peak_memory_mb')::float8 <= 26 AS within_budget FROM gbml.last_training_report() AS r;

-- past a budget that cannot hold its bins (7.6 MB) beside its per-row state
-- (16 MB), boosting puts the bins in a temporary file too and walks them
-- from there every level: written are the rows' 30.5 MB and the bins'
INSERT INTO fits
SELECT 'boostbins in memory', gbml.boost_fit(f, relevance, query, '{"iterations": 15, "depth": 4}')
  FROM spill_rows;
INSERT INTO fits
SELECT 'boostbins spilled', gbml.boost_fit(f, relevance, query, '{"iterations": 15, "depth": 4, "memory_limit_mb": 16}')
  FROM spill_rows_shuffled;
SELECT (r ->> 'temp_written_mb')::float8 > 35 AS bins_in_files, (r ->> 'peak_memory_mb')::float8 <= 16 AS within_budget
  FROM gbml.last_training_report() AS r;

-- SAGA (logistic, elastic net, an eval share) holds two groups of an
-- epoch's rows (8 MB each) besides its per-row state, so its table is wider:
-- 31,500 rows of 800 features (96 MB) against memory_limit_mb = 24
CREATE TABLE saga_rows AS
SELECT i, ARRAY(SELECT ((hashint4(i * 809 + j) % 1000) / 250.0 + (i % 7) * (j % 5 = 0)::int)::real
                  FROM generate_series(1, 800) AS j) AS f,
       (i % 7 >= 3)::int::real AS clicked
  FROM generate_series(1, 31500) AS i;
CREATE TABLE saga_rows_shuffled AS SELECT * FROM saga_rows ORDER BY hashint4(i + 17);
INSERT INTO fits
SELECT 'saga in memory', gbml.saga_fit(f, clicked, '{"loss": "logistic", "alpha": 0.01, "l1_ratio": 0.5, "eval_fraction": 0.2, "max_iter": 8}')
  FROM saga_rows;
INSERT INTO fits
SELECT 'saga spilled', gbml.saga_fit(f, clicked, '{"loss": "logistic", "alpha": 0.01, "l1_ratio": 0.5, "eval_fraction": 0.2, "max_iter": 8, "memory_limit_mb": 24}')
  FROM saga_rows_shuffled;
SELECT * FROM spill_report();
SELECT (r ->> 'peak_memory_mb')::float8 <= 24 AS within_budget FROM gbml.last_training_report() AS r;

-- with room for 64 hash groups of 32 KB runs (an eighth of the free budget)
-- the rows are grouped by hash as they spill: written twice in all (as they
-- stream in, then once in canonical order, not three times), memory's bytes
INSERT INTO fits
SELECT 'sagagrouped in memory', gbml.saga_fit(f, clicked, '{"loss": "logistic", "alpha": 0.01, "max_iter": 4}')
  FROM saga_rows;
INSERT INTO fits
SELECT 'sagagrouped spilled', gbml.saga_fit(f, clicked, '{"loss": "logistic", "alpha": 0.01, "max_iter": 4, "memory_limit_mb": 48}')
  FROM saga_rows_shuffled;
SELECT (r ->> 'spilled_rows')::bigint AS rows_in_files,
       (r ->> 'temp_written_mb')::float8 < 2.2 * 31500 * 800 * 4 / 1048576.0 AS written_twice,
       (r ->> 'peak_memory_mb')::float8 <= 48 AS within_budget,
       -- what the reorder gave back as it read rows for the last time (0 where the file system cannot)
       (r ->> 'temp_discarded_mb')::float8 BETWEEN 0 AND 31500 * 800 * 4 / 1048576.0 AS discarded_reported,
       -- the canonical order is by hash: the rows rewritten over their own places, no second file
       (r ->> 'temp_reorders_in_place')::int AS reordered_in_place
  FROM gbml.last_training_report() AS r;

SELECT a.fit, b.fit, a.model = b.model AS same_bytes
  FROM fits a JOIN fits b ON split_part(a.fit, ' ', 1) = split_part(b.fit, ' ', 1) AND a.fit < b.fit
 ORDER BY 1;

-- the registry form: the model's bytes, and models.timings says what spilled
SELECT gbml.train('spill_km', 'kmeans', 'SELECT f AS features FROM spill_rows_shuffled',
                  '{"k": 8, "random_seed": 4, "max_iter": 20, "memory_limit_mb": 7.5}') > 0 AS trained;
SELECT m.model = f.model AS same_bytes, (m.timings ->> 'spilled_rows')::bigint AS spilled_rows,
       (m.timings ->> 'temp_written_mb')::float8 > 0 AS wrote, (m.timings ->> 'peak_memory_mb')::float8 <= 7.5 AS within_budget
  FROM gbml.models m, fits f
 WHERE m.name = 'spill_km' AND f.fit = 'kmeans in memory';

-- pg_stat_database.temp_bytes counts every byte that went through the files,
-- the chunks written in the background included (K-Means' chunks go so)
SELECT pg_stat_force_next_flush();
SELECT temp_bytes AS temp_bytes_before FROM pg_stat_database WHERE datname = current_database() \gset
SELECT length(gbml.kmeans_fit(f, 8, '{"max_iter": 2, "memory_limit_mb": 7.5}')) > 0 AS fit FROM spill_rows;
SELECT (r ->> 'temp_written_mb')::float8 AS written_mb FROM gbml.last_training_report() AS r \gset
SELECT :written_mb > 25 AS wrote_the_rows;
SELECT pg_stat_force_next_flush();
SELECT temp_bytes - :temp_bytes_before >= :written_mb * 1048576 * 0.999 AS temp_bytes_count_them
  FROM pg_stat_database WHERE datname = current_database();

-- temp_file_limit: an ERROR that names it, with a hint
SET temp_file_limit = '1MB';
SELECT gbml.kmeans_fit(f, 8, '{"memory_limit_mb": 7.5}') FROM spill_rows;
RESET temp_file_limit;

-- too small even for the per-row state: the budget ERROR, with the figures
SELECT gbml.kmeans_fit(f, 8, '{"memory_limit_mb": 1}') FROM spill_rows;

-- the same from gbml.train, after its rows went to files: the files are
-- closed as the ERROR unwinds the training (it crashed the server once: the
-- file store closed them through gbml.train's stack, gone by then)
SELECT gbml.train('spill_budget', 'boost', 'spill_rows',
                  '{"label_column": "relevance", "group_column": "query", "iterations": 2, "memory_limit_mb": 4}');
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();
-- past the ordering, what stays in memory whatever spills is named with its
-- size, and the hint gives a limit that holds it (boosting: 15 MB trains;
-- its histograms are per thread, so the threads are fixed)
SELECT gbml.train('spill_budget', 'boost', 'spill_rows',
                  '{"label_column": "relevance", "group_column": "query", "iterations": 2, "threads": 2, "memory_limit_mb": 8}');
SELECT gbml.train('spill_budget', 'saga', 'spill_rows', '{"label_column": "clicked", "max_iter": 2, "memory_limit_mb": 8}');
SELECT gbml.train('spill_budget', 'kmeans', 'spill_rows', '{"k": 6, "exclude_columns": ["i", "query", "relevance", "clicked"], "memory_limit_mb": 5}');
SELECT gbml.train('spill_budget', 'boost', 'spill_rows',
                  '{"label_column": "relevance", "group_column": "query", "iterations": 2, "threads": 2, "memory_limit_mb": 15}') > 0 AS trains_at_the_hint;
-- an ERROR caught in a subtransaction, then a training in the same transaction
BEGIN;
DO $$
BEGIN
  -- the last row fails after the others went to files
  PERFORM gbml.boost_fit(f, CASE WHEN i < 80000 THEN relevance END, '{"iterations": 2, "memory_limit_mb": 26}')
     FROM (SELECT * FROM spill_rows ORDER BY i) s;
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'caught: %', SQLERRM;
END $$;
SET LOCAL temp_file_limit = '1MB';
DO $$
BEGIN
  PERFORM gbml.kmeans_fit(f, 8, '{"memory_limit_mb": 7.5}') FROM spill_rows;
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'caught: %', SQLERRM;
END $$;
RESET temp_file_limit;
SELECT gbml.kmeans_fit(f, 8, '{"random_seed": 4, "max_iter": 20, "memory_limit_mb": 7.5}')
     = (SELECT model FROM fits WHERE fit = 'kmeans in memory') AS same_bytes_after_caught_errors
  FROM spill_rows;
COMMIT;

-- a training aggregate's whole rows with categorical columns go to files
-- past the budget too (they stayed in memory): their first-seen category ids
-- are renumbered as the rows are read back, so the model is the in-memory
-- one, gbml.train's, and the same in another scan order (other first-seen ids)
CREATE TABLE spill_cats AS
SELECT i, 'city ' || (hashint4(i) & 63) AS city,
       ARRAY(SELECT ((hashint4(i * 31 + j) % 1000) / 100.0)::real FROM generate_series(1, 40) AS j) AS f,
       (hashint4(i * 3) & 1)::real AS y
  FROM generate_series(1, 30000) AS i;
CREATE TABLE cat_fits AS
SELECT gbml.boost_fit(s, '{"label_column": "y", "exclude_columns": ["i"], "iterations": 2, "memory_limit_mb": 6}') AS m
  FROM spill_cats s;
SELECT (r ->> 'spilled_rows')::bigint AS spilled_rows FROM gbml.last_training_report() AS r;
SELECT gbml.boost_fit(s, '{"label_column": "y", "exclude_columns": ["i"], "iterations": 2, "memory_limit_mb": 6}')
       = (SELECT m FROM cat_fits) AS same_bytes_other_order
  FROM (SELECT * FROM spill_cats ORDER BY i DESC) s;
SELECT gbml.boost_fit(s, '{"label_column": "y", "exclude_columns": ["i"], "iterations": 2}')
       = (SELECT m FROM cat_fits) AS same_bytes_in_memory
  FROM spill_cats s;
SELECT (r ->> 'spilled_rows')::bigint AS spilled_rows FROM gbml.last_training_report() AS r;
SELECT gbml.train('spill_cats', 'boost', 'spill_cats',
                  '{"label_column": "y", "exclude_columns": ["i"], "iterations": 2, "memory_limit_mb": 6}') > 0 AS train_spills_them;
SELECT model = (SELECT m FROM cat_fits) AS same_bytes_as_train
  FROM gbml.models WHERE name = 'spill_cats' ORDER BY version DESC LIMIT 1;
-- a budget too small for the border sample says so (it was the plain message)
SELECT gbml.boost_fit(s, '{"label_column": "y", "exclude_columns": ["i"], "iterations": 2, "threads": 2, "memory_limit_mb": 3}')
  FROM spill_cats s;
-- K-Means on their one-hot encoding: too small a budget names its per-row
-- state (its walk's buffers failed first, with the plain message)
SELECT gbml.kmeans_fit(s, 6, '{"exclude_columns": ["i", "y"], "one_hot": true, "threads": 2, "memory_limit_mb": 2}')
  FROM spill_cats s;
-- K-Means on their one-hot encoding, from files and in memory
UPDATE cat_fits SET m = (SELECT gbml.kmeans_fit(s, 5, '{"exclude_columns": ["i", "y"], "one_hot": true}') FROM spill_cats s);
SELECT gbml.kmeans_fit(s, 5, '{"exclude_columns": ["i", "y"], "one_hot": true, "memory_limit_mb": 4}')
       = (SELECT m FROM cat_fits) AS kmeans_same_bytes
  FROM (SELECT * FROM spill_cats ORDER BY i DESC) s;
SELECT (r ->> 'spilled_rows')::bigint AS spilled_rows FROM gbml.last_training_report() AS r;
DROP TABLE cat_fits;

-- one-hot encoded rows past the budget go to files though the source's fit
-- in memory: the report counts them (it said 0 rows, 0 MB), and the model is
-- the in-memory one
CREATE TABLE spill_shops AS
SELECT i, 'shop ' || (hashint4(i) & 255) AS shop, (hashint4(i * 3) % 100) / 10.0 AS x1, (i % 13)::float8 AS x2,
       (hashint4(i * 7) & 1) AS y
  FROM generate_series(1, 30000) AS i;
SELECT gbml.train('spill_shops', 'saga', 'spill_shops', '{"label_column": "y", "exclude_columns": ["i"], "max_iter": 3}') > 0 AS trained;
SELECT gbml.train('spill_shops', 'saga', 'spill_shops',
                  '{"label_column": "y", "exclude_columns": ["i"], "max_iter": 3, "memory_limit_mb": 20}') > 0 AS trained;
SELECT (r ->> 'spilled_rows')::bigint AS spilled_rows, (r ->> 'temp_written_mb')::float8 > 10 AS wrote_the_encoding
  FROM gbml.last_training_report() AS r;
SELECT count(DISTINCT model) AS models FROM gbml.models WHERE name = 'spill_shops';

-- every budget either trains or names the step that does not fit, never the
-- plain "memory limit exceeded: X MB needed" of an allocation no check counted
-- (whole rows of 100 floats and two text columns, 256 and 8 categories:
-- SAGA's one-hot passed its check 5 kB short of 32 MB, then failed plainly;
-- budgets_named is 00_setup's)
CREATE TABLE wide_cats AS
SELECT i, 'city ' || (hashint4(i) & 255) AS city, 'device ' || (hashint4(i * 7) & 7) AS device,
       ARRAY(SELECT ((hashint4(i * 31 + j) % 1000) / 100.0)::real FROM generate_series(1, 100) AS j) AS f,
       (hashint4(i * 3) & 1)::real AS y
  FROM generate_series(1, 30000) AS i;
SELECT shape, budgets_named(fit) AS outcome FROM (VALUES
  ('boost, eval share', $q$SELECT gbml.boost_fit(s, '{"label_column": "y", "exclude_columns": ["i"], "iterations": 2, "eval_fraction": 0.2, "threads": 2, "memory_limit_mb": %s}') FROM wide_cats s$q$),
  ('kmeans one-hot', $q$SELECT gbml.kmeans_fit(s, 6, '{"exclude_columns": ["i", "y"], "one_hot": true, "threads": 2, "memory_limit_mb": %s}') FROM wide_cats s$q$),
  ('saga one-hot', $q$SELECT gbml.saga_fit(s, '{"label_column": "y", "exclude_columns": ["i"], "max_iter": 2, "threads": 2, "memory_limit_mb": %s}') FROM wide_cats s$q$),
  ('saga arrays, eval share', $q$SELECT gbml.saga_fit(f, y, '{"max_iter": 2, "eval_fraction": 0.2, "threads": 2, "memory_limit_mb": %s}') FROM wide_cats$q$)
) AS shapes (shape, fit);

-- narrow rows (whose label, group, weight and sort keys outweigh their
-- features: 1 and 2 MB gave K-Means' one-hot rows the plain message ordering
-- them in memory; the rows now go to files on what each row costs in memory),
-- SAGA's whole rows without a text column (past the budget they are grouped
-- by hash, and the aggregate's renumbering of categories, with none to
-- renumber, refused them: an internal ERROR), a border sample fetched from
-- files (3 MB gave it: the fetch's places
-- were not counted), and one drawn from 40,000 rows (3 MB gave it: the
-- sample's addresses were taken before its check)
CREATE TABLE narrow_cats AS
SELECT i, ((hashint4(i * 3 + 1) % 1000) / 100.0)::real AS x1, ((hashint4(i * 4 + 1) % 1000) / 100.0)::float8 AS x2,
       'kind ' || (abs(hashint4(i * 11 + 5)) % 12) AS kind
  FROM generate_series(1, 40000) AS i;
CREATE TABLE mixed_cats AS
SELECT i, ARRAY(SELECT ((hashint4(i * 31 + j) % 1000) / 100.0)::real FROM generate_series(1, 12) AS j) AS f,
       'a' || (abs(hashint4(i * 11 + 5)) % 60) AS a, 'b' || (abs(hashint4(i * 12 + 5)) % 300) AS b,
       'c' || (abs(hashint4(i * 13 + 5)) % 3) AS c,
       (i % 4000)::bigint AS g, (1 + i % 3)::real AS w, (abs(hashint4(i * 13)) % 3)::real AS y
  FROM generate_series(1, 20000) AS i;
SELECT shape, budgets_named(fit) AS outcome FROM (VALUES
  ('kmeans one-hot, narrow rows', $q$SELECT gbml.kmeans_fit(s, 5, '{"exclude_columns": ["i"], "one_hot": true, "max_iter": 2, "threads": 2, "memory_limit_mb": %s}') FROM narrow_cats s$q$),
  ('saga whole rows, no text column', $q$SELECT gbml.saga_fit(s, '{"label_column": "x1", "exclude_columns": ["i", "kind"], "loss": "squared", "max_iter": 2, "threads": 2, "memory_limit_mb": %s}') FROM narrow_cats s$q$),
  ('boost LambdaMART, eval share', $q$SELECT gbml.boost_fit(s, '{"label_column": "y", "group_column": "g", "weight_column": "w", "loss": "LambdaMART", "exclude_columns": ["i"], "iterations": 2, "eval_fraction": 0.2, "border_count": 8, "subsample": 0.5, "threads": 2, "memory_limit_mb": %s}') FROM mixed_cats s$q$),
  ('boost QueryRMSE, 40,000 rows', $q$SELECT gbml.boost_fit(s, '{"label_column": "y", "group_column": "g", "weight_column": "w", "loss": "QueryRMSE", "exclude_columns": ["i"], "iterations": 2, "subsample": 0.5, "threads": 2, "memory_limit_mb": %s}') FROM (SELECT * FROM mixed_cats UNION ALL SELECT i + 20000, f, a, b, c, g + 4000, w, y FROM mixed_cats) s$q$)
) AS shapes (shape, fit);

-- gbml.train with an eval_source, read after the training rows: its rows go
-- to files from half of what the training rows leave free, and a budget with
-- no room for a chunk of them names the step (1 MB gave the plain message);
-- with 3 categories, 2 MB left room for a chunk's per-row state but not for
-- the buffer its features are written from (the plain message, found by
-- tests/ops/differential.sh: now the per-row state is named)
SELECT shape, budgets_named(fit) AS outcome FROM (VALUES
  ('kmeans one-hot', $q$SELECT gbml.train('nc_ev', 'kmeans', 'SELECT * FROM narrow_cats WHERE i %% 5 <> 0', '{"k": 3, "max_iter": 2, "one_hot": true, "exclude_columns": ["i"], "eval_source": "SELECT * FROM narrow_cats WHERE i %% 5 = 0", "memory_limit_mb": %s}')$q$),
  ('saga one-hot', $q$SELECT gbml.train('nc_ev', 'saga', 'SELECT * FROM narrow_cats WHERE i %% 5 <> 0', '{"label_column": "x1", "loss": "squared", "max_iter": 2, "exclude_columns": ["i"], "eval_source": "SELECT * FROM narrow_cats WHERE i %% 5 = 0", "memory_limit_mb": %s}')$q$),
  ('saga one-hot, 3 categories', $q$SELECT gbml.train('nc_ev', 'saga', 'SELECT * FROM narrow_cats WHERE i %% 5 <> 0', '{"label_column": "x1", "loss": "squared", "max_iter": 2, "max_categories": 3, "exclude_columns": ["i"], "eval_source": "SELECT * FROM narrow_cats WHERE i %% 5 = 0", "memory_limit_mb": %s}')$q$),
  ('boost', $q$SELECT gbml.train('nc_ev', 'boost', 'SELECT * FROM narrow_cats WHERE i %% 5 <> 0', '{"label_column": "x1", "iterations": 2, "exclude_columns": ["i"], "eval_source": "SELECT * FROM narrow_cats WHERE i %% 5 = 0", "memory_limit_mb": %s}')$q$)
) AS shapes (shape, fit);
-- ... and its one-hot encoding, made beside the training rows' (3 MB gave
-- the plain message growing its first chunk)
CREATE TABLE onehot_ev AS
SELECT i, ((hashint4(i * 3 + 7) % 1000) / 100.0)::float8 AS x0, ((hashint4(i * 4 + 7) % 1000) / 100.0)::float8 AS x1,
       ((hashint4(i * 5 + 7) % 1000) / 100.0)::float8 AS x2, ((hashint4(i * 6 + 7) % 1000) / 100.0)::float8 AS x3,
       ((hashint4(i * 7 + 7) % 1000) / 100.0)::float8 AS x4, abs(hashint4(i * 11 + 5)) % 5 AS c0,
       'v' || (abs(hashint4(i * 12 + 5)) % 12) AS c1,
       CASE WHEN hashint4(i + 182) % 100 < 10 THEN NULL ELSE 'v' || (abs(hashint4(i * 13 + 5)) % 5) END AS c2
  FROM generate_series(1, 40000) AS i;
SELECT budgets_named($q$SELECT gbml.train('oh_ev', 'kmeans', 'SELECT * FROM onehot_ev WHERE i %% 5 <> 0', '{"k": 4, "max_iter": 2, "one_hot": true, "exclude_columns": ["i"], "categorical_columns": ["c0"], "eval_source": "SELECT * FROM onehot_ev WHERE i %% 5 = 0", "threads": 2, "memory_limit_mb": %s}')$q$)
       AS kmeans_one_hot_eval_source;
-- ... whose first chunk fills in memory, growing: with 9 numeric columns and
-- a weight, the check counted its features only, then its growth failed
-- (3 MB gave the plain message; found by tests/ops/differential.sh)
CREATE TABLE nine_ev AS
SELECT i, x[1] AS x1, x[2] AS x2, x[3] AS x3, x[4] AS x4, x[5] AS x5, x[6] AS x6, x[7] AS x7, x[8] AS x8, x[9] AS x9,
       'k' || (abs(hashint4(i * 11 + 5)) % 4) AS kind, (1 + i % 3)::real AS w
  FROM (SELECT i, ARRAY(SELECT ((hashint4(i * 31 + j) % 1000) / 100.0)::float8 FROM generate_series(1, 9) AS j) AS x
          FROM generate_series(1, 40000) AS i) s;
SELECT budgets_named($q$SELECT gbml.train('nine_ev', 'kmeans', 'SELECT * FROM nine_ev WHERE i %% 5 <> 0', '{"k": 1, "max_iter": 1, "init": "random", "one_hot": true, "exclude_columns": ["i"], "weight_column": "w", "eval_source": "SELECT * FROM nine_ev WHERE i %% 5 = 0", "memory_limit_mb": %s}')$q$)
       AS kmeans_one_hot_eval_source_weighted;

-- temp_tablespaces: the files go there (they went to the database's own
-- tablespace); the eval source, read after the training rows went to files,
-- looks at the tablespace's temporary directory
SET allow_in_place_tablespaces = on;
CREATE TABLESPACE gbml_spill_ts LOCATION '';
RESET allow_in_place_tablespaces;
CREATE TABLE temp_seen (files bigint);
CREATE FUNCTION see_temp_files() RETURNS boolean LANGUAGE sql AS $$
  INSERT INTO temp_seen
  SELECT count(*) FROM pg_ls_tmpdir((SELECT oid FROM pg_tablespace WHERE spcname = 'gbml_spill_ts'));
  SELECT true $$;
SET temp_tablespaces = gbml_spill_ts;
SELECT gbml.train('spill_ts', 'kmeans', 'spill_rows',
                  '{"k": 4, "max_iter": 2, "memory_limit_mb": 7.5,
                    "eval_source": "SELECT * FROM spill_rows WHERE i <= 3 AND see_temp_files()"}') > 0 AS trained;
SELECT min(files) > 0 AS files_in_temp_tablespace FROM temp_seen;
RESET temp_tablespaces;
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir((SELECT oid FROM pg_tablespace WHERE spcname = 'gbml_spill_ts'));
DROP TABLESPACE gbml_spill_ts;

-- a cancelled training (statement_timeout) while it reads its files back
SET statement_timeout = '1s';
SELECT gbml.kmeans_fit(f, 16, '{"memory_limit_mb": 7.5, "max_iter": 100000, "tol": 0, "min_frac_changed": 0}') FROM spill_rows;
RESET statement_timeout;

-- nothing left in the temporary directory
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();
