#!/usr/bin/env python3
"""boost_speed_bench.py — training and scoring speed of gbml's boosted oblivious
trees against XGBoost (tree_method="hist") and LightGBM, on the same data in
one run.

Data: synthetic, fixed seed: N rows x D float32 features (default 1,000,000 x
100, standard normal), label = a nonlinear function of a few features + noise.
It is written once to tests/bench/bin/ (git-ignored) and read by every engine.

Training: depth 6, 32 borders (XGBoost max_bin=33, LightGBM max_bin=32),
100 trees, learning rate 0.1, L2 3, RMSE, 2 threads.  Reported: total train
time (including each engine's own binning) and the median time per tree
(from per-iteration callbacks; the first tree, which carries the setup, is
left out).

Scoring: a 500-tree depth-6 model trained on the first 100,000 rows, then
every one of the N rows scored in-process; rows/s with 1 thread (per core)
and with 2 threads.  gbml also shows its single-row scorer (the SQL path).

MultiClass (--classes K, K >= 2): the same data and settings, but the label is
the synthetic y bucketed into K classes at its quantiles (balanced classes,
ids 0 .. K-1; written to its own file, boost_data_NxD_cK.bin).  gbml trains
"loss": "MultiClass" (classes_count K), XGBoost "multi:softprob" (num_class K,
hist, max_bin 33), LightGBM "multiclass" (num_class K, max_bin 32), CatBoost
(with --catboost) "MultiClass".  Every engine trains on the first rows and is
evaluated on the same held-out tail (the last --test-frac, default 20%, of the
rows): multiclass logloss (probabilities clipped to [1e-15, 1 - 1e-15]) and
accuracy.  --trees counts iterations, each of K trees (one per class), as the
peers' num_boost_round does.  Reported per engine: total train time, the
median time per iteration (first left out) and per tree (that / K), the test
logloss / accuracy, and the ratios gbml / XGBoost and gbml / LightGBM of the
train time and the time per iteration (above 1: gbml slower).  Scoring: a
--score-trees-iteration MultiClass model (K trees each) on the first
--score-train-rows rows, then every row's K probabilities: gbml's single-row
class scorer (gbml_scorer_classes; the batch scorer is for single-score
forests), the peers' batch predict with 1 and 2 threads.

Usage: python3 tests/bench/boost_speed_bench.py [--rows N] [--features D]
       [--trees 100] [--score-trees 500] [--threads 2] [--repeat 3] [--skip-peers]
       [--catboost]   (CatBoost too: the same oblivious-tree design, a quality reference)
       [--classes K [--test-frac 0.2]]   (MultiClass, above)
The peers run in the venv of tests/bench/venv.sh (GBML_BENCH_VENV, else the
repository's .bench-venv, else -- in a git worktree that has none -- the main
worktree's .bench-venv).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
BIN = os.path.join(HERE, "bin")



def venv_python():
    return subprocess.check_output(["bash", os.path.join(HERE, "venv.sh")], text=True).strip()


def peer_env():
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    return env


# ---------------------------------------------------------------- data

GEN_CODE = r"""
import numpy as np, sys
n, d, path, k = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rng = np.random.default_rng(20240601)
X = rng.standard_normal((n, d), dtype=np.float32)
y = (X[:, 0] * X[:, 1] + np.sin(X[:, 2]) + 2.0 * (X[:, 3] > 0.3) + 0.5 * X[:, 4] ** 2
     + 0.3 * X[:, 5] - 0.2 * np.abs(X[:, 6]) + 0.5 * rng.standard_normal(n)).astype(np.float32)
if k >= 2:   # MultiClass: y's K quantile buckets, class ids 0 .. K-1
    cuts = np.quantile(y, np.arange(1, k) / k)
    y = np.searchsorted(cuts, y, side="right").astype(np.float32)
with open(path + ".tmp", "wb") as f:
    np.array([n, d], dtype=np.int64).tofile(f)
    X.tofile(f)
    y.tofile(f)
