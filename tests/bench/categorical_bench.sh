#!/usr/bin/env bash
# tests/bench/categorical_bench.sh — gbml against CatBoost, LightGBM and
# XGBoost on the mixed-type (numeric + categorical) tables of
# ../shared/data/categorical: mlc_churn (binary: AUC, logloss), ames
# (regression on log sale price: RMSE), hpc_data (as binary: M or L vs VF or F),
# hpc_multi (hpc_data's 4 classes: multiclass logloss, accuracy).
# Starts a throwaway PostgreSQL 15 cluster (pg_virtualenv), creates the gbml
# extension and runs tests/bench/categorical_bench.py in it; that script loads
# the CSVs into tables, trains gbml with one gbml.train call per seed from the
# table's columns, scores whole rows with gbml.predict, and runs the peers on
# the same splits (its header has the protocol).  Settings come from the
# environment: SEEDS (20), TREES (300), DEPTH (6), LR (0.05), THREADS (all
# cores), BORDERS (each library's default), DATASETS (mlc_churn,ames,hpc_data,hpc_multi),
# PEERS, RESULTS_JSON (/tmp/categorical_bench.json).  PEERS_ONLY=1 needs no
# cluster: run the python script directly.  Needs gbml installed (make install).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec pg_virtualenv -v 15 -o max_parallel_workers_per_gather=0 bash -c '
set -euo pipefail
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION gbml"
python3 tests/bench/categorical_bench.py
'
