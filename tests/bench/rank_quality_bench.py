#!/usr/bin/env python3
"""rank_quality_bench.py — ranking quality of gbml's boosted oblivious trees
(YetiRank and LambdaMART losses) next to XGBoost rank:ndcg, LightGBM lambdarank
and CatBoost YetiRank, on real learning-to-rank data:

  * MQ2008 (LETOR 4.0), the five standard folds: fold i trains on three
    partitions, validates on the next and tests on the one after
    (fold1: train S1,S2,S3  vali S4  test S5; fold2: S2,S3,S4 / S5 / S1; ...);
  * the LightGBM lambdarank example (train.csv -> test.csv, no validation set).

Every system gets the same number of trees, depth 6 and learning rate, runs on
2 threads, and is scored by ONE shared NDCG implementation (ndcg_at_k below):
exponential gain 2^rel - 1, discount 1/log2(1 + position), ties broken by
original row order, and a query with no relevant document counts 1.

gbml runs through tests/bench/bin/bench_rank (built by tests/bench/bench.mk from
src/core and tests/bench/bench_rank.c); it prints test scores that this script
evaluates.
Peers come from the venv of tests/bench/venv.sh; the script re-executes itself
there with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed from the environment.

usage: rank_quality_bench.py [--trees 300] [--lr 0.1] [--depth 6]
                             [--early-stopping 50 | --no-early-stopping]
                             [--folds 1,2,3,4,5] [--datasets mq2008,lgbm]
                             [--systems gbml-yetirank,gbml-lambdamart,xgboost,lightgbm,catboost]
                             [--repeats 1] [--seed 0] [--seeds 1] [--gbml-bin PATH]
                             [--gbml-param KEY=VALUE ...]

--seeds N trains every system with the seeds seed .. seed+N-1 and scores a task
by the mean NDCG over them: on LightGBM-lambdarank's 50 test queries one seed's
NDCG moves by about +-0.01 for the randomised systems (gbml YetiRank, CatBoost).
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
DATA = os.path.abspath(os.path.join(REPO, "..", "shared", "data"))
BIN = os.path.join(HERE, "bin", "bench_rank")
THREADS = 2
ALL_SYSTEMS = ["gbml-yetirank", "gbml-lambdamart", "xgboost", "lightgbm", "catboost"]


def reexec_in_venv():
    """Run again under the bench venv's python, with the OpenBLAS overrides unset."""
    if os.environ.get("GBML_RANK_BENCH_CHILD") == "1":
        return
    py = subprocess.run(["bash", os.path.join(HERE, "venv.sh")], check=True,
                        capture_output=True, text=True).stdout.strip()
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    env["GBML_RANK_BENCH_CHILD"] = "1"
    os.execve(py, [py, os.path.abspath(__file__)] + sys.argv[1:], env)


# --------------------------------------------------------------------- data

def load_csv(paths):
    """LETOR CSV(s) `qid,label,f1..fN` -> (X float32, y float32, qid int64, group sizes)."""
    import numpy as np
    parts = [np.loadtxt(p, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2) for p in paths]
    a = np.vstack(parts)
    qid = a[:, 0].astype(np.int64)
    y = a[:, 1].astype(np.float32)
    X = a[:, 2:].astype(np.float32)
    # rows of one query are contiguous; group sizes in file order
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    sizes = np.diff(np.r_[starts, len(qid)])
    if len(np.unique(qid)) != len(sizes):
        raise SystemExit(f"{paths}: rows of a query are not contiguous")
    return X, y, qid, sizes


# ------------------------------------------------------------------- metric

