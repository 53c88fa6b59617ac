-- Training on ordinary columns (issue 13): every column but the label, group
-- and weight ones is a feature (or exactly feature_columns); numbers, booleans,
-- text/enum categories and arrays of numbers; NULL numbers are missing for
-- boosting and an ERROR naming the column for K-Means and SAGA; a model
-- trained from columns scores a whole row, its columns matched by name.
SET gbml.progress_interval = 0;
CREATE TYPE col_plan AS ENUM ('basic', 'plus', 'pro');
CREATE TABLE col_rows (
  id int, small int2, big int8, ratio float4, price float8, amount numeric, flag bool,
  emb real[], emb8 float8[], city text, code varchar(8), plan col_plan, label real, weight real);
INSERT INTO col_rows
SELECT i, (i % 7)::int2, (i % 11)::int8 * 1000000000, (i % 13) / 4.0, (i % 17) * 1.5, (i % 19)::numeric / 3, i % 3 = 0,
       ARRAY[(i % 5)::real, (i % 9)::real], ARRAY[(i % 4)::float8],
       (ARRAY['paris', 'oslo', 'rome', 'lima'])[1 + i % 4], 'c' || (i % 6), (ARRAY['basic', 'plus', 'pro']::col_plan[])[1 + i % 3],
       ((i % 17) * 1.5 + (i % 7) + (i % 3 = 0)::int * 4 + (i % 5))::real, 1 + (i % 2)
  FROM generate_series(1, 3000) AS i;
-- some missing numbers
UPDATE col_rows SET price = NULL WHERE id % 97 = 0;
CREATE TABLE col_rows_shuffled AS SELECT * FROM col_rows ORDER BY hashint4(id);

-- numeric columns only (categorical ones excluded): boosting with missing values
SELECT gbml.train('cols_num', 'boost', 'SELECT * FROM col_rows',
                  '{"exclude_columns": ["id", "city", "code", "plan"], "iterations": 30, "depth": 4}') > 0 AS trained;
SELECT gbml.model_info(model) -> 'feature_names' AS names, gbml.model_info(model) -> 'features' AS n
  FROM gbml.models WHERE name = 'cols_num';
SELECT f ->> 'name' AS name, f ->> 'type' AS type, f ->> 'kind' AS kind
  FROM gbml.models, jsonb_array_elements(gbml.model_json(model) -> 'feature_schema') AS f WHERE name = 'cols_num';
SELECT name, importance > 0 AS used FROM gbml.feature_importance((SELECT model FROM gbml.models WHERE name = 'cols_num')) ORDER BY feature;
SELECT count(*) AS features, count(*) FILTER (WHERE (n.feature, n.importance, n.name) = (b.feature, b.importance, b.name)) AS same_by_name
  FROM gbml.feature_importance('cols_num') n
  JOIN gbml.feature_importance((SELECT model FROM gbml.models WHERE name = 'cols_num' AND deployed)) b USING (feature);

-- scoring a whole row = scoring the equivalent array, for every row (NULLs included)
SELECT count(*) AS rows,
       count(*) FILTER (WHERE gbml.predict('cols_num', c) =
                              gbml.predict('cols_num', ARRAY[small, big, ratio, coalesce(price, 'NaN'), amount, flag::int, emb[1], emb[2], emb8[1]]::real[])) AS same
  FROM col_rows c;
-- a record that is not a table's row (a subquery's) goes through the composite path: the same scores
SELECT count(*) FILTER (WHERE gbml.predict('cols_num', s) = gbml.predict('cols_num', c)) AS same_by_record_path
  FROM col_rows c JOIN (SELECT * FROM col_rows WHERE id > 0 OFFSET 0) s USING (id);
EXPLAIN (VERBOSE, COSTS OFF) SELECT gbml.predict('cols_num', c) FROM col_rows c;
-- an outer join's missing row is a NULL record, which scores NULL (not as a row of NULL columns):
-- the nullable side keeps the record path, the other side is rewritten
SELECT count(*) AS rows, count(gbml.predict('cols_num', c)) AS scored, count(gbml.predict('cols_num', o)) AS scored_outer
  FROM col_rows o LEFT JOIN col_rows c ON c.id = o.id AND c.id % 2 = 0;