import os; os.replace(path + ".tmp", path)
"""


def ensure_data(py, n, d, classes=0):
    os.makedirs(BIN, exist_ok=True)
    path = os.path.join(BIN, f"boost_data_{n}x{d}" + (f"_c{classes}" if classes >= 2 else "") + ".bin")
    if not os.path.exists(path):
        print(f"generating {n} x {d} synthetic rows" + (f" ({classes} classes)" if classes >= 2 else "")
              + f" -> {path}", flush=True)
        subprocess.check_call([py, "-c", GEN_CODE, str(n), str(d), path, str(classes)], env=peer_env())
    return path


# ---------------------------------------------------------------- gbml

def build_gbml():
    subprocess.check_call(["make", "-s", "-f", "tests/bench/bench.mk", "tests/bench/bin/bench_boost"], cwd=REPO)
    return os.path.join(BIN, "bench_boost")


def run_gbml(exe, data, args, trees, score_trees):
    cmd = [exe, "--data", data, "--threads", str(args.threads), "--trees", str(trees),
           "--depth", "6", "--borders", "32", "--score-trees", str(score_trees),
           "--score-train-rows", str(args.score_train_rows), "--repeat", str(args.repeat)]
    if args.classes >= 2:
        cmd += ["--classes", str(args.classes), "--test-rows", str(args.test_rows)]
    out = subprocess.check_output(cmd, text=True)
    res = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            _, k, v = line.split(None, 2)
            try:
                res[k] = float(v)
            except ValueError:   # model_fnv: a hex hash
                res[k] = v
        elif line.startswith("REPORT "):
            res["report"] = json.loads(line[7:])
    return res


# ---------------------------------------------------------------- peers

PEER_CODE = r"""
import json, sys, time
import numpy as np
from threadpoolctl import threadpool_info
args = json.loads(sys.argv[1])
blas = [(i.get("internal_api"), i.get("architecture"), i.get("version")) for i in threadpool_info()
        if i.get("internal_api") in ("openblas", "mkl", "blis")]
print("PEER blas " + json.dumps(blas), flush=True)
with open(args["data"], "rb") as f:
    n, d = np.fromfile(f, dtype=np.int64, count=2)
    X = np.fromfile(f, dtype=np.float32, count=n * d).reshape(n, d)
    y = np.fromfile(f, dtype=np.float32, count=n)
T = args["threads"]; trees = args["trees"]; st = args["score_trees"]; m = args["score_train_rows"]
rep = args["repeat"]
K = args.get("classes", 0)             # MultiClass when >= 2: y holds class ids
nt = n - args.get("test_rows", 0)      # training rows; the rest is the held-out tail
Xtr, ytr = X[:nt], y[:nt]
res = {}

times = []   # the engines' per-iteration callbacks append time.perf_counter() here

