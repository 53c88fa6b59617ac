#!/usr/bin/env bash
# tests/bench/eval_cost_bench.sh — what boosting's eval set costs a tree:
# eval_seconds (the eval rows' predictions and the metric, each tree) against
# boost_seconds, for RMSE, YetiRank (NDCG@10 on eval queries) and Logloss with
# AUC, on N rows (250000) of D (40) random features, eval_fraction 0.2, TREES
# (40) trees of depth 6, REPEAT (3) runs each, medians printed.  The eval
# metric is an exact fixed-point sum (AUC excepted), the same bits from
# shards; this is its price on one server.  Starts a throwaway PostgreSQL 15
# cluster (pg_virtualenv); needs gbml installed (make install).
set -euo pipefail
N=${N:-250000} D=${D:-40} TREES=${TREES:-40} REPEAT=${REPEAT:-3}
export N D TREES REPEAT
exec pg_virtualenv -v 15 -o max_parallel_workers_per_gather=0 bash -c '
set -euo pipefail
q() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
q "CREATE EXTENSION gbml"
q "CREATE TABLE t AS SELECT i, ARRAY(SELECT random() + i * 0 FROM generate_series(1, $D))::real[] AS features,
     (i % 97)::real / 10 + random() AS label, (i % 97 > 48)::int::real AS clicked, i / 20 AS qid
   FROM generate_series(1, $N) i"
echo "# $N rows x $D features, eval_fraction 0.2, $TREES trees of depth 6; medians of $REPEAT runs"
echo "# | eval metric | eval s | boost s | eval / boost |"
for v in "RMSE:SELECT features, label FROM t:{}" \
         "YetiRank_NDCG@10:SELECT features, label, qid AS group_id FROM t:{\"loss\": \"YetiRank\"}" \
         "Logloss_AUC:SELECT features, clicked AS label FROM t:{\"loss\": \"Logloss\", \"eval_metric\": \"AUC\"}"; do
  name=${v%%:*}; rest=${v#*:}; src=${rest%%:*}; extra=${rest#*:}
  for ((r = 0; r < REPEAT; r++)); do
    q "SELECT gbml.train(\$\$e_$name\$\$, \$\$boost\$\$, \$\$$src\$\$,
         \$\${\"iterations\": $TREES, \"depth\": 6, \"eval_fraction\": 0.2}\$\$::jsonb || \$\$$extra\$\$::jsonb)" >/dev/null
  done
  q "SELECT \$\$# | $name | \$\$ || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY e)::numeric, 3) || \$\$ | \$\$ ||
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY b)::numeric, 3) || \$\$ | \$\$ ||
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY e) / percentile_cont(0.5) WITHIN GROUP (ORDER BY b))::numeric, 3) || \$\$ |\$\$
     FROM (SELECT (t->>\$\$eval_seconds\$\$)::float8 e, (t->>\$\$boost_seconds\$\$)::float8 b
           FROM (SELECT coalesce(timings->\$\$timings\$\$, timings) t FROM gbml.models WHERE name = \$\$e_$name\$\$) x) y"
done
'
