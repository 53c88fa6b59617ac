#!/usr/bin/env bash
# tests/bench/venv.sh — creates (once) the virtual environment the benchmarks
# run the peers in, and prints its python path.  Peers: scikit-learn, XGBoost,
# LightGBM, CatBoost (with numpy/scipy/threadpoolctl).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${GBML_BENCH_VENV:-$here/../../.bench-venv}
# in a git worktree that has none, the main worktree's (one venv for every worktree)
if [ -z "${GBML_BENCH_VENV:-}" ] && [ ! -d "$venv" ]; then
  common=$(git -C "$here" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
  if [ -n "$common" ] && [ -x "$(dirname "$common")/.bench-venv/bin/python" ]; then
    venv=$(dirname "$common")/.bench-venv
  fi
fi
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sklearn, xgboost, lightgbm, catboost, threadpoolctl' 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q numpy scipy scikit-learn xgboost lightgbm catboost threadpoolctl >&2
fi
echo "$venv/bin/python"
