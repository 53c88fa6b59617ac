#!/usr/bin/env bash
# tests/bench/sql_scoring_bench.sh — ranking inside SQL, pgbench-style:
#   A: SELECT id FROM t ORDER BY stored_score DESC LIMIT 10             (a stored float column)
#   B: SELECT id FROM t ORDER BY gbml.predict(m, features) DESC LIMIT 10 (a TREES-tree depth-6 model)
#   C: SELECT id FROM tc ORDER BY gbml.predict(mc, tc) DESC LIMIT 10      (the same rows as D real
#      columns c1..cD, scored as whole rows by a model trained on those columns)
# over N rows x D features (default 1,000,000 x 100, 500 trees, BORDERS 32: the
# models' border_count, gbml's default), each run by pgbench
# for TX transactions on one client; prints latencies, B/A (goal: <= 3) and C/B (the
# row form against the array form, goal: <= 1.5) under the default plan (parallel
# workers allowed, as the server is configured) and a serial one.
# KMEANS=1 adds the same comparison for K-Means (k KM_K, default 20):
#   D: ORDER BY gbml.kmeans_distance(km, features), E: ORDER BY gbml.kmeans_distance(kmc, tc)
# and prints E/D (the row form against the array form).
# Needs gbml installed; starts its own throwaway cluster.
set -euo pipefail
N=${N:-1000000}
D=${D:-100}
TREES=${TREES:-500}
BORDERS=${BORDERS:-32}
TX=${TX:-5}
KMEANS=${KMEANS:-0}
KM_K=${KM_K:-20}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
echo 'SELECT id FROM t ORDER BY stored_score DESC LIMIT 10;' > "$work/stored.sql"
echo "SELECT id FROM t ORDER BY gbml.predict((SELECT model FROM m), t.features) DESC LIMIT 10;" > "$work/predict.sql"
echo "SELECT id FROM tc ORDER BY gbml.predict((SELECT model FROM mc), tc) DESC LIMIT 10;" > "$work/predict_row.sql"
echo "SELECT id FROM t ORDER BY gbml.kmeans_distance((SELECT model FROM km), t.features) DESC LIMIT 10;" > "$work/km.sql"
echo "SELECT id FROM tc ORDER BY gbml.kmeans_distance((SELECT model FROM kmc), tc) DESC LIMIT 10;" > "$work/km_row.sql"
COLS=$(for j in $(seq 1 "$D"); do printf '%sfeatures[%d] AS c%d' "$([ "$j" -gt 1 ] && echo ', ')" "$j" "$j"; done)
exec pg_virtualenv -v 15 -o shared_buffers=2GB -o max_parallel_workers_per_gather=2 -o work_mem=64MB bash -c "
set -euo pipefail
psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION gbml;
SET gbml.progress_interval = 0;
\\\\echo generating $N rows x $D features ...
CREATE TABLE t AS
SELECT i AS id, (SELECT array_agg(((i::bigint * 7919 + j * 104729) % 1000003) / 1000003.0)::real[]
                   FROM generate_series(1, $D) AS j) AS features
  FROM generate_series(1, $N) AS i;
\\\\echo training a $TREES-tree depth-6 model on 20,000 rows ...
CREATE TABLE m AS
SELECT gbml.boost_fit(features, (features[1] * 3 + features[2] * features[3] + sin(features[4] * 6))::real,
                      '{\"iterations\": $TREES, \"depth\": 6, \"learning_rate\": 0.05, \"border_count\": $BORDERS}') AS model
  FROM t WHERE id % 50 = 0;
SELECT (gbml.model_info(model) ->> 'trees') AS trees FROM m;
\\\\echo the same rows as $D real columns, and a model trained on them ...
CREATE TABLE tc AS SELECT id, $COLS FROM t;
CREATE TABLE mc AS
SELECT gbml.boost_fit(tc, '{\"label_column\": \"y\", \"exclude_columns\": [\"id\"], \"iterations\": $TREES, \"depth\": 6, \"learning_rate\": 0.05, \"border_count\": $BORDERS}') AS model
  FROM (SELECT tc.*, (c1 * 3 + c2 * c3 + sin(c4 * 6))::real AS y FROM tc WHERE id % 50 = 0) tc;