def ndcg_at_k(scores, labels, sizes, k=10):
    """Mean NDCG@k over queries: gain 2^rel-1, discount 1/log2(1+pos), ties by
    row order (stable sort), a query with no relevant document counts 1."""
    import numpy as np
    out = []
    off = 0
    for m in sizes:
        s = np.asarray(scores[off:off + m], dtype=np.float64)
        y = np.asarray(labels[off:off + m], dtype=np.float64)
        off += m
        kk = m if k <= 0 else min(k, m)
        disc = 1.0 / np.log2(np.arange(kk) + 2.0)
        order = np.argsort(-s, kind="stable")
        dcg = float(np.sum((np.exp2(y[order[:kk]]) - 1.0) * disc))
        ideal = float(np.sum((np.exp2(np.sort(y)[::-1][:kk]) - 1.0) * disc))
        out.append(dcg / ideal if ideal > 0 else 1.0)
    return float(np.mean(out))


def self_test_metric():
    """The shared metric on the hand example of tests/unit/test_metrics.c."""
    import math
    l3 = 1.0 / math.log2(3.0)
    got = ndcg_at_k([0.1, 0.9, 0.5], [2, 0, 1], [3], 0)
    want = (l3 + 1.5) / (3.0 + l3)
    assert abs(got - want) < 1e-12, (got, want)
    assert ndcg_at_k([1, 2, 3], [0, 0, 0], [3], 10) == 1.0
    assert abs(ndcg_at_k([1, 1], [0, 1], [2], 0) - l3) < 1e-12   # tie: row order


# ------------------------------------------------------------------ systems