SELECT gbml.predict('cols_num', c) IS NULL AS missing_row_is_null FROM (SELECT 1) x LEFT JOIN col_rows c ON false;
SELECT gbml.predict('cols_num', c) IS NULL AS missing_row_is_null FROM col_rows c RIGHT JOIN (SELECT 1) x ON false;
CREATE FUNCTION pg_temp.plan_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; plan text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP plan := plan || line || E'\n'; END LOOP;
  RETURN plan;
END $$;
SELECT plan LIKE '%gbml.predict(''cols_num''::text, c.*)%' AS nullable_side_by_record,
       plan LIKE '%gbml._predict_columns(''cols_num''::text, ''col_rows''::regtype, o.id, %' AS other_side_by_columns
  FROM pg_temp.plan_of('SELECT gbml.predict(''cols_num'', c), gbml.predict(''cols_num'', o)
                          FROM col_rows o LEFT JOIN col_rows c ON c.id = o.id') AS plan;
-- rank inside ORDER BY
SELECT id FROM col_rows c ORDER BY gbml.predict('cols_num', c) DESC, id LIMIT 3;
-- the bytea form, and a row of another table with the columns in another order and extra ones
CREATE TABLE col_other AS SELECT 'x' AS note, label, emb8, emb, flag, amount, price, ratio, big, small, id FROM col_rows;
SELECT count(*) FILTER (WHERE gbml.predict(m.model, o) = gbml.predict(m.model, c)) AS same_by_name
  FROM col_other o JOIN col_rows c USING (id), gbml.models m WHERE m.name = 'cols_num';

-- the same rows in another order, and the aggregate's whole-row form, give the same bytes
SELECT gbml.train('cols_num_shuffled', 'boost', 'col_rows_shuffled',
                  '{"exclude_columns": ["id", "city", "code", "plan"], "iterations": 30, "depth": 4}') > 0 AS trained;
SELECT a.model = b.model AS same_bytes_any_order FROM gbml.models a, gbml.models b
 WHERE a.name = 'cols_num' AND b.name = 'cols_num_shuffled';
SELECT gbml.boost_fit(c, '{"exclude_columns": ["id", "city", "code", "plan"], "iterations": 30, "depth": 4}')
       = (SELECT model FROM gbml.models WHERE name = 'cols_num') AS aggregate_same_bytes
  FROM col_rows_shuffled c;

-- a dropped, renamed or retyped column at scoring time: an ERROR naming it
CREATE TABLE col_dropped AS SELECT * FROM col_rows LIMIT 2;
ALTER TABLE col_dropped DROP COLUMN ratio;
SELECT gbml.predict('cols_num', c) FROM col_dropped c;
ALTER TABLE col_dropped ADD COLUMN ratio text DEFAULT 'high';
SELECT gbml.predict('cols_num', c) FROM col_dropped c;
CREATE TABLE col_renamed AS SELECT * FROM col_rows LIMIT 2;
ALTER TABLE col_renamed RENAME COLUMN price TO cost;
SELECT gbml.predict('cols_num', c) FROM col_renamed c;
-- a model trained on an array cannot score a row
WITH m AS (SELECT gbml.boost_fit(ARRAY[small]::real[], label, '{"iterations": 2}') AS model FROM col_rows)
SELECT gbml.predict(m.model, c) FROM m, col_rows c LIMIT 1;
-- the columns form called by hand: NULL model is NULL; wrong count or types are ERRORs, not misread datums
SELECT gbml._predict_columns(NULL::text, 'col_rows'::regtype, 1) IS NULL AS null_model;
SELECT gbml._predict_columns('cols_num', 'col_rows'::regtype, 1);
SELECT gbml._predict_columns('cols_num', 'col_rows'::regtype, id, small, big, ratio, price, amount, flag, emb, emb8,
                             city, code, plan, label::text, weight) FROM col_rows LIMIT 1;
-- untyped array literals still go to the array form
SELECT round(gbml.predict('cols_num', '{1,2,3,4,5,1,1,2,3}')::numeric, 6) = round(gbml.predict('cols_num', ARRAY[1,2,3,4,5,1,1,2,3]::real[])::numeric, 6) AS literal_ok;

-- a row of more than 98 columns: the columns go in gbml._column_pack calls of up to 100 each
-- (two here), only the model's are unpacked; the same scores as the composite path, with
-- NULLs, text, numeric and array columns, and a dropped column among them
SELECT format('CREATE TABLE col_wide (id int, junk int, %s, city text, amount numeric, emb real[], label real)',
              string_agg(format('w%s real', j), ', ')) FROM generate_series(1, 120) j \gexec
SELECT format('INSERT INTO col_wide SELECT i, i, %s, (ARRAY[''north'', ''south'', NULL])[1 + i %% 3], (i %% 17)::numeric / 4, '
              'ARRAY[(i %% 5)::real, (i %% 7)::real], ((i %% 7) + (i %% 3) + (i %% 11) / 11.0)::real FROM generate_series(1, 1500) i',
              string_agg(format('((i * %s) %% 101)::real / 10', j), ', ')) FROM generate_series(1, 120) j \gexec
UPDATE col_wide SET w5 = NULL WHERE id % 50 = 0;
UPDATE col_wide SET emb = NULL WHERE id % 70 = 0;
ALTER TABLE col_wide DROP COLUMN junk;
-- wide values: a category stored compressed (used), and a document of over 2,000 bytes after
-- compression, which the toaster moves out of line (not used: packed as its TOAST pointer)
ALTER TABLE col_wide ADD COLUMN tag text, ADD COLUMN doc text;
UPDATE col_wide SET tag = repeat(CASE WHEN id % 4 = 0 THEN 'east' ELSE 'west' END, 1000),
                    doc = (SELECT string_agg(md5((id * 100 + k)::text), '') FROM generate_series(1, 200) k);
SELECT count(*) FILTER (WHERE pg_column_compression(tag) IS NOT NULL) > 0 AS tag_compressed,
       min(pg_column_size(doc)) > 2000 AS doc_out_of_line FROM col_wide;
SELECT gbml.train('cols_wide', 'boost', 'SELECT * FROM col_wide', '{"label_column": "label", "exclude_columns": ["id", "doc"], "iterations": 15}') > 0 AS trained;
SELECT gbml.train('cols_wide_km', 'kmeans', 'SELECT * FROM col_wide',
                  '{"feature_columns": ["w120", "w3", "amount"], "k": 3, "random_seed": 1}') > 0 AS trained;
SELECT (SELECT count(*) FROM regexp_matches(pg_temp.plan_of('SELECT gbml.predict(''cols_wide'', w) FROM col_wide w'),
                                            'gbml\._column_pack\(', 'g')) AS packs,
       pg_temp.plan_of('SELECT gbml.predict(''cols_wide'', w) FROM col_wide w') LIKE '%gbml._predict_columns(%' AS rewritten;
SELECT count(*) FILTER (WHERE gbml.predict('cols_wide', w) = gbml.predict('cols_wide', s)) AS same_predict,
       count(*) FILTER (WHERE gbml.kmeans_assign('cols_wide_km', w) = gbml.kmeans_assign('cols_wide_km', s)) AS same_assign,
       count(*) FILTER (WHERE gbml.kmeans_distance('cols_wide_km', w) = gbml.kmeans_distance('cols_wide_km', s)) AS same_distance,
       count(*) AS total
  FROM col_wide w JOIN (SELECT * FROM col_wide WHERE id > 0 OFFSET 0) s USING (id);
-- the same in a parallel worker: a pack's columns are read where that process's executor left them
SET force_parallel_mode = on;
SELECT pg_temp.plan_of('SELECT gbml.predict(''cols_wide'', w) FROM col_wide w') LIKE 'Gather%' AS in_a_worker;
SELECT count(*) FILTER (WHERE gbml.predict('cols_wide', w) = gbml.predict('cols_wide', s)) AS same_predict_in_a_worker,
       count(*) AS total
  FROM col_wide w JOIN (SELECT * FROM col_wide WHERE id > 0 OFFSET 0) s USING (id);
RESET force_parallel_mode;
-- and compiled by JIT (where the server has it): the packs' argument arrays are the same
CREATE TEMP TABLE wide_scores AS SELECT id, gbml.predict('cols_wide', w) AS p FROM col_wide w;
SET jit = on; SET jit_above_cost = 0;
SELECT count(*) FILTER (WHERE gbml.predict('cols_wide', w) = p) AS same_predict_jit, count(*) AS total
  FROM col_wide w JOIN wide_scores USING (id);
RESET jit; RESET jit_above_cost;
-- packs made by hand may split the columns anywhere; anything else among them is an ERROR
SELECT format('SELECT count(*) FILTER (WHERE gbml._predict_columns(''cols_wide'', ''col_wide''::regtype, gbml._column_pack(%s), gbml._column_pack(%s)) = gbml.predict(''cols_wide'', s)) AS same_hand_packs FROM col_wide w JOIN (SELECT * FROM col_wide OFFSET 0) s USING (id)',
              string_agg(c, ', ') FILTER (WHERE n <= 40), string_agg(c, ', ') FILTER (WHERE n > 40))
  FROM (SELECT 'w.' || quote_ident(attname) AS c, row_number() OVER (ORDER BY attnum) AS n
          FROM pg_attribute WHERE attrelid = 'col_wide'::regclass AND attnum > 0 AND NOT attisdropped) a \gexec
SELECT gbml._predict_columns('cols_wide', 'col_wide'::regtype, gbml._column_pack(w.id, w.w1)) FROM col_wide w LIMIT 1;
SELECT gbml._predict_columns('cols_wide', 'col_wide'::regtype, gbml._column_pack(w.id), w.w1) FROM col_wide w LIMIT 1;
SELECT gbml._predict_columns('cols_wide', 'col_wide'::regtype, '\x00'::bytea) FROM col_wide w LIMIT 1;

-- K-Means and SAGA: a NULL number is an ERROR naming the column and the row
SELECT gbml.train('cols_km', 'kmeans', 'SELECT price, ratio FROM col_rows ORDER BY id', '{"k": 3}');
SELECT gbml.train('cols_km', 'kmeans', 'SELECT price, ratio FROM col_rows WHERE price IS NOT NULL', '{"k": 3, "random_seed": 2}') > 0 AS trained;
SELECT count(DISTINCT gbml.kmeans_assign('cols_km', c)) AS clusters FROM col_rows c WHERE price IS NOT NULL;
SELECT gbml.kmeans_fit(c, 3, '{"feature_columns": ["price", "ratio"], "random_seed": 2}')
       = (SELECT model FROM gbml.models WHERE name = 'cols_km') AS kmeans_aggregate_same_bytes
  FROM (SELECT price, ratio FROM col_rows WHERE price IS NOT NULL) c;
SELECT gbml.saga_fit(c, '{"feature_columns": ["price", "ratio"], "label_column": "flag"}') FROM col_rows c;
-- ... and scoring a row: a NULL, NaN or infinite number is an ERROR naming the column (as the array
-- form refuses NaN and infinities), through the columns form and the composite path alike
CREATE TABLE col_bad AS SELECT * FROM col_rows WHERE id IN (1, 2, 3, 97);
UPDATE col_bad SET price = 'NaN' WHERE id = 1;
UPDATE col_bad SET price = 'Infinity' WHERE id = 2;
UPDATE col_bad SET ratio = '-Infinity' WHERE id = 3;
SELECT gbml.kmeans_assign('cols_km', b) FROM col_bad b WHERE id = 1;
SELECT gbml.kmeans_distance('cols_km', b) FROM col_bad b WHERE id = 2;
SELECT gbml.kmeans_assign('cols_km', b) FROM col_bad b WHERE id = 3;
SELECT gbml.kmeans_assign('cols_km', b) FROM col_bad b WHERE id = 97;
SELECT gbml.kmeans_assign('cols_km', b) FROM (SELECT price, ratio FROM col_bad WHERE id = 2) b;
SELECT gbml.kmeans_assign('cols_km', ARRAY['Infinity', 1]::real[]);
SELECT gbml.train('cols_saga', 'saga', 'SELECT price, ratio, flag FROM col_rows WHERE price IS NOT NULL',
                  '{"label_column": "flag", "loss": "logistic"}') > 0 AS trained;
SELECT gbml.predict_proba('cols_saga', b) FROM col_bad b WHERE id = 2;
SELECT gbml.predict('cols_saga', b) FROM (SELECT price, ratio FROM col_bad WHERE id = 97) b;
SELECT gbml.predict_proba('cols_saga', b) = gbml.predict_proba('cols_saga', ARRAY[b.price, b.ratio]::real[]) AS row_as_array
  FROM col_rows b WHERE id = 5;
-- predict_proba of a regression (RMSE) model: an ERROR, not NaN
SELECT gbml.predict_proba('cols_num', c) FROM col_rows c WHERE id = 1;
-- a numeric past float8's range is an infinity (an ERROR for K-Means naming the column; a value above
-- every border for boosting), not PostgreSQL's overflow ERROR quoting its digits
SELECT gbml.kmeans_fit(c, 2, '{}') FROM (SELECT -1e400::numeric AS amount UNION ALL SELECT 2) c;
SELECT gbml.predict('cols_num', c) = gbml.predict('cols_num', i) AS numeric_overflow_is_infinity
  FROM (SELECT id, small, big, ratio, price, 1e400::numeric AS amount, flag, emb, emb8 FROM col_rows WHERE id = 1) c,
       (SELECT id, small, big, ratio, price, 'Infinity'::numeric AS amount, flag, emb, emb8 FROM col_rows WHERE id = 1) i;