VACUUM ANALYZE tc;
ALTER TABLE t ADD COLUMN stored_score float8;
UPDATE t SET stored_score = gbml.predict((SELECT model FROM m), features);
VACUUM ANALYZE t;
SQL
if [ $KMEANS = 1 ]; then
  psql -X -q -v ON_ERROR_STOP=1 <<SQL
SET gbml.progress_interval = 0;
CREATE TABLE km AS SELECT gbml.kmeans_fit(features, $KM_K, '{\"random_seed\": 1}') AS model FROM t WHERE id % 50 = 0;
CREATE TABLE kmc AS SELECT gbml.kmeans_fit(tc, $KM_K, '{\"random_seed\": 1, \"exclude_columns\": [\"id\"]}') AS model FROM tc WHERE id % 50 = 0;
SQL
fi
echo
# pgb SCRIPT: one pgbench run of TX transactions; its report goes to stdout
pgb() { pgbench -n -f \"\$1\" -t $TX 2>/dev/null; }
# latency REPORT: the average latency (ms) in a pgbench report
latency() { sed -n 's/latency average = \\([0-9.]*\\) ms/\\1/p' <<<\"\$1\"; }
echo '--- A: ORDER BY a stored float column'
ra=\$(pgb $work/stored.sql)
grep -E 'latency average|tps' <<<\"\$ra\"
echo '--- B: ORDER BY gbml.predict(model, features)'
rb=\$(pgb $work/predict.sql)
grep -E 'latency average|tps' <<<\"\$rb\"
echo '--- C: ORDER BY gbml.predict(model, whole row of D columns)'
rc=\$(pgb $work/predict_row.sql)
grep -E 'latency average|tps' <<<\"\$rc\"
a=\$(latency \"\$ra\")
b=\$(latency \"\$rb\")
c=\$(latency \"\$rc\")
cs=\$(latency \"\$(PGOPTIONS='-c max_parallel_workers_per_gather=0' pgb $work/predict_row.sql)\")
as=\$(latency \"\$(PGOPTIONS='-c max_parallel_workers_per_gather=0' pgb $work/stored.sql)\")
bs=\$(latency \"\$(PGOPTIONS='-c max_parallel_workers_per_gather=0' pgb $work/predict.sql)\")
python3 -c \"a=\$a; b=\$b; print('default plan (parallel allowed): stored %.1f ms, predict %.1f ms, ratio B/A = %.2f (goal <= 3)' % (a, b, b/a))\"
python3 -c \"a=\$as; b=\$bs; print('serial plan (no workers)       : stored %.1f ms, predict %.1f ms, ratio B/A = %.2f' % (a, b, b/a))\"
python3 -c \"b=\$b; c=\$c; bs=\$bs; cs=\$cs; print('row form: default plan %.1f ms, C/B = %.2f; serial %.1f ms, C/B = %.2f (goal <= 1.5)' % (c, c/b, cs, cs/bs))\"
if [ $KMEANS = 1 ]; then
  echo '--- D: ORDER BY gbml.kmeans_distance(model, features)'
  d=\$(latency \"\$(pgb $work/km.sql)\")
  ds=\$(latency \"\$(PGOPTIONS='-c max_parallel_workers_per_gather=0' pgb $work/km.sql)\")
  echo '--- E: ORDER BY gbml.kmeans_distance(model, whole row of D columns)'
  e=\$(latency \"\$(pgb $work/km_row.sql)\")
  es=\$(latency \"\$(PGOPTIONS='-c max_parallel_workers_per_gather=0' pgb $work/km_row.sql)\")
  python3 -c \"d=\$d; e=\$e; ds=\$ds; es=\$es; print('K-Means (k $KM_K): array %.1f ms, row %.1f ms, E/D = %.2f; serial %.1f / %.1f ms, E/D = %.2f (goal <= 1.5)' % (d, e, e/d, ds, es, es/ds))\"
fi
psql -X -At -c \"SELECT 'same top-10 scores: ' || ((SELECT array_agg(stored_score ORDER BY stored_score DESC) FROM (SELECT stored_score FROM t ORDER BY stored_score DESC LIMIT 10) s) = (SELECT array_agg(p ORDER BY p DESC) FROM (SELECT gbml.predict((SELECT model FROM m), features) AS p FROM t ORDER BY 1 DESC LIMIT 10) s))\"
psql -X -c \"EXPLAIN SELECT id FROM t ORDER BY gbml.predict((SELECT model FROM m), t.features) DESC LIMIT 10\"
"