def median(v):
    v = sorted(v); return v[len(v) // 2]

def timed_train(fit, predict):
    # fit() builds the engine's dataset (its own binning) and trains: timed as a whole;
    # per-iteration times from `times` (K trees an iteration with classes); then the
    # train RMSE of predict(model) on all rows, or (classes) the multiclass logloss and
    # accuracy of predict(model) = class probabilities on the held-out tail X[nt:]
    times.clear()
    t0 = time.perf_counter()
    model = fit()
    res["train_seconds"] = time.perf_counter() - t0
    dts = [b - a for a, b in zip(times, times[1:])]
    k = K if K >= 2 else 1
    res["iter_seconds_median"] = median(dts)
    res["iter_seconds_min"] = min(dts)
    res["tree_seconds_median"] = median(dts) / k
    res["tree_seconds_min"] = min(dts) / k
    if K >= 2:
        P = np.asarray(predict(model, X[nt:]), dtype=np.float64).reshape(n - nt, K)
        yt = y[nt:].astype(np.int64)
        pt = np.clip(P[np.arange(n - nt), yt], 1e-15, 1 - 1e-15)
        res["test_logloss"] = float(-np.mean(np.log(pt)))
        res["test_accuracy"] = float(np.mean(np.argmax(P, axis=1) == yt))
    else:
        p = predict(model, X)
        res["train_rmse"] = float(np.sqrt(np.mean((p - y) ** 2)))

def score_speed(pred1, predT):
    b1 = bT = 1e30
    for _ in range(rep):
        t0 = time.perf_counter(); pred1(); b1 = min(b1, time.perf_counter() - t0)
        t0 = time.perf_counter(); predT(); bT = min(bT, time.perf_counter() - t0)
    return n / b1, n / bT

if args["engine"] == "xgboost":
    import xgboost as xgb
    res["version"] = xgb.__version__
    params = {"tree_method": "hist", "max_depth": 6, "max_bin": 33, "eta": 0.1, "lambda": 3.0,
              "objective": "reg:squarederror", "nthread": T, "grow_policy": "depthwise",
              "min_child_weight": 0, "verbosity": 0}
    if K >= 2:
        params.update(objective="multi:softprob", num_class=K)
    class Rec(xgb.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            times.append(time.perf_counter()); return False
    if trees > 0:
        timed_train(lambda: xgb.train(params, xgb.DMatrix(Xtr, label=ytr, nthread=T), num_boost_round=trees,
                                      callbacks=[Rec()]),
                    lambda bst, Xe: bst.inplace_predict(Xe))
    if st > 0:
        ds = xgb.DMatrix(X[:m], label=y[:m], nthread=T)
        bst = xgb.train(params, ds, num_boost_round=st)
        def p1():
            bst.set_param({"nthread": 1}); bst.inplace_predict(X)
        def pT():
            bst.set_param({"nthread": T}); bst.inplace_predict(X)
        res["score_1"], res["score_T"] = score_speed(p1, pT)
elif args["engine"] == "lightgbm":
    import lightgbm as lgb
    res["version"] = lgb.__version__
    params = {"objective": "regression", "num_leaves": 64, "max_depth": 6, "max_bin": 32,
              "learning_rate": 0.1, "lambda_l2": 3.0, "num_threads": T, "min_data_in_leaf": 20,
              "min_sum_hessian_in_leaf": 0, "verbose": -1, "deterministic": False}
    if K >= 2:
        params.update(objective="multiclass", num_class=K)
    if args.get("lgb_layout"):
        params[args["lgb_layout"]] = True
    def rec(env):
        times.append(time.perf_counter())
    if trees > 0:
        timed_train(lambda: lgb.train(params, lgb.Dataset(Xtr, label=ytr, params={"max_bin": 32, "verbose": -1}),
                                      num_boost_round=trees, callbacks=[rec]),
                    lambda bst, Xe: bst.predict(Xe, num_threads=T))
    if st > 0:
        ds = lgb.Dataset(X[:m], label=y[:m], params={"max_bin": 32, "verbose": -1})
        bst = lgb.train(params, ds, num_boost_round=st)
        res["score_1"], res["score_T"] = score_speed(lambda: bst.predict(X, num_threads=1),
                                                     lambda: bst.predict(X, num_threads=T))
elif args["engine"] == "catboost":
    import catboost as cb
    res["version"] = cb.__version__
    # the same design as gbml (oblivious trees): no bootstrap, no random strength, like gbml
    params = dict(iterations=trees, depth=6, learning_rate=0.1, l2_leaf_reg=3.0, border_count=32,
                  loss_function="RMSE", thread_count=T, random_strength=0, bootstrap_type="No",
                  verbose=0, allow_writing_files=False)
    Model = cb.CatBoostRegressor
    if K >= 2:
        params.update(loss_function="MultiClass", classes_count=K)
        Model = cb.CatBoostClassifier
    pred = (lambda model, Xe, t: model.predict_proba(Xe, thread_count=t)) if K >= 2 else \
        (lambda model, Xe, t: model.predict(Xe, thread_count=t))
    class Rec:
        def after_iteration(self, info):
            times.append(time.perf_counter()); return True
    if trees > 0:
        timed_train(lambda: Model(**params).fit(Xtr, ytr, callbacks=[Rec()]),
                    lambda model, Xe: pred(model, Xe, T))
    if st > 0:
        params["iterations"] = st
        model = Model(**params)
        model.fit(X[:m], y[:m])
        res["score_1"], res["score_T"] = score_speed(lambda: pred(model, X, 1),
                                                     lambda: pred(model, X, T))
print("PEER result " + json.dumps(res), flush=True)
"""


def run_peer(py, engine, data, args, trees, score_trees, extra=None):
    a = {"engine": engine, "data": data, "threads": args.threads, "trees": trees,
         "score_trees": score_trees, "score_train_rows": args.score_train_rows,
         "repeat": args.repeat, "classes": args.classes,
         "test_rows": args.test_rows if args.classes >= 2 else 0}
    if extra:
        a.update(extra)
    out = subprocess.check_output([py, "-c", PEER_CODE, json.dumps(a)], text=True, env=peer_env())
    res = {}
    for line in out.splitlines():
        if line.startswith("PEER blas "):
            res["blas"] = json.loads(line[10:])
        elif line.startswith("PEER result "):
            res.update(json.loads(line[12:]))
    return res


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--score-trees", type=int, default=500)
    ap.add_argument("--score-train-rows", type=int, default=100000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="scoring timings per engine (best kept)")
    ap.add_argument("--train-repeat", type=int, default=2, help="training rounds per engine (best kept)")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--catboost", action="store_true",
                    help="also run CatBoost (same oblivious-tree design; not one of the required peers)")
    ap.add_argument("--classes", type=int, default=0,
                    help="MultiClass with K >= 2 classes (y's quantile buckets); 0: RMSE")
    ap.add_argument("--test-frac", type=float, default=0.2,
                    help="with --classes: the held-out tail every engine is evaluated on")
    args = ap.parse_args()
    if args.classes == 1 or args.classes < 0:
        ap.error("--classes is 0 (RMSE) or at least 2")
    args.test_rows = int(round(args.rows * args.test_frac)) if args.classes >= 2 else 0
    if args.classes >= 2 and not 0 < args.test_rows < args.rows:
        ap.error("--test-frac leaves no test or no training row")

    py = venv_python()
    data = ensure_data(py, args.rows, args.features, args.classes)
    exe = build_gbml()
    if args.classes >= 2:
        print(f"data: {args.rows} x {args.features}, MultiClass {args.classes} classes (y's quantile buckets), "
              f"train on the first {args.rows - args.test_rows} rows, test on the last {args.test_rows}; "
              f"depth 6, 32 borders, {args.trees} iterations x {args.classes} trees, {args.threads} threads; "
              f"scoring: {args.score_trees} iterations x {args.classes} trees", flush=True)
    else:
        print(f"data: {args.rows} x {args.features}, depth 6, 32 borders, {args.trees} trees, "
              f"{args.threads} threads; scoring: {args.score_trees} trees", flush=True)

    engines = ["gbml"]
    if not args.skip_peers:
        engines += ["xgboost", "lightgbm"] + (["catboost"] if args.catboost else [])

    def run(eng, trees, score_trees):
        if eng == "gbml":
            return run_gbml(exe, data, args, trees, score_trees)
        return run_peer(py, eng, data, args, trees, score_trees)

    # Training: the engines take turns, train_repeat rounds; each keeps its best round
    # (the machine is shared, so the least disturbed run is the fairest figure).
    results = {}
    for rnd in range(args.train_repeat):
        for eng in engines:
            t = time.time()
            try:
                r = run(eng, args.trees, 0)
            except subprocess.CalledProcessError as e:
                print(f"{eng} failed: {e}", flush=True)
                continue
            print(f"round {rnd + 1}: {eng} {r.get('version', '')} trained in {time.time() - t:.0f} s, "
                  + (f"median iteration {r.get('iter_seconds_median', float('nan')):.3f} s, "
                     if args.classes >= 2 else "")
                  + f"median tree {r.get('tree_seconds_median', float('nan')):.3f} s"
                  + (f"; BLAS seen by threadpoolctl: {r.get('blas')}" if 'blas' in r else ""), flush=True)
            if eng not in results or r.get("tree_seconds_median", 1e30) < results[eng].get("tree_seconds_median", 1e30):
                results[eng] = r
    # Scoring: one run each (repeat times inside, best kept).
    if args.score_trees > 0:
        for eng in engines:
            if eng not in results:
                continue
            t = time.time()
            try:
                r = run(eng, 0, args.score_trees)
            except subprocess.CalledProcessError as e:
                print(f"{eng} scoring failed: {e}", flush=True)
                continue
            print(f"{eng} scoring done in {time.time() - t:.0f} s", flush=True)
            for k, v in r.items():
                if k.startswith("score"):
                    results[eng][k] = v

    g = results["gbml"]
    T = args.threads
    if args.classes >= 2:
        print_multiclass(args, engines, results)
        return
    row = lambda name, r, k: r.get(k, float("nan"))
    print()
    print(f"{'engine':<10} {'train s':>9} {'s/tree':>8} {'best tree':>10} {'gbml x faster':>14} {'train RMSE':>11} "
          f"{'score rows/s 1 core':>20} {'gbml x faster':>14} {f'rows/s {T} thr':>14}")
    for name, r in ran(engines, results):
        s1, sT = score_rates(name, r, "score_batch_1thread_rows_per_s", f"score_batch_{T}threads_rows_per_s")
        tpt = r.get("tree_seconds_median", float("nan"))
        ratio_t = tpt / g["tree_seconds_median"] if name != "gbml" else 1.0
        ratio_s = g.get("score_batch_1thread_rows_per_s", float("nan")) / s1 if (name != "gbml" and s1) else 1.0
        print(f"{name:<10} {r.get('train_seconds', float('nan')):>9.2f} {tpt:>8.3f} "
              f"{r.get('tree_seconds_min', float('nan')):>10.3f} {ratio_t:>14.2f} "
              f"{r.get('train_rmse', float('nan')):>11.4f} {s1 or float('nan'):>20.0f} {ratio_s:>14.2f} "
              f"{sT or float('nan'):>14.0f}")
    if "score_single_1thread_rows_per_s" in g:
        print(f"gbml single-row scorer (SQL path), 1 core: {g['score_single_1thread_rows_per_s']:.0f} rows/s")
    print("s/tree: median over the trees of the best round (first tree, which carries setup, left out); "
          "train s: whole training including each engine's own binning.")
    rep = g.get("report", {}).get("timings", {})
    if rep:
        print("gbml timings: " + ", ".join(f"{k} {v:.3f}" for k, v in rep.items()))
    # the floor of a level's histogram pass: the bins it must read
    n, d = args.rows, args.features
    level_bytes = n * d + n * 16
    print(f"note: one full histogram pass reads {level_bytes / 1e6:.0f} MB of bins + gradients; at "
          f"~22 GB/s that is {level_bytes / 22e9 * 1e3:.1f} ms; gbml's median tree "
          f"({g['tree_seconds_median'] * 1e3:.0f} ms, 6 levels) is compute-bound, not bandwidth-bound.")


def ran(engines, results):
    """The engines that produced results, in the table's order, with them."""
    return [(name, results[name]) for name in engines if name in results]


def score_rates(name, r, gbml_1, gbml_T):
    """Rows/s scored on 1 core and on every thread: gbml's under the given keys (None: not run), a peer's."""
    if name == "gbml":
        return r.get(gbml_1), (r.get(gbml_T) if gbml_T else None)
    return r.get("score_1"), r.get("score_T")


def print_multiclass(args, engines, results):
    g = results["gbml"]
    T, K = args.threads, args.classes
    nan = float("nan")
    print()
    print(f"{'engine':<10} {'train s':>9} {'s/iter':>8} {'s/tree':>8} {'best iter':>10} "
          f"{'gbml/peer train s':>18} {'gbml/peer s/iter':>17} {'test logloss':>13} {'test acc':>9} "
          f"{'score rows/s 1 core':>20} {f'rows/s {T} thr':>14}")
    for name, r in ran(engines, results):
        s1, sT = score_rates(name, r, "score_classes_single_1thread_rows_per_s", None)
        ratio_t = g.get("train_seconds", nan) / r.get("train_seconds", nan)
        ratio_i = g.get("iter_seconds_median", nan) / r.get("iter_seconds_median", nan)
        print(f"{name:<10} {r.get('train_seconds', nan):>9.2f} {r.get('iter_seconds_median', nan):>8.3f} "
              f"{r.get('tree_seconds_median', nan):>8.4f} {r.get('iter_seconds_min', nan):>10.3f} "
              f"{ratio_t:>18.2f} {ratio_i:>17.2f} {r.get('test_logloss', nan):>13.4f} "
              f"{r.get('test_accuracy', nan):>9.4f} {s1 or nan:>20.0f} {sT or nan:>14.0f}")
    print(f"{K} classes, {args.trees} iterations = {args.trees * K} trees; trained on {args.rows - args.test_rows} "
          f"rows, test logloss / accuracy on the last {args.test_rows} rows (the same for every engine).")
    print("s/iter: median over the iterations of the best round (the first, which carries setup, left out); "
          f"s/tree: that / {K}; best iter: the fastest iteration; train s: whole training including each "
          "engine's own binning; gbml/peer above 1: gbml slower.")
    print("scoring: gbml's single-row class scorer (gbml_scorer_classes, 1 core; no batch scorer for "
          "MultiClass); the peers' batch predict of the K probabilities.")
    if "eval_classes_single_1thread_rows_per_s" in g:
        print(f"gbml single-row class scorer on the test rows with the {int(g.get('model_trees', 0))}-tree "
              f"trained model: {g['eval_classes_single_1thread_rows_per_s']:.0f} rows/s")
    rep = g.get("report", {}).get("timings", {})
    if rep:
        print(f"gbml timings (its report; an iteration is {K} trees): "
              + ", ".join(f"{k} {v:.3f}" for k, v in rep.items()))


if __name__ == "__main__":
    main()