-- an array column of the wrong shape at scoring time: named, without a row number
SELECT gbml.predict('cols_num', c) FROM (SELECT id, small, big, ratio, price, amount, flag, ARRAY[1]::real[] AS emb, emb8 FROM col_rows WHERE id = 1) c;
SELECT gbml.predict('cols_num', c) FROM (SELECT id, small, big, ratio, price, amount, flag, ARRAY[[1], [2]]::real[] AS emb, emb8 FROM col_rows WHERE id = 1) c;

-- parameter and column errors
-- the label, weight and group columns' types: an ERROR naming the column (not a cast's or an internal one)
SELECT gbml.train('x', 'boost', 'SELECT price, city AS label FROM col_rows', '{}');
SELECT gbml.train('x', 'boost', 'SELECT price, label, flag AS weight FROM col_rows', '{}');
SELECT gbml.boost_fit(c, '{"group_column": "city", "loss": "YetiRank"}') FROM (SELECT price, label, city FROM col_rows) c;
SELECT gbml.saga_fit(c, '{"label_column": "emb"}') FROM (SELECT price, emb FROM col_rows WHERE price IS NOT NULL) c;
-- feature_columns naming a column twice or the label (a feature of the label leaks it), a source with two
-- columns of a feature's name, categorical_columns naming a column that is not a feature, a "features"
-- column that is not an array: each an ERROR naming it
SELECT gbml.train('x', 'boost', 'SELECT * FROM col_rows', '{"feature_columns": ["price", "ratio", "price"]}');
SELECT gbml.train('x', 'boost', 'SELECT * FROM col_rows', '{"feature_columns": ["price", "label"]}');
SELECT gbml.boost_fit(c, '{"feature_columns": ["price", "weight"]}') FROM col_rows c;
SELECT gbml.train('x', 'boost', 'SELECT price, ratio AS price, label FROM col_rows', '{}');
SELECT gbml.train('x', 'boost', 'SELECT * FROM col_rows', '{"categorical_columns": ["id"], "exclude_columns": ["id"]}');
SELECT gbml.train('x', 'boost', 'SELECT city AS features, label FROM col_rows', '{}');
SELECT gbml.train('x', 'kmeans', 'SELECT price AS label, ratio FROM col_rows WHERE price IS NOT NULL',
                  '{"feature_columns": ["label", "ratio"], "k": 2}') > 0 AS kmeans_takes_a_column_named_label;
