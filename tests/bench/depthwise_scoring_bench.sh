#!/usr/bin/env bash
# tests/bench/depthwise_scoring_bench.sh — what scoring a Depthwise model costs in SQL
# against a symmetric one of the same size: N rows of real[D] (default 200,000 x 20), two
# boost models (TREES trees of depth DEPTH, default 300 x 6; grow_policy SymmetricTree and
# Depthwise) trained on the first quarter of the rows, then
#   SELECT sum(gbml.predict(model, f)) FROM s            (each model, REPEAT times, alternating)
# and sum(f[1]) as the floor of reading the rows; prints each query's time (\timing) and
# the Depthwise / SymmetricTree ratio of the medians.  Symmetric models take the SIMD
# single-row scorer where the CPU has AVX-512 VBMI; Depthwise ones the node walk
# (boost_predict.c: sum_nodes).  Needs gbml installed; starts its own throwaway cluster.
set -euo pipefail
N=${N:-200000}
D=${D:-20}
TREES=${TREES:-300}
DEPTH=${DEPTH:-6}
REPEAT=${REPEAT:-3}
cd "$(dirname "$0")/../.."
exec pg_virtualenv -v 15 bash -c "
set -euo pipefail
psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION gbml;
SET gbml.progress_interval = 0;
CREATE TABLE s AS SELECT i, ARRAY(SELECT (hashint4(i * 31 + j) % 1000) / 1000.0 FROM generate_series(1, $D) AS j)::real[] AS f
  FROM generate_series(1, $N) AS i;
ALTER TABLE s ADD COLUMN y real;
UPDATE s SET y = f[1] * 2 + f[2] * f[3] + (CASE WHEN f[4] > 0.5 THEN f[5] ELSE f[6] END);
VACUUM ANALYZE s;
CREATE TABLE m AS SELECT p, gbml.boost_fit(f, y, jsonb_build_object('iterations', $TREES, 'depth', $DEPTH, 'grow_policy', p)) AS model
  FROM s, (VALUES ('SymmetricTree'), ('Depthwise')) AS v(p) WHERE i <= $N / 4 GROUP BY p;
SQL
out=\$(mktemp)
for r in \$(seq 1 $REPEAT); do
  for p in SymmetricTree Depthwise floor; do
    if [ \$p = floor ]; then q='SELECT sum(f[1]) FROM s;'; else q=\"SELECT sum(gbml.predict((SELECT model FROM m WHERE p = '\$p'), f)) FROM s;\"; fi
    ms=\$(psql -X -q -At -c '\\timing on' -c \"\$q\" | sed -n 's/^Time: \\([0-9.]*\\) ms.*/\\1/p')
    echo \"\$p \$ms\" | tee -a \$out
  done
done
median() { grep \"^\$1 \" \$out | awk '{print \$2}' | sort -n | awk '{v[NR] = \$1} END {print v[int((NR + 1) / 2)]}'; }
sym=\$(median SymmetricTree); dw=\$(median Depthwise); fl=\$(median floor)
echo \"medians over $REPEAT runs: SymmetricTree \$sym ms, Depthwise \$dw ms, sum(f[1]) \$fl ms\"
awk -v a=\$dw -v b=\$sym 'BEGIN {printf \"Depthwise / SymmetricTree: %.2f\\n\", a / b}'
rm -f \$out
"
