#!/usr/bin/env bash
# tests/bench/spill_bench.sh — training on tables bigger than the memory
# budget (issue 12).  Loads N rows x D features (default 2,500,000 x 100:
# 1 GB of float features; tests/bench/gen_rows.c, binary COPY), then for each
# trainer (boosting with YetiRank by query, K-Means, SAGA logistic) trains
#   big budget:   memory_limit_mb = BIG (default 16384: K-Means and SAGA in memory)
#   small budget: memory_limit_mb = LIMIT (default 232: the features, 954 MB, are 4.1x it;
#                 boosting BOOST_LIMIT, default 640: at 100 features its per-row
#                 state is about as large as its bins; past the budget the bins go
#                 to a file too: N=1000000 D=256 TRAINERS=boost BOOST_LIMIT=240
#                 trains 4x its budget)
# and prints, per run: wall seconds, the run report's prepare / train seconds,
# peak engine memory, rows spilled, MB written to and read from temporary
# files, MB a reorder gave back as it read them (temp_discarded_mb), whether
# the model bytes are the same, and the spilled / in-memory
# time ratio (goal: <= 1.5 while the files fit the page cache), of the median
# walls of REPEAT (default 3) alternating runs of each budget.  Boosting
# spills in both runs (it keeps bins, not floats, past 32 MB of features).
# TRAINERS (default "boost kmeans saga") picks some; BOOST_ITERS, KM_K,
# KM_ITERS, SAGA_EPOCHS size the work.  ONLY_DEFAULT=1 skips the in-memory
# run and trains once with the default gbml.memory_limit (the 10M x 100 run:
# N=10000000 ONLY_DEFAULT=1).  CATEGORICAL=1 adds two text columns (city:
# 64 values, device: 8) to a copy of the table and trains the aggregates'
# whole-row forms on it instead (boosting by ordered target statistics,
# K-Means and SAGA on the one-hot encoding; the first-seen category ids of
# the rows in files renumbered as they are read back): N=1000000 CATEGORICAL=1.
# Needs gbml installed; starts its own cluster.
set -euo pipefail
N=${N:-2500000}
D=${D:-100}
LIMIT=${LIMIT:-232}
BOOST_LIMIT=${BOOST_LIMIT:-640}
BIG=${BIG:-16384}
TRAINERS=${TRAINERS:-boost kmeans saga}
BOOST_ITERS=${BOOST_ITERS:-30}
KM_K=${KM_K:-32}
KM_ITERS=${KM_ITERS:-15}
SAGA_EPOCHS=${SAGA_EPOCHS:-5}
ONLY_DEFAULT=${ONLY_DEFAULT:-0}
CATEGORICAL=${CATEGORICAL:-0}
cd "$(dirname "$0")/../.."
make -s -f tests/bench/bench.mk tests/bench/bin/gen_rows
REPEAT=${REPEAT:-3}
export N D LIMIT BOOST_LIMIT BIG TRAINERS BOOST_ITERS KM_K KM_ITERS SAGA_EPOCHS ONLY_DEFAULT REPEAT CATEGORICAL
exec pg_virtualenv -v 15 -o shared_buffers=256MB -o max_parallel_workers_per_gather=0 -o work_mem=64MB \
	-o temp_file_limit=-1 bash -c '
set -euo pipefail
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION gbml" \
  -c "CREATE TABLE t (id bigint, query bigint, f real[], relevance real, clicked real)"
echo "loading $N rows x $D features ..."
t0=$(date +%s.%N)
tests/bench/bin/gen_rows "$N" "$D" 7 | psql -X -q -v ON_ERROR_STOP=1 -c "COPY t FROM STDIN (FORMAT binary)"
psql -X -q -v ON_ERROR_STOP=1 -c "VACUUM ANALYZE t"
echo "loaded in $(echo "$(date +%s.%N) - $t0" | bc) s; table $(psql -X -At -c "SELECT pg_size_pretty(pg_total_relation_size('"'"'t'"'"'))")"
if [ "$CATEGORICAL" = 1 ]; then
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE TABLE tc AS SELECT id, query, f, relevance, clicked,
      '"'"'city '"'"' || (hashint8(id) & 63) AS city, '"'"'device '"'"' || (hashint8(id * 7) & 7) AS device FROM t" \
    -c "VACUUM ANALYZE tc"
fi
python3 tests/bench/spill_bench.py
'