-- a source naming a table with quoted (schema-)qualified names is a table, not a query; an empty one is refused
CREATE SCHEMA "Col Schema";
CREATE TABLE "Col Schema"."Col Rows" AS SELECT price AS "Price", ratio, label FROM col_rows WHERE price IS NOT NULL;
SELECT gbml.train('cols_quoted', 'boost', '"Col Schema"."Col Rows"', '{"iterations": 5}') > 0 AS trained;
SELECT gbml.model_info('cols_quoted') -> 'feature_names' AS names;
SELECT gbml.train('x', 'boost', ' ', '{}');
DROP SCHEMA "Col Schema" CASCADE;
-- a source query as a user types it: a trailing semicolon or comment is no part of it (they were
-- syntax errors in gbml's wrapping query); two statements, a DELETE and a syntax error are named
SELECT gbml.train('cols_semi', 'boost', 'SELECT price, ratio, label FROM col_rows;  ', '{"iterations": 5}') > 0 AS trained;
SELECT gbml.train('cols_semi', 'boost', E'SELECT price, ratio, label FROM col_rows -- the rows', '{"iterations": 5}') > 0 AS trained;
SELECT gbml.train('cols_semi', 'boost', 'TABLE col_rows; -- all of it', '{"iterations": 5, "exclude_columns": ["id"]}') > 0 AS trained;
SELECT gbml.train('cols_semi', 'boost', 'SELECT price, ratio, label FROM col_rows',
                  '{"iterations": 5, "eval_source": "SELECT price, ratio, label FROM col_rows WHERE flag;"}') > 0 AS trained;
-- an expression index on a table's whole-row score with a constant model: the planner's columns
-- form stays IMMUTABLE for a table's rows, which an index expression needs (only a foreign table's
-- rows get the tableoid that keeps postgres_fdw from shipping the call; tests/ops/distributed.sh)
DO $$ BEGIN
  EXECUTE format('CREATE INDEX col_rows_score ON col_rows ((gbml.predict(%L::bytea, col_rows)))',
                 (SELECT model FROM gbml.models WHERE name = 'cols_semi' AND deployed));
