#!/usr/bin/env bash
# tests/bench/enum_scoring_bench.sh — scoring whole rows whose categorical
# features are enum columns (issue 13): N rows (default 300,000) with one
# number and three 8-value enum columns, a 100-tree depth-6 model trained on
# a tenth of them by gbml.train, then REPEAT (default 5) serial runs, in one
# session, of
#   SELECT id FROM r ORDER BY gbml.predict('em', r) DESC LIMIT 3
# with psql's timing.  An enum value's text comes from a catalog lookup;
# each bound column keeps its values' ids (columns.c), so the cost per row
# should be close to a numeric column's.  Needs gbml installed; starts its
# own throwaway cluster.
set -euo pipefail
N=${N:-300000}
REPEAT=${REPEAT:-5}
cd "$(dirname "$0")/../.."
exec pg_virtualenv -v 15 bash -c "
set -euo pipefail
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE EXTENSION gbml;
SET gbml.progress_interval = 0;
CREATE TYPE e8 AS ENUM ('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h');
SQL
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE TABLE r AS
SELECT i AS id, (i % 100) / 100.0 AS x,
       ((ARRAY['a','b','c','d','e','f','g','h'])[1 + i % 8])::e8 AS k1,
       ((ARRAY['a','b','c','d','e','f','g','h'])[1 + (i / 8) % 8])::e8 AS k2,
       ((ARRAY['a','b','c','d','e','f','g','h'])[1 + (i / 64) % 8])::e8 AS k3,
       ((i % 8) * 0.3 + ((i / 8) % 8) * 0.1 + ((i::bigint * 7919) % 1000) / 5000.0)::real AS y
  FROM generate_series(1, $N) AS i;
SELECT gbml.train('em', 'boost', 'SELECT x, k1, k2, k3, y FROM r WHERE id % 10 = 0',
                  '{\"label_column\": \"y\", \"iterations\": 100, \"depth\": 6}');
VACUUM ANALYZE r;
SQL
echo \"$N rows, three enum columns and a number, 100 trees; serial plan:\"
# one session: the first call also loads the model and warms the catalog caches
{ echo 'SET max_parallel_workers_per_gather = 0;'; echo '\\timing on';
  for i in \$(seq 1 $REPEAT); do echo \"SELECT id FROM r ORDER BY gbml.predict('em', r) DESC LIMIT 3;\"; done; } |
  psql -X -q | grep '^Time'

"
