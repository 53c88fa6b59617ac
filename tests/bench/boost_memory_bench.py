#!/usr/bin/env python3
"""boost_memory_bench.py — peak memory of a boosting fit (issue 12): gbml with
its rows held in memory and with the float features in temporary files
(bins only, as the server does past GBML_SPILL_QUANTIZED_VALUES), against
XGBoost (hist, from a QuantileDMatrix: its memory-lean input) and LightGBM
(Dataset with free_raw_data) on the same data, in one run.

Data: boost_speed_bench.py's synthetic N x D float32 rows (default
1,000,000 x 100), RMSE, depth 6, 32 borders, TREES trees (default 20).

Memory: gbml's figure is the engine's own peak (every byte it allocates is
counted against its budget), collect included, the driver's input array not.
A peer's figure is its process's peak resident memory during dataset
construction + training, less the resident memory once the input array was
loaded (ru_maxrss before and after).  The floor printed beside them is the
bins (N x D bytes) plus gbml's per-row training state.

Usage: python3 tests/bench/boost_memory_bench.py [--rows N] [--features D]
       [--trees 20] [--threads 2] [--skip-peers]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from boost_speed_bench import BIN, build_gbml, ensure_data, peer_env, venv_python  # noqa: E402

PEER_CODE = r"""
import json, resource, sys, time
import numpy as np
args = json.loads(sys.argv[1])
with open(args["data"], "rb") as f:
    n, d = np.fromfile(f, dtype=np.int64, count=2)
    X = np.fromfile(f, dtype=np.float32, count=n * d).reshape(n, d)
    y = np.fromfile(f, dtype=np.float32, count=n)
T, trees = args["threads"], args["trees"]
if args["engine"] == "xgboost":
    import xgboost as xgb
    version = xgb.__version__
else:
    import lightgbm as lgb
    version = lgb.__version__
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
if args["engine"] == "xgboost":
    params = {"tree_method": "hist", "max_depth": 6, "max_bin": 33, "eta": 0.1, "lambda": 3.0,
              "objective": "reg:squarederror", "nthread": T, "verbosity": 0}
    xgb.train(params, xgb.QuantileDMatrix(X, label=y, max_bin=33, nthread=T), num_boost_round=trees)
else:
    params = {"objective": "regression", "num_leaves": 64, "max_depth": 6, "max_bin": 32,
              "learning_rate": 0.1, "lambda_l2": 3.0, "num_threads": T, "verbose": -1}
    lgb.train(params, lgb.Dataset(X, label=y, params={"max_bin": 32, "verbose": -1}, free_raw_data=True),
              num_boost_round=trees)
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("PEER " + json.dumps({"version": version, "peak_mb": (peak - base) / 1024.0, "seconds": wall}), flush=True)
"""


def run_gbml(exe, data, args, spill):
    cmd = [exe, "--data", data, "--threads", str(args.threads), "--trees", str(args.trees), "--depth", "6",
           "--borders", "32", "--score-trees", "0", "--repeat", "1", "--spill", "1" if spill else "0"]
    res = {}
    for line in subprocess.check_output(cmd, text=True).splitlines():
        if line.startswith("RESULT "):
            _, k, v = line.split(None, 2)
            res[k] = v
        elif line.startswith("REPORT "):
            res["report"] = json.loads(line[7:])
    return res


def run_peer(py, engine, data, args):
    a = {"engine": engine, "data": data, "threads": args.threads, "trees": args.trees}
    out = subprocess.check_output([py, "-c", PEER_CODE, json.dumps(a)], text=True, env=peer_env())
    for line in out.splitlines():
        if line.startswith("PEER "):
            return json.loads(line[5:])
    raise RuntimeError(f"{engine}: no result")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--trees", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-peers", action="store_true")
    args = ap.parse_args()
    py = venv_python()
    data = ensure_data(py, args.rows, args.features)
    exe = build_gbml()
    n, d = args.rows, args.features
    bins_mb = n * d / 2**20
    # boost.c's per-row state: pred, grad, hess (double), gq, hq (int64), leaf (uint16), label (float),
    # and the dataset's per-row label, group, weight, hash (4 + 8 + 4 + 8)
    state_mb = n * (8 * 3 + 8 * 2 + 2 + 4 + 24) / 2**20
    print(f"{n:,} rows x {d} features, {args.trees} trees, depth 6, 32 borders, {args.threads} threads")
    print(f"bins {bins_mb:.0f} MB + per-row state {state_mb:.0f} MB = {bins_mb + state_mb:.0f} MB "
          f"(goal: gbml's peak <= 1.5x = {1.5 * (bins_mb + state_mb):.0f} MB)\n")
    print(f"{'engine':34} {'peak MB':>8} {'x (bins+state)':>15} {'seconds':>8}")
    rows = []
    for spill in (False, True):
        r = run_gbml(exe, data, args, spill)
        name = "gbml, features in temporary files" if spill else "gbml, features in memory"
        secs = float(r["train_seconds"]) + float(r["load_seconds"])
        rows.append((name, float(r["peak_memory_mb"]), secs, r["model_fnv"]))
    if not args.skip_peers:
        for engine in ("xgboost", "lightgbm"):
            p = run_peer(py, engine, data, args)
            rows.append((f"{engine} {p['version']}", p["peak_mb"], p["seconds"], None))
    for name, peak, secs, _ in rows:
        print(f"{name:34} {peak:8.0f} {peak / (bins_mb + state_mb):15.2f} {secs:8.1f}")
    print(f"\ngbml model bytes the same in memory and spilled: {rows[0][3] == rows[1][3]}")
    print("(gbml: engine allocations incl. collect; peers: process peak RSS above the loaded input array)")


if __name__ == "__main__":
    main()