END $$;
SELECT count(*) AS score_indexes FROM pg_indexes WHERE indexname = 'col_rows_score';
DROP INDEX col_rows_score;
SELECT gbml.train('x', 'boost', 'SELECT price, label FROM col_rows; SELECT 1', '{}');
SELECT gbml.train('x', 'boost', 'DELETE FROM col_rows RETURNING price, label', '{}');
SELECT gbml.train('x', 'boost', 'SELECT price, label FRM col_rows', '{}');
-- a name that is no table's: said so (it was PostgreSQL's error on gbml's internal query)
CREATE TYPE col_pair AS (price float8, label real);
CREATE INDEX col_rows_id ON col_rows (id);
SELECT gbml.train('x', 'boost', 'col_pair', '{}');
SELECT gbml.train('x', 'boost', 'col_rows_id', '{}');
SELECT gbml.train('x', 'boost', 'SELECT price, label FROM col_rows', '{"eval_source": "no_such_eval"}');
DROP INDEX col_rows_id;
DROP TYPE col_pair;
-- weights: every row's 0 is nothing to learn from (it trained a model of NaN metrics)
SELECT gbml.train('x', 'saga', 'SELECT price, ratio, flag AS label, 0::real AS weight FROM col_rows WHERE price IS NOT NULL', '{}');
SELECT gbml.kmeans_fit(c, 2, '{}') FROM (SELECT ratio, 0::real AS weight FROM col_rows) c;
-- an eval source without one of the training source's feature columns: named
SELECT gbml.train('x', 'boost', 'SELECT price, city, label FROM col_rows', '{"eval_source": "SELECT price, label FROM col_rows"}');
-- K-Means takes no label: a column named "label" is left out, whatever its type
SELECT gbml.kmeans_fit(c, 2, '{"random_seed": 1}') = gbml.kmeans_fit(p, 2, '{"random_seed": 1}') AS label_left_out
  FROM (SELECT ratio, city AS label FROM col_rows) c, LATERAL (SELECT c.ratio) p;