def build_gbml():
    """Build bench_rank with tests/bench/bench.mk (the engine's CORE_SOURCES); a note if it fails."""
    r = subprocess.run(["make", "-s", "-f", "tests/bench/bench.mk", "tests/bench/bin/bench_rank"],
                       cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        return "bench_rank does not build:\n" + (r.stdout + r.stderr)[-3000:]
    return None


def run_gbml(loss, task, cfg, workdir):
    import numpy as np
    out = os.path.join(workdir, "scores.txt")
    cmd = [BIN, "--train", ",".join(task["train_files"]), "--test", ",".join(task["test_files"]),
           "--out", out, "--threads", str(THREADS),
           f"loss={loss}", f"iterations={cfg.trees}", f"learning_rate={cfg.lr}",
           f"depth={cfg.depth}", f"random_seed={cfg.seed}"] + list(cfg.gbml_param)
    if task["vali_files"] and cfg.early_stopping > 0:
        cmd[3:3] = ["--eval", ",".join(task["vali_files"])]
        cmd += [f"early_stopping_rounds={cfg.early_stopping}", "use_best_model=true",
                "eval_metric=NDCG", "eval_k=10"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip()[-2000:])
    info = json.loads(r.stdout.strip().splitlines()[-1])
    scores = np.loadtxt(out, dtype=np.float64, ndmin=1)
    trees = find_trees(info.get("info", {}))
    return scores, info.get("train_seconds", wall), trees


def find_trees(info):
    """Best-effort: the number of trees the gbml model kept (from its META)."""
    def walk(o):
        if isinstance(o, dict):
            if isinstance(o.get("trees"), (int, float)):
                return int(o["trees"])
            for v in o.values():
                t = walk(v)
                if t is not None:
                    return t
        return None
    return walk(info)


def run_xgboost(task, cfg, data):
    import xgboost as xgb
    Xtr, ytr, _, gtr = data["train"]
    Xte = data["test"][0]
    params = {"objective": "rank:ndcg", "tree_method": "hist", "max_depth": cfg.depth,
              "eta": cfg.lr, "nthread": THREADS, "eval_metric": "ndcg@10", "seed": cfg.seed}
    dtr = xgb.DMatrix(Xtr, label=ytr)
    dtr.set_group(gtr)
    evals, es = [], None
    if data.get("vali") is not None and cfg.early_stopping > 0:
        Xv, yv, _, gv = data["vali"]
        dv = xgb.DMatrix(Xv, label=yv)
        dv.set_group(gv)
        evals = [(dv, "vali")]
        es = cfg.early_stopping
    t0 = time.perf_counter()
    bst = xgb.train(params, dtr, num_boost_round=cfg.trees, evals=evals,
                    early_stopping_rounds=es, verbose_eval=False)
    t = time.perf_counter() - t0
    if es:
        it = bst.best_iteration + 1
        s = bst.predict(xgb.DMatrix(Xte), iteration_range=(0, it))
    else:
        it = cfg.trees
        s = bst.predict(xgb.DMatrix(Xte))
    return s, t, it


def run_lightgbm(task, cfg, data):
    import lightgbm as lgb
    Xtr, ytr, _, gtr = data["train"]
    Xte = data["test"][0]
    params = {"objective": "lambdarank", "num_leaves": 64, "max_depth": cfg.depth,
              "learning_rate": cfg.lr, "num_threads": THREADS, "metric": "ndcg",
              "eval_at": [10], "verbose": -1, "seed": cfg.seed, "deterministic": True,
              "force_row_wise": True}
    dtr = lgb.Dataset(Xtr, label=ytr, group=gtr)
    valid, callbacks = [], []
    if data.get("vali") is not None and cfg.early_stopping > 0:
        Xv, yv, _, gv = data["vali"]
        valid = [lgb.Dataset(Xv, label=yv, group=gv, reference=dtr)]
        callbacks = [lgb.early_stopping(cfg.early_stopping, verbose=False)]
    t0 = time.perf_counter()
    bst = lgb.train(params, dtr, num_boost_round=cfg.trees, valid_sets=valid, callbacks=callbacks)
    t = time.perf_counter() - t0
    it = bst.best_iteration if (valid and bst.best_iteration > 0) else cfg.trees
    s = bst.predict(Xte, num_iteration=it)
    return s, t, it


def run_catboost(task, cfg, data):
    from catboost import CatBoost, Pool
    Xtr, ytr, qtr, _ = data["train"]
    Xte = data["test"][0]
    params = {"loss_function": "YetiRank", "iterations": cfg.trees, "depth": cfg.depth,
              "learning_rate": cfg.lr, "thread_count": THREADS, "random_seed": cfg.seed,
              "eval_metric": "NDCG:top=10;type=Exp", "verbose": False,
              "allow_writing_files": False}
    ptr = Pool(Xtr, label=ytr, group_id=qtr)
    kw = {}
    if data.get("vali") is not None and cfg.early_stopping > 0:
        Xv, yv, qv, _ = data["vali"]
        kw = {"eval_set": Pool(Xv, label=yv, group_id=qv),
              "early_stopping_rounds": cfg.early_stopping, "use_best_model": True}
    m = CatBoost(params)
    t0 = time.perf_counter()
    m.fit(ptr, **kw)
    t = time.perf_counter() - t0
    s = m.predict(Xte)
    return s, t, m.tree_count_


def run_system(sysname, task, cfg, data):
    """(test scores, train seconds, trees) of one system on one task."""
    if sysname.startswith("gbml"):
        loss = "YetiRank" if sysname == "gbml-yetirank" else "LambdaMART"
        with tempfile.TemporaryDirectory() as wd:
            return run_gbml(loss, task, cfg, wd)
    if sysname == "xgboost":
        return run_xgboost(task, cfg, data)
    if sysname == "lightgbm":
        return run_lightgbm(task, cfg, data)
    if sysname == "catboost":
        return run_catboost(task, cfg, data)
    raise SystemExit(f"unknown system {sysname}")


# -------------------------------------------------------------------- tasks

def tasks_for(name):
    if name == "mq2008":
        d = os.path.join(DATA, "mq2008")
        if not os.path.exists(os.path.join(d, "S1.csv")):
            return None
        out = []
        for fold in range(1, 6):
            parts = [((fold - 1 + i) % 5) + 1 for i in range(5)]
            out.append({"dataset": "MQ2008", "fold": fold,
                        "train_files": [os.path.join(d, f"S{p}.csv") for p in parts[:3]],
                        "vali_files": [os.path.join(d, f"S{parts[3]}.csv")],
                        "test_files": [os.path.join(d, f"S{parts[4]}.csv")]})
        return out
    if name == "lgbm":
        d = os.path.join(DATA, "lightgbm_lambdarank")
        if not os.path.exists(os.path.join(d, "train.csv")):
            return None
        return [{"dataset": "LightGBM-lambdarank", "fold": 1,
                 "train_files": [os.path.join(d, "train.csv")], "vali_files": [],
                 "test_files": [os.path.join(d, "test.csv")]}]
    raise SystemExit(f"unknown dataset {name}")


def main():
    reexec_in_venv()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--early-stopping", type=int, default=50,
                    help="patience in trees on the validation partition (all systems); 0 = none")
    ap.add_argument("--no-early-stopping", action="store_true")
    ap.add_argument("--folds", default="1,2,3,4,5")
    ap.add_argument("--datasets", default="mq2008,lgbm")
    ap.add_argument("--systems", default=",".join(ALL_SYSTEMS))
    ap.add_argument("--repeats", type=int, default=1, help="timing repeats (median reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=1,
                    help="train with seeds seed..seed+N-1; a task's NDCG is their mean")
    ap.add_argument("--gbml-param", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra gbml boost parameter (repeatable), e.g. border_type=GreedyLogSum")
    ap.add_argument("--gbml-bin", default=None,
                    help="use this prebuilt bench_rank instead of building one from core_sources.mk")
    cfg = ap.parse_args()
    if cfg.no_early_stopping:
        cfg.early_stopping = 0

    import numpy as np
    import threadpoolctl
    self_test_metric()
    blas = [f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} threads={i.get('num_threads')}"
            for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
    print("BLAS (threadpoolctl):", "; ".join(blas) or "none loaded")
    import xgboost, lightgbm, catboost
    print(f"peers: xgboost {xgboost.__version__}, lightgbm {lightgbm.__version__}, "
          f"catboost {catboost.__version__}; numpy {np.__version__}; threads {THREADS}")

    systems = [s for s in cfg.systems.split(",") if s]
    gbml_note = None
    if any(s.startswith("gbml") for s in systems):
        if cfg.gbml_bin:
            global BIN
            BIN = os.path.abspath(cfg.gbml_bin)
        gbml_note = None if cfg.gbml_bin else build_gbml()
        if gbml_note:
            print("gbml skipped:", gbml_note)
            systems = [s for s in systems if not s.startswith("gbml")]
    folds = {int(f) for f in cfg.folds.split(",") if f}
    es_txt = (f"early stopping on the validation partition (patience {cfg.early_stopping}, "
              f"each system's own NDCG@10, best iteration kept) for ALL systems where a "
              f"validation partition exists (MQ2008); none on LightGBM-lambdarank"
              if cfg.early_stopping > 0 else "no early stopping for any system")
    print(f"settings: {cfg.trees} trees, depth {cfg.depth}, learning rate {cfg.lr}; {es_txt}; "
          f"LightGBM num_leaves=64,max_depth={cfg.depth}; XGBoost hist,max_depth={cfg.depth}; "
          f"CatBoost YetiRank depth {cfg.depth}; gbml at its defaults (border_count 32; "
          f"l2_leaf_reg 0 for YetiRank, 3 for LambdaMART); peers at their default bins; "
          f"seeds {cfg.seed}..{cfg.seed + max(1, cfg.seeds) - 1} (NDCG = mean over seeds)")

    results = {}   # (dataset, system) -> list of (fold, ndcg, seconds, trees)
    for dname in [d for d in cfg.datasets.split(",") if d]:
        tasks = tasks_for(dname)
        if tasks is None:
            print(f"dataset {dname}: not found under {DATA}, skipped")
            continue
        for task in tasks:
            if task["dataset"] == "MQ2008" and task["fold"] not in folds:
                continue
            data = {"train": load_csv(task["train_files"]), "test": load_csv(task["test_files"]),
                    "vali": load_csv(task["vali_files"]) if task["vali_files"] else None}
            yte, gte = data["test"][1], data["test"][3]
            for sysname in systems:
                nds, times, trees, failed = [], [], [], False
                for k in range(max(1, cfg.seeds)):
                    scfg = copy.copy(cfg)
                    scfg.seed = cfg.seed + k
                    runs = []
                    for _ in range(max(1, cfg.repeats)):
                        try:
                            scores, t, tr = run_system(sysname, task, scfg, data)
                        except RuntimeError as e:
                            print(f"{task['dataset']} fold {task['fold']} {sysname}: FAILED: {e}")
                            failed = True
                            break
                        runs.append(t)
                    if failed:
                        break
                    nds.append(ndcg_at_k(scores, yte, gte, 10))
                    times.append(float(np.median(runs)))
                    trees.append(tr)
                if failed:
                    continue
                nd = float(np.mean(nds))
                tr = None if any(t is None for t in trees) else float(np.mean(trees))
                results.setdefault((task["dataset"], sysname), []).append(
                    (task["fold"], nd, float(np.median(times)), tr))
                over = (f"  seeds: sd {np.std(nds):.4f}, min {min(nds):.4f}, max {max(nds):.4f}"
                        if len(nds) > 1 else "")
                print(f"  {task['dataset']:<20} fold {task['fold']}  {sysname:<16} "
                      f"NDCG@10 {nd:.4f}  train {np.median(times):7.2f}s  trees "
                      f"{'-' if tr is None else f'{tr:.0f}'}{over}", flush=True)

    # ------------------------------------------------------------ the table
    print()
    print(f"{'dataset':<20} {'system':<16} {'test NDCG@10':>12} {'±sd':>6} {'vs LightGBM':>11} "
          f"{'vs CatBoost':>11} {'train s':>8} {'time vs LGBM':>12} {'trees':>7}  per fold")
    for dname in ["MQ2008", "LightGBM-lambdarank"]:
        ref = {}
        for peer in ("lightgbm", "catboost"):
            r = results.get((dname, peer))
            if r:
                ref[peer] = (np.mean([x[1] for x in r]), np.mean([x[2] for x in r]))
        for sysname in systems:
            r = results.get((dname, sysname))
            if not r:
                continue
            nd = np.array([x[1] for x in r])
            tm = np.mean([x[2] for x in r])
            tr = [x[3] for x in r]
            vl = f"{nd.mean() / ref['lightgbm'][0]:.3f}" if "lightgbm" in ref else "-"
            vc = f"{nd.mean() / ref['catboost'][0]:.3f}" if "catboost" in ref else "-"
            tl = f"{tm / ref['lightgbm'][1]:.2f}x" if "lightgbm" in ref else "-"
            trees = "-" if any(t is None for t in tr) else f"{np.mean(tr):.0f}"
            print(f"{dname:<20} {sysname:<16} {nd.mean():>12.4f} {nd.std():>6.4f} {vl:>11} {vc:>11} "
                  f"{tm:>8.2f} {tl:>12} {trees:>7}  " + " ".join(f"{x:.4f}" for x in nd))
    print()
    print("NDCG@10 by one shared implementation for all systems: gain 2^rel-1, discount "
          "1/log2(1+position), ties in score broken by original row order, and a query with "
          "NO relevant document counts 1 (MQ2008 has such queries, so absolute values are "
          "higher than with the 'skip'/'count 0' conventions).")
    print(f"MQ2008: mean ± sd over the {len(folds)} LETOR fold(s) listed; each fold trains on 3 "
          "partitions, validates on 1, tests on 1. Times: median of --repeats runs, 2 threads, "
          "on a shared machine (noisy); gbml's time is its gbml_train call, peers' their fit call.")
    if cfg.seeds > 1:
        print(f"Every NDCG above is the mean over {cfg.seeds} seeds (the per-task lines give their "
              "spread); XGBoost and LightGBM sample nothing here, so their seeds agree.")
    if gbml_note:
        print("gbml not measured:", gbml_note)


if __name__ == "__main__":
    main()
