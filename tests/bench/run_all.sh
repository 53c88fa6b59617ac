#!/usr/bin/env bash
# tests/bench/run_all.sh — every benchmark, one after the other (never in
# parallel: the machines are small and shared), each printing gbml beside its
# peers with ratios.  Output goes to the terminal and to bench-results/<name>.txt.
# Needs gbml installed (make install) for the SQL benchmarks; the peers are
# installed into a virtual environment by tests/bench/venv.sh on first use.
set -uo pipefail
cd "$(dirname "$0")/../.."
mkdir -p bench-results
run() {
  local name=$1; shift
  echo "=== $name: $*"
  ( time "$@" ) 2>&1 | tee "bench-results/$name.txt"
}
only=${1:-all}
[[ $only == all || $only == streaming ]] && run streaming tests/bench/streaming_bench.sh
[[ $only == all || $only == boost_speed ]] && run boost_speed python3 tests/bench/boost_speed_bench.py
[[ $only == all || $only == rank_quality ]] && run rank_quality python3 tests/bench/rank_quality_bench.py
[[ $only == all || $only == kmeans ]] && make -s -f tests/bench/bench.mk tests/bench/bin/bench_kmeans && run kmeans "$(tests/bench/venv.sh)" tests/bench/kmeans_bench.py
[[ $only == all || $only == saga ]] && run saga python3 tests/bench/saga_bench.py
[[ $only == all || $only == sql_scoring ]] && run sql_scoring tests/bench/sql_scoring_bench.sh
exit 0