SELECT gbml.train('x', 'boost', 'SELECT * FROM col_rows', '{"feature_columns": ["no_such"]}');
SELECT gbml.train('x', 'boost', 'SELECT * FROM col_rows', '{"exclude_columns": "id", "iterations": 5}') > 0 AS one_name_is_a_list_of_one;
SELECT gbml.train('x', 'boost', 'SELECT * FROM col_rows', '{"exclude_columns": [1, 2]}');
SELECT gbml.train('x', 'boost', 'SELECT label, now() AS at FROM col_rows', '{}');
SELECT gbml.train('x', 'boost', 'SELECT label, CASE WHEN id < 5 THEN ARRAY[1]::real[] ELSE ARRAY[1, 2]::real[] END AS e FROM col_rows', '{}');
SELECT gbml.train('x', 'boost', 'SELECT label FROM col_rows', '{}');

-- pgvector's vector (not in Debian 12's archive, so a stand-in of the same shape: a varlena type
-- named "vector", text in and out, with a function cast to real[]): one feature per element, the
-- same model as the real[] column apart from the recorded type, and the same scores by row
CREATE TYPE vector;
CREATE FUNCTION vector_in(cstring) RETURNS vector LANGUAGE internal IMMUTABLE STRICT AS 'textin';
CREATE FUNCTION vector_out(vector) RETURNS cstring LANGUAGE internal IMMUTABLE STRICT AS 'textout';
CREATE TYPE vector (INPUT = vector_in, OUTPUT = vector_out, INTERNALLENGTH = VARIABLE, STORAGE = extended);
CREATE CAST (vector AS text) WITH INOUT;
CREATE FUNCTION vector_to_real(v vector) RETURNS real[] LANGUAGE sql IMMUTABLE STRICT
  AS $$ SELECT ('{' || btrim(v::text, '[]') || '}')::real[] $$;
