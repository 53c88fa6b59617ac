#!/usr/bin/env bash
# tests/ops/differential.sh — runs the randomized differential probe
# (differential.py: random tables and params, every training path that must
# give the same model bytes) on throwaway clusters: one server, or with
# --distributed a coordinator and two postgres_fdw shards.  Not part of
# `make test` (tests/ops/run_all.sh runs it only when named): a tool for
# looking for bugs, minutes per seed.  Needs gbml and gbml_cuda_emu installed
# (make install) and python3.
# Usage: tests/ops/differential.sh [--distributed] [SEEDS [CASES]]
#   SEEDS: a list ("1 2 3", default "1 2"), CASES per seed (default 20).
# Prints each case's line (OK, MISMATCH, ERROR with every path's outcome),
# an ok / not ok line per seed and "N passed, N failed".
cd "$(dirname "$0")" && source ./lib.sh

dist=""
if [ "${1:-}" = "--distributed" ]; then dist=--distributed; shift; fi
seeds=${1:-"1 2"}
cases=${2:-20}
command -v python3 >/dev/null || bail "python3 is needed"

if [ -z "$dist" ]; then
  new_cluster one "max_worker_processes = 16" "max_parallel_workers_per_gather = 2" || bail "initdb"
  start_cluster one || bail "start"
  q one postgres "CREATE EXTENSION gbml" || bail "create extension"
  export PGHOST=$OPS_WORK/one PGPORT=${OPS_PORT[one]} PGUSER=postgres PGDATABASE=postgres
else
  for c in coord shard1 shard2; do
    new_cluster $c || bail "initdb $c"
    start_cluster $c || bail "start $c"
    q $c postgres "CREATE EXTENSION gbml" || bail "create extension on $c"
  done
  fdw_shards coord shard1 shard2 || bail "postgres_fdw servers on the coordinator"
  for c in coord shard1 shard2; do
    export "DIFF_${c^^}=$(pgargs $c) -d postgres"
  done
fi

for s in $seeds; do
  out=$(python3 ./differential.py $dist "$s" "$cases" 2>&1)
  rc=$?
  echo "$out"
  check "differential probe, seed $s ($cases cases${dist:+, across servers}): every path agrees" 0 "$rc"
done
finish