CREATE CAST (vector AS real[]) WITH FUNCTION vector_to_real(vector);
CREATE TABLE col_vec AS
SELECT id, label, ('[' || array_to_string(emb, ',') || ']')::vector AS emb, price FROM col_rows;
CREATE TABLE col_arr AS SELECT id, label, emb, price FROM col_rows;
SELECT gbml.train('cols_vec', 'boost', 'SELECT * FROM col_vec', '{"exclude_columns": ["id"], "iterations": 20, "depth": 4}') > 0 AS trained;
SELECT gbml.train('cols_arr', 'boost', 'SELECT * FROM col_arr', '{"exclude_columns": ["id"], "iterations": 20, "depth": 4}') > 0 AS trained;
SELECT string_agg(f ->> 'name' || ' ' || (f ->> 'type'), ', ') AS vector_features
  FROM gbml.models, jsonb_array_elements(gbml.model_json(model) -> 'feature_schema') AS f WHERE name = 'cols_vec';
SELECT (gbml.model_json(a.model) - 'feature_schema') = (gbml.model_json(b.model) - 'feature_schema') AS same_model_but_the_type
  FROM gbml.models a, gbml.models b WHERE a.name = 'cols_vec' AND b.name = 'cols_arr';
SELECT count(*) AS rows, count(*) FILTER (WHERE gbml.predict('cols_vec', v) = gbml.predict('cols_arr', a)) AS same_scores,
       count(*) FILTER (WHERE gbml.predict('cols_vec', a) = gbml.predict('cols_vec', v)) AS vector_model_scores_arrays
  FROM col_vec v JOIN col_arr a USING (id);
SELECT gbml.train('cols_vec_km', 'kmeans', 'SELECT emb FROM col_vec', '{"k": 3, "random_seed": 1}') > 0 AS trained;
SELECT count(DISTINCT gbml.kmeans_assign('cols_vec_km', v)) AS clusters FROM col_vec v;
DROP TABLE col_vec, col_arr;
DROP TYPE vector CASCADE;
