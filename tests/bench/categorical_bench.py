#!/usr/bin/env python3
"""categorical_bench.py — gbml's boosted oblivious trees on mixed-type tables
(numeric + categorical columns) next to CatBoost, LightGBM and XGBoost, all on
the same splits, scored by one shared metric implementation.

Data: ../shared/data/categorical (SOURCE.md beside the CSVs; CATEGORICAL_DATA
overrides the folder), tidymodels' modeldata tables.  Read with pandas
keep_default_na=False, na_values=[""]: the level "None" is a real category.

  dataset    rows  task                                   metric(s)
  mlc_churn  5000  binary, label 1 = churned              test AUC (higher is better) and
                                                           logloss (lower is better)
  ames       2930  regression on log(sale price)          test RMSE of log(price) (lower is
                                                           better); RMSE in dollars of
                                                           exp(prediction) beside it
  hpc_data   4331  binary: label_id >= 2, "moderate or    AUC and logloss as for mlc_churn
                   long" job (M or L) against VF or F
  hpc_multi  4331  multiclass: the same table's 4          test multiclass logloss (lower is
                   classes, label_id 0..3 = VF, F, M, L    better) and accuracy (higher is
                   (short name hpcmc)                      better)

Categorical columns are the text columns of the CSV (mlc_churn 4, ames 40,
hpc_data and hpc_multi 2: protocol with 14 categories, day with 7); every
library gets the same ones:
  * CatBoost: cat_features (its ordered target statistics), the strings as they are;
  * LightGBM: pandas category dtype + categorical_feature;
  * XGBoost: pandas category dtype, enable_categorical=True, tree_method "hist";
    (the category dtype's levels are the column's sorted values over the whole
    table, so train and test share one code book: no label is looked at);
  * gbml: the text columns of its PostgreSQL table (the column form of gbml.train
    treats text columns as categorical).

Protocol:
  * SEEDS seeds (default 20: seeds 1..20; or a list "3,7,11").  Seed s gives the
    80/20 train/test split (sklearn train_test_split(random_state=s), stratified
    by the label for the binary and multiclass tasks, plain random for ames)
    AND the model seed of every library.  gbml trains and scores on exactly the
    same row ids.
  * Equal settings: TREES trees (default 300), DEPTH (default 6), learning rate
    LR (default 0.05: one shared value, reasonable for all four at 300 trees),
    THREADS threads (default: all cores), no early stopping, no eval set.
    LightGBM grows leaf-wise: num_leaves = 2^DEPTH with max_depth = DEPTH, so its
    trees can be as big as a full depth-DEPTH tree but no bigger.
    Everything else is each library's default (recommended settings):
      CatBoost  border_count 254, l2_leaf_reg 3, one_hot_max_size 2, boosting
                type and leaf estimation as CatBoost picks them (recorded in the
                JSON: Plain, and 10 Newton steps per tree for Logloss here);
      LightGBM  max_bin 255, min_data_in_leaf 20, lambda_l2 0, its categorical
                defaults (max_cat_to_onehot 4, cat_smooth 10, ...);
      XGBoost   max_bin 256, lambda 1, max_cat_to_onehot default;
      gbml      border_count 32, l2_leaf_reg 3; CatBoost's border rule
                (border_type GreedyLogSum; gbml's default is Median, which
                measured better on the ranking benchmarks); for Logloss the
                same leaf estimation as CatBoost's (leaf_estimation_iterations
                10; gbml's own default is 1, for speed on large tables).
                MultiClass (hpc_multi): one Newton step a tree (gbml's
                leaf_estimation_iterations is for Logloss only; CatBoost
                picks 1 for MultiClass too, in the JSON), and gbml's default
                categories: one-hot up to 2, beyond that ordered target
                statistics, one a class (protocol's 14 and day's 7 categories
                take 4 each, and a counter), as CatBoost's MultiClass does.
      gbml-L2   (binary tasks) the same with Logloss's splits scored and
                noised as CatBoost's are (score_function L2, on the row
                weights, and random_strength 1; gbml's defaults, NewtonL2 on
                the hessians as XGBoost and LightGBM score, and no noise).
      gbml-Depthwise  (every task, MultiClass too: sets need no target
                statistics) trees that split per node, as XGBoost's,
                with XGBoost's settings where gbml has the knob (l2_leaf_reg 1,
                254 Median borders, one Newton step) and its categorical splits
                (one-hot up to 4 categories, sets of categories beyond:
                categorical_split sets); MultiClass with XGBoost's softmax
                hessian, 2 p (1 - p) (multiclass_hessian_factor 2; gbml's
                default is LightGBM's K/(K-1) p (1 - p), a step 1.5 x as long
                at K = 4).
      gbml-DW-noise  gbml-Depthwise with CatBoost's split noise
                (random_strength 1, CatBoost's default): XGBoost's tree shape
                and categories regularised as CatBoost regularises its splits.
                Each gbml line gets its own ratio line.
    BORDERS=n sets the quantisation of all four to n borders (CatBoost and gbml
    border_count n, LightGBM max_bin n, XGBoost max_bin n + 1).
  * Losses: Logloss (binary), RMSE (regression) for everyone.  Every model's raw
    score (log-odds for Logloss) is taken and turned into a probability here by
    one sigmoid, so AUC / logloss / RMSE come from one implementation
    (scikit-learn's roc_auc_score and log_loss, numpy for RMSE).
    Multiclass (K classes): softmax losses, K trees an iteration for everyone
    (CatBoost MultiClass, LightGBM multiclass with num_class K, XGBoost
    multi:softprob with num_class K, gbml MultiClass); each library's own
    softmax gives the N x K probability matrix (CatBoost prediction_type
    Probability, LightGBM's and XGBoost's predict, gbml.predict_classes), each
    row divided by its sum here (rounding only: XGBoost's are float32), then
    scikit-learn's log_loss (labels 0..K-1) and accuracy of the most probable
    class.
  * Train seconds: the library's own data structure built from the in-memory
    frame (Pool / Dataset / DMatrix) plus fit, wall clock.  gbml: the server's
    clock around the one gbml.train statement (reading the table, building its
    dataset, training, recording the model), no client start-up.
  * Reported per dataset and library: metric mean ± std over the seeds (sample
    std, n - 1), train seconds (mean, and the median: on a shared 2-core machine
    one slow run under contention moves the mean); then gbml / best peer for
    each metric and gbml / CatBoost for the train time (means; medians beside).
  * Paired by seed: the splits move every library's metric together (the seeds'
    std, 0.01-0.03, is ten times the libraries' gaps), so each gbml line is
    also compared with the best peer seed by seed: on how many seeds it is
    ahead, and the mean difference with its standard error; "AHEAD" or
    "BEHIND" only past twice that error, else "level".  With 5 seeds hpc_multi
    showed gbml-Depthwise 0.7% behind XGBoost; over 20, +0.0008 +- 0.0009, level:
    hence the default of 20 seeds (about 11 minutes here).

gbml (in PostgreSQL, through psql; connection from the PG* variables): each CSV
is loaded once into <short>_all (id integer, label, the feature columns with
types from the data: integer-valued -> integer or bigint, float -> double
precision, text -> text) and the per-seed split into <short>_split; for each
seed <short>_train and <short>_test are created from them, then ONE call trains:
    SELECT gbml.train('catbench_churn', 'boost', 'SELECT * FROM churn_train',
      '{"label_column": "label", "exclude_columns": ["id"], "iterations": 300,
        "depth": 6, "learning_rate": 0.05, "loss": "Logloss", "random_seed": S,
        "threads": T}')
and whole rows are scored:  SELECT id, gbml.predict('catbench_churn', t) FROM churn_test t
(gbml.predict is the raw score: the log-odds for Logloss).  Multiclass: the
label column holds the class id, "loss": "MultiClass" is passed, and
SELECT id, gbml.predict_classes('catbench_hpcmc', t) FROM
hpcmc_test t gives each row's K probabilities as a float8[] (element c + 1 =
class c).

Environment: SEEDS, TREES, DEPTH, LR, THREADS, BORDERS, GBML_PARAMS (extra gbml params, JSON;
VARIANT_PARAMS the same applied over a variant line's own), GBML_LINES (the gbml lines to
run, default "gbml,gbml-L2,gbml-Depthwise,gbml-DW-noise"), PEERS_FROM (an earlier RESULTS_JSON whose
peers' results to reuse instead of running them again), CATBOOST_PARAMS and XGBOOST_PARAMS (params over
the peer's, JSON: to measure what a peer's setting does), DATASETS (a subset,
e.g. "mlc_churn,ames"; the short names churn, ames, hpc, hpcmc work too), PEERS
(default "catboost,lightgbm,xgboost"), PEERS_ONLY=1 (no PostgreSQL at all),
RESULTS_JSON (default /tmp/categorical_bench.json).

Run: tests/bench/categorical_bench.sh (a throwaway cluster with gbml in it), or
PEERS_ONLY=1 python3 tests/bench/categorical_bench.py.  The script re-executes
itself in the bench venv (tests/bench/venv.sh; GBML_BENCH_VENV, else the
repository's .bench-venv, else — in a git worktree that has none — the main
worktree's .bench-venv) with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset.
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
DATA = os.environ.get("CATEGORICAL_DATA") or os.path.abspath(os.path.join(REPO, "..", "shared", "data", "categorical"))
ALL_PEERS = ["catboost", "lightgbm", "xgboost"]



def reexec_in_venv():
    """Run again under the bench venv's python, with the OpenBLAS overrides unset."""
    if os.environ.get("GBML_CATEGORICAL_BENCH_CHILD") == "1":
        return
    env = dict(os.environ)
    py = subprocess.run(["bash", os.path.join(HERE, "venv.sh")], check=True, env=env,
                        capture_output=True, text=True).stdout.strip()
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    env["GBML_CATEGORICAL_BENCH_CHILD"] = "1"
    os.execve(py, [py, os.path.abspath(__file__)] + sys.argv[1:], env)


# ------------------------------------------------------------------ config

def config():
    e = os.environ
    seeds = e.get("SEEDS", "20").strip()
    seeds = [int(s) for s in seeds.split(",") if s.strip()] if "," in seeds else list(range(1, int(seeds) + 1))
    return {
        "seeds": seeds,
        "trees": int(e.get("TREES", "300")),
        "depth": int(e.get("DEPTH", "6")),
        "lr": float(e.get("LR", "0.05")),
        "threads": int(e.get("THREADS", "0")) or (os.cpu_count() or 1),
        "borders": int(e["BORDERS"]) if e.get("BORDERS") else None,
        "datasets": [d.strip() for d in e.get("DATASETS", "mlc_churn,ames,hpc_data,hpc_multi").split(",")
                     if d.strip()],
        "peers": [p.strip() for p in e.get("PEERS", ",".join(ALL_PEERS)).split(",") if p.strip()],
        "peers_only": e.get("PEERS_ONLY", "0") == "1",
        "gbml_lines": [l.strip() for l in e.get("GBML_LINES", ",".join(["gbml"] + list(GBML_VARIANTS))).split(",")
                       if l.strip()],
        "json": e.get("RESULTS_JSON", "/tmp/categorical_bench.json"),
        "peers_from": e.get("PEERS_FROM") or None,
    }


# -------------------------------------------------------------------- data

DATASETS = {
    "mlc_churn": {"short": "churn", "file": "mlc_churn.csv", "task": "binary",
                  "what": "binary: label 1 = churned"},
    "ames": {"short": "ames", "file": "ames.csv", "task": "regression",
             "what": "regression on log(sale price)"},
    "hpc_data": {"short": "hpc", "file": "hpc_data.csv", "task": "binary",
                 "what": "binary: label_id >= 2 (M or L) vs VF or F"},
    "hpc_multi": {"short": "hpcmc", "file": "hpc_data.csv", "task": "multiclass",
                  "what": "multiclass: label_id 0..3 = VF, F, M, L"},
}
# numeric-only binary tables beside the mixed ones (not in the default DATASETS): a check that a
# change made for the categorical tables does not cost the plain numeric case
DATASETS.update({
    "spambase": {"short": "spam", "file": os.path.join("..", "spambase", "spambase.csv"), "task": "binary",
                 "what": "binary, numeric only: label 1 = spam"},
    "a9a": {"short": "a9a", "file": os.path.join("..", "a9a", "train.csv"), "task": "binary",
            "what": "binary, numeric only (0/1 indicators): label 1 = income > 50K (the train file only)"},
})
SHORT = {v["short"]: k for k, v in DATASETS.items()}


def load_dataset(name):
    """-> (X frame with text columns as str, y float64 (multiclass: class ids 0..K-1), categorical names, spec)."""
    import numpy as np
    import pandas as pd
    spec = DATASETS[name]
    df = pd.read_csv(os.path.join(DATA, spec["file"]), keep_default_na=False, na_values=[""])
    if name == "hpc_data":
        y = (df["label_id"].to_numpy() >= 2).astype(np.float64)
        X = df.drop(columns=["label", "label_id"])
    elif name == "hpc_multi":
        y = df["label_id"].to_numpy(dtype=np.float64)
        X = df.drop(columns=["label", "label_id"])
    elif name == "ames":
        y = np.log(df["label"].to_numpy(dtype=np.float64))
        X = df.drop(columns=["label"])
    else:
        y = df["label"].to_numpy(dtype=np.float64)
        X = df.drop(columns=["label"])
    # text columns (object, or pandas 3's str dtype) are the categorical ones; kept as Python str objects
    cats = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    X = X.reset_index(drop=True)
    for c in cats:
        X[c] = X[c].astype(object)
    return X, y, cats, spec


def split(y, task, seed):
    import numpy as np
    from sklearn.model_selection import train_test_split
    idx = np.arange(len(y))
    tr, te = train_test_split(idx, test_size=0.2, random_state=seed,
                              stratify=(None if task == "regression" else y))
    return np.sort(tr), np.sort(te)


def n_classes(y):
    """Multiclass: K from the labels 0..K-1 of the whole table."""
    return int(y.max()) + 1


def with_category_dtype(X, cats):
    """LightGBM / XGBoost frame: text columns as pandas categories, levels = the column's sorted values."""
    import pandas as pd
    Xc = X.copy()
    for c in cats:
        Xc[c] = pd.Categorical(X[c], categories=sorted(X[c].dropna().unique()))
    return Xc


# ----------------------------------------------------------------- metrics

def sigmoid(z):
    import numpy as np
    z = np.asarray(z, dtype=np.float64)
    return 1.0 / (1.0 + np.exp(-z))


def metrics(task, y, raw):
    """One implementation for every library; raw = the model's raw score (multiclass: N x K probabilities)."""
    import numpy as np
    from sklearn.metrics import log_loss, roc_auc_score
    raw = np.asarray(raw, dtype=np.float64)
    if task == "multiclass":
        p = raw / raw.sum(axis=1, keepdims=True)
        return {"logloss": float(log_loss(y.astype(int), p, labels=list(range(p.shape[1])))),
                "accuracy": float(np.mean(np.argmax(p, axis=1) == y.astype(int)))}
    if task == "binary":
        p = np.clip(sigmoid(raw), 1e-15, 1 - 1e-15)
        return {"auc": float(roc_auc_score(y, raw)), "logloss": float(log_loss(y, p, labels=[0, 1]))}
    return {"rmse_log": float(np.sqrt(np.mean((raw - y) ** 2))),
            "rmse_usd": float(np.sqrt(np.mean((np.exp(raw) - np.exp(y)) ** 2)))}


METRICS = {"binary": [("auc", "AUC", +1), ("logloss", "logloss", -1)],
           "regression": [("rmse_log", "RMSE log", -1), ("rmse_usd", "RMSE $", -1)],
           "multiclass": [("logloss", "logloss", -1), ("accuracy", "accuracy", +1)]}
DIGITS = {"rmse_usd": 0}    # decimals printed; 4 for the others


# ------------------------------------------------------------------- peers

# each library's loss per task (multiclass: softmax, K trees an iteration; LightGBM and XGBoost get num_class K)
OBJECTIVE = {"catboost": {"binary": "Logloss", "regression": "RMSE", "multiclass": "MultiClass"},
             "lightgbm": {"binary": "binary", "regression": "regression", "multiclass": "multiclass"},
             "xgboost": {"binary": "binary:logistic", "regression": "reg:squarederror",
                         "multiclass": "multi:softprob"}}


def run_catboost(cfg, task, X, y, cats, tr, te, seed):
    """-> (raw scores, or for multiclass the N x K probabilities, train s, predict s, settings)."""
    from catboost import CatBoost, Pool
    params = {"iterations": cfg["trees"], "depth": cfg["depth"], "learning_rate": cfg["lr"],
              "loss_function": OBJECTIVE["catboost"][task], "random_seed": seed,
              "thread_count": cfg["threads"], "verbose": False, "allow_writing_files": False}
    if cfg["borders"]:
        params["border_count"] = cfg["borders"]
    params.update(json.loads(os.environ.get("CATBOOST_PARAMS", "{}")))
    t0 = time.perf_counter()
    pool = Pool(X.iloc[tr], y[tr], cat_features=cats)
    m = CatBoost(params)
    m.fit(pool)
    secs = time.perf_counter() - t0
    t0 = time.perf_counter()
    raw = m.predict(Pool(X.iloc[te], cat_features=cats),
                    prediction_type="Probability" if task == "multiclass" else "RawFormulaVal")
    pred_secs = time.perf_counter() - t0
    allp = m.get_all_params()
    extra = {k: allp.get(k) for k in ("boosting_type", "border_count", "l2_leaf_reg", "one_hot_max_size",
                                      "leaf_estimation_iterations", "feature_border_type")}
    return raw, secs, pred_secs, extra


def run_lightgbm(cfg, task, Xc, y, cats, tr, te, seed):
    import lightgbm as lgb
    params = {"objective": OBJECTIVE["lightgbm"][task], "learning_rate": cfg["lr"],
              "num_leaves": 2 ** cfg["depth"], "max_depth": cfg["depth"], "num_threads": cfg["threads"],
              "seed": seed, "verbose": -1}
    if task == "multiclass":
        params["num_class"] = n_classes(y)
    if cfg["borders"]:
        params["max_bin"] = cfg["borders"]
    t0 = time.perf_counter()
    ds = lgb.Dataset(Xc.iloc[tr], label=y[tr], categorical_feature=cats, params={"verbose": -1,
                     **({"max_bin": cfg["borders"]} if cfg["borders"] else {})})
    m = lgb.train(params, ds, num_boost_round=cfg["trees"])
    secs = time.perf_counter() - t0
    t0 = time.perf_counter()
    # multiclass: its softmax probabilities, N x K
    raw = m.predict(Xc.iloc[te], raw_score=(task != "multiclass"), num_threads=cfg["threads"])
    pred_secs = time.perf_counter() - t0
    return raw, secs, pred_secs, {}


def run_xgboost(cfg, task, Xc, y, cats, tr, te, seed):
    import xgboost as xgb
    params = {"objective": OBJECTIVE["xgboost"][task], "eta": cfg["lr"],
              "max_depth": cfg["depth"], "tree_method": "hist", "nthread": cfg["threads"], "seed": seed,
              "verbosity": 0}
    if task == "multiclass":
        params["num_class"] = n_classes(y)
    if cfg["borders"]:
        params["max_bin"] = cfg["borders"] + 1
    params.update(json.loads(os.environ.get("XGBOOST_PARAMS", "{}")))
    t0 = time.perf_counter()
    dtr = xgb.DMatrix(Xc.iloc[tr], label=y[tr], enable_categorical=True, nthread=cfg["threads"])
    m = xgb.train(params, dtr, num_boost_round=cfg["trees"])
    secs = time.perf_counter() - t0
    t0 = time.perf_counter()
    # multiclass: multi:softprob's probabilities, N x K
    raw = m.predict(xgb.DMatrix(Xc.iloc[te], enable_categorical=True, nthread=cfg["threads"]),
                    output_margin=(task != "multiclass"))
    pred_secs = time.perf_counter() - t0
    return raw, secs, pred_secs, {}


# -------------------------------------------------------------------- gbml

def psql(sql, stdin=None):
    """Run SQL (a script on psql's stdin), or one COPY ... FROM STDIN statement fed STDIN; unaligned output."""
    cmd = ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"]
    cmd += ["-f", "-"] if stdin is None else ["-c", sql]
    r = subprocess.run(cmd, input=(sql if stdin is None else stdin), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError((r.stderr or r.stdout).strip()[-3000:])
    return r.stdout


def pg_type(s):
    import numpy as np
    import pandas as pd
    if not pd.api.types.is_numeric_dtype(s):
        return "text"
    if np.issubdtype(s.dtype, np.integer):
        lo, hi = int(s.min()), int(s.max())
        return "integer" if -2**31 < lo and hi < 2**31 else "bigint"
    if np.issubdtype(s.dtype, np.floating):
        v = s.dropna().to_numpy()
        if len(v) and np.all(v == np.round(v)) and np.all(np.abs(v) < 2**53):
            return "integer" if np.all(np.abs(v) < 2**31) else "bigint"
        return "double precision"
    raise SystemExit(f"column {s.name}: no PostgreSQL type for {s.dtype}")


def gbml_load(short, X, y, task, splits):
    """<short>_all (id, label, features) and <short>_split (seed, id, test) from the frames."""
    import io
    cols = list(X.columns)
    types = {c: pg_type(X[c]) for c in cols}
    label_type = "double precision" if task == "regression" else "integer"
    ddl = (f"DROP TABLE IF EXISTS {short}_all, {short}_split, {short}_train, {short}_test;\n"
           f"CREATE TABLE {short}_all (id integer PRIMARY KEY, label {label_type}, "
           + ", ".join(f'"{c}" {types[c]}' for c in cols) + ");\n"
           f"CREATE TABLE {short}_split (seed integer, id integer, test boolean, PRIMARY KEY (seed, id));\n")
    psql(ddl)
    df = X.copy()
    for c in cols:
        if types[c] in ("integer", "bigint"):
            df[c] = df[c].astype("Int64")
    df.insert(0, "label", y if task == "regression" else y.astype(int))
    df.insert(0, "id", range(len(df)))
    buf = io.StringIO()
    df.to_csv(buf, header=False, index=False, float_format="%.17g")
    psql(f"COPY {short}_all FROM STDIN (FORMAT csv)", stdin=buf.getvalue())
    rows = [f"{s},{i},{'t' if te else 'f'}" for s, (tr, tst) in splits.items()
            for te, ids in ((False, tr), (True, tst)) for i in ids]
    psql(f"COPY {short}_split FROM STDIN (FORMAT csv)", stdin="\n".join(rows) + "\n")
    psql(f"ANALYZE {short}_all; ANALYZE {short}_split;")
    return types


# gbml run a second way on the binary tasks: Logloss's splits scored as CatBoost scores them
# (score_function L2: on the row weights; gbml's default for Logloss scores on the hessians) and
# noised as CatBoost noises them (random_strength 1, CatBoost's default; gbml's is 0)
GBML_VARIANTS = {"gbml-L2": {"score_function": "L2", "random_strength": 1},
                 # trees shaped as XGBoost's (a split per node: grow_policy Depthwise) with XGBoost's
                 # settings where gbml has the same knob: lambda 1, min_child_weight 1 (gbml's default),
                 # 255 quantile borders (XGBoost's max_bin 256), one Newton step a leaf, and categories as
                 # XGBoost splits them: one-hot up to 4 (its max_cat_to_onehot), sets beyond
                 "gbml-Depthwise": {"grow_policy": "Depthwise", "l2_leaf_reg": 1, "border_count": 254,
                                    "border_type": "Median", "leaf_estimation_iterations": 1,
                                    "one_hot_max_size": 4, "categorical_split": "sets"}}
# the same with CatBoost's split noise (random_strength 1, CatBoost's default): XGBoost's tree shape
# and categories with CatBoost's regularising noise (stop 45: ahead of every peer on Ames and hpc)
GBML_VARIANTS["gbml-DW-noise"] = dict(GBML_VARIANTS["gbml-Depthwise"], random_strength=1)
# variants for binary tasks only (the others run on every task)
GBML_BINARY_VARIANTS = {"gbml-L2"}


GBML_LOSS = {"binary": "Logloss", "regression": "RMSE", "multiclass": "MultiClass"}


def parse_score(text):
    """psql's text of gbml.predict (a float) or of gbml.predict_classes (a float8[]: "{0.1,0.2,...}")."""
    if text.startswith("{"):
        return [float(v) for v in text[1:-1].split(",")]
    return float(text)


def run_gbml(cfg, task, short, seed, n_test, variant=None):
    import numpy as np
    name = f"catbench_{short}"
    params = {"label_column": "label", "exclude_columns": ["id"], "iterations": cfg["trees"],
              "depth": cfg["depth"], "learning_rate": cfg["lr"],
              "loss": GBML_LOSS[task], "random_seed": seed, "threads": cfg["threads"]}
    # the border rule CatBoost uses (its feature_border_type default)
    params["border_type"] = "GreedyLogSum"
    if task == "binary":
        # the leaf estimation CatBoost picks for these runs (10 Newton steps a tree; in the JSON)
        params["leaf_estimation_iterations"] = 10
    if cfg["borders"]:
        params["border_count"] = cfg["borders"]
    # GBML_PARAMS: extra gbml params as a JSON object (e.g. '{"one_hot_max_size": 16}')
    params.update(json.loads(os.environ.get("GBML_PARAMS", "{}")))
    params.update(GBML_VARIANTS.get(variant, {}))
    # VARIANT_PARAMS: params over a variant's own (e.g. '{"one_hot_max_size": 255}' on gbml-Depthwise)
    if variant:
        params.update(json.loads(os.environ.get("VARIANT_PARAMS", "{}")))
    if GBML_VARIANTS.get(variant, {}).get("grow_policy") == "Depthwise" and task == "multiclass":
        # the lines with XGBoost's settings take its softmax Newton step: hessian 2 p (1 - p) (gbml's default K/(K-1) p (1 - p), LightGBM's)
        params["multiclass_hessian_factor"] = 2
    psql(f"DROP TABLE IF EXISTS {short}_train, {short}_test;\n"
         f"CREATE TABLE {short}_train AS SELECT a.* FROM {short}_all a JOIN {short}_split s USING (id)"
         f" WHERE s.seed = {seed} AND NOT s.test;\n"
         f"CREATE TABLE {short}_test AS SELECT a.* FROM {short}_all a JOIN {short}_split s USING (id)"
         f" WHERE s.seed = {seed} AND s.test;\n"
         f"ANALYZE {short}_train; ANALYZE {short}_test;\n")
    out = psql("SELECT extract(epoch FROM clock_timestamp());\n"
               f"SELECT gbml.train('{name}', 'boost', 'SELECT * FROM {short}_train', '{json.dumps(params)}');\n"
               "SELECT extract(epoch FROM clock_timestamp());\n"
               "SELECT gbml.last_training_report();\n").strip().splitlines()
    secs = float(out[2]) - float(out[0])
    try:
        report = json.loads(out[3])
    except (IndexError, ValueError):
        report = {}
    # multiclass: gbml.predict_classes, a float8[] of the K probabilities ("{0.1,0.2,...}") a row
    fn = "predict_classes" if task == "multiclass" else "predict"
    t0 = time.perf_counter()
    lines = psql(f"SELECT id, gbml.{fn}('{name}', t) FROM {short}_test t ORDER BY id;").split()
    pred_secs = time.perf_counter() - t0
    ids = np.array([int(l.split("|")[0]) for l in lines])
    raw = np.array([parse_score(l.split("|")[1]) for l in lines])
    if len(raw) != n_test:
        raise RuntimeError(f"gbml.predict gave {len(raw)} rows for {n_test} test rows")
    extra = {k: report.get(k) for k in ("prepare_seconds", "train_seconds", "threads", "device", "peak_memory_mb")
             if k in report}
    return ids, raw, secs, pred_secs, extra


# ------------------------------------------------------------------ report

def mean_std(v):
    import numpy as np
    v = np.asarray(v, dtype=np.float64)
    return float(np.mean(v)), (float(np.std(v, ddof=1)) if len(v) > 1 else 0.0)


def summarise(task, per_seed):
    import numpy as np
    s = {}
    for key, _, _ in METRICS[task]:
        s[key] = mean_std([r[key] for r in per_seed])
    s["train_seconds"] = mean_std([r["train_seconds"] for r in per_seed])
    s["train_seconds_median"] = float(np.median([r["train_seconds"] for r in per_seed]))
    s["predict_seconds"] = mean_std([r["predict_seconds"] for r in per_seed])
    return s


def paired(per_seed, glib, peer, key, direction):
    """gbml line GLIB against PEER seed by seed on metric KEY: (seeds where GLIB is ahead, seeds,
    mean of GLIB - PEER, its standard error).  The seeds' splits move both libraries' metrics
    together, so the paired difference says what the means' gap alone cannot: whether it is
    more than the seeds' noise."""
    import numpy as np
    mine = {r["seed"]: r[key] for r in per_seed[glib]}
    theirs = {r["seed"]: r[key] for r in per_seed[peer]}
    seeds = sorted(set(mine) & set(theirs))
    d = np.array([mine[s] - theirs[s] for s in seeds], dtype=np.float64)
    ahead = int(np.sum(direction * d > 0))
    se = float(np.std(d, ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0
    return ahead, len(seeds), float(np.mean(d)) if len(d) else 0.0, se


def print_table(name, spec, info, cfg, libs, summary, errors, per_seed):
    task = spec["task"]
    ms = METRICS[task]
    print(f"\n== {name}: {spec['what']}; {info['rows']} rows, {info['features']} features "
          f"({info['categorical']} categorical); {len(cfg['seeds'])} seeds, {cfg['trees']} trees, "
          f"depth {cfg['depth']}, lr {cfg['lr']}, {cfg['threads']} threads")
    hdr = f"{'library':14}" + "".join(f" {lab + (' ↑' if d > 0 else ' ↓'):>22}" for _, lab, d in ms) \
        + f" {'train s':>9} {'(median)':>9} {'predict s':>10}"
    print(hdr)
    print("-" * len(hdr))
    for lib in libs:
        if lib in errors and lib not in summary:
            # the ERROR's line, not a NOTICE before it
            lines = errors[lib].splitlines()
            shown = next((l for l in lines if "ERROR" in l), lines[0] if lines else "")
            print(f"{lib:14} error: {shown[:200]}")
            continue
        s = summary[lib]
        print(f"{lib:14}" + "".join(f" {s[k][0]:>12.{DIGITS.get(k, 4)}f} ± {s[k][1]:<7.{DIGITS.get(k, 4)}f}"
                                    for k, _, _ in ms)
              + f" {s['train_seconds'][0]:9.3f} {s['train_seconds_median']:9.3f} {s['predict_seconds'][0]:10.3f}")
    ratios = {}
    peers = [l for l in libs if not l.startswith("gbml") and l in summary]
    for glib in [l for l in libs if l.startswith("gbml") and l in summary] if peers else []:
        g = summary[glib]
        mine = ratios if glib == "gbml" else ratios.setdefault(glib, {})
        parts = []
        for k, lab, d in ms:
            best = max(peers, key=lambda l: d * summary[l][k][0])
            r = g[k][0] / summary[best][k][0]
            ahead, n, diff, se = paired(per_seed, glib, best, k, d)
            # a verdict only past twice the paired difference's standard error
            verdict = "level" if abs(diff) <= 2 * se else ("AHEAD" if d * diff > 0 else "BEHIND")
            mine[k] = {"ratio": r, "best_peer": best, "seeds_ahead": ahead, "seeds": n,
                       "paired_difference": diff, "paired_standard_error": se, "verdict": verdict}
            parts.append(f"{lab} {r:.4f} (vs {best}; {'>' if d > 0 else '<'} 1 is better; {verdict}: ahead on "
                         f"{ahead}/{n} seeds, difference {diff:+.4f} ± {se:.4f} s.e.)")
        if "catboost" in summary:
            r = g["train_seconds"][0] / summary["catboost"]["train_seconds"][0]
            rm = g["train_seconds_median"] / summary["catboost"]["train_seconds_median"]
            mine["train_seconds_vs_catboost"] = r
            mine["train_seconds_median_vs_catboost"] = rm
            parts.append(f"train time / CatBoost {r:.3f} (medians {rm:.3f})")
        print(f"{glib} / best peer: " + "; ".join(parts))
    for lib, err in errors.items():
        if lib in summary:
            print(f"({lib}: {err.splitlines()[0][:200]})")
    return ratios


# -------------------------------------------------------------------- main

def load_peers_from(cfg):
    """PEERS_FROM (an earlier run's RESULTS_JSON), read once and checked: None without it.  Only
    with the same trees, depth, lr and borders."""
    if not cfg["peers_from"]:
        return None
    with open(cfg["peers_from"]) as f:
        old = json.load(f)
    for k in ("trees", "depth", "lr", "borders"):
        if old["config"].get(k) != cfg[k]:
            raise SystemExit(f"PEERS_FROM: {cfg['peers_from']} ran with {k} {old['config'].get(k)}, not {cfg[k]}")
    return old


def peers_from(cfg, old, name, libs):
    """The peers' per-seed results on dataset NAME taken from OLD (load_peers_from) instead of
    rerun (a split and a peer's seed give the same model each run), so trying a gbml setting
    takes gbml's time only."""
    if old is None:
        return {}
    got = {}
    for lib in libs:
        if lib.startswith("gbml"):
            continue
        rows = [r for r in old["datasets"].get(name, {}).get("per_seed", {}).get(lib, []) if r["seed"] in cfg["seeds"]]
        if len(rows) != len(cfg["seeds"]):
            raise SystemExit(f"PEERS_FROM: {cfg['peers_from']} has {len(rows)} of the {len(cfg['seeds'])} seeds "
                             f"of {lib} on {name}")
        got[lib] = sorted(rows, key=lambda r: cfg["seeds"].index(r["seed"]))
    return got


def main():
    import numpy as np
    cfg = config()
    earlier_run = load_peers_from(cfg)
    names = []
    for d in cfg["datasets"]:
        d = SHORT.get(d, d)
        if d not in DATASETS:
            raise SystemExit(f"DATASETS: unknown {d!r} (have {', '.join(DATASETS)})")
        names.append(d)
    for p in cfg["peers"]:
        if p not in ALL_PEERS:
            raise SystemExit(f"PEERS: unknown {p!r} (have {', '.join(ALL_PEERS)})")
    if not os.path.isdir(DATA):
        print(f"categorical_bench: no data folder {DATA}; skipping")
        return
    for l in cfg["gbml_lines"]:
        if l != "gbml" and l not in GBML_VARIANTS:
            raise SystemExit(f"GBML_LINES: unknown {l!r} (have gbml, {', '.join(GBML_VARIANTS)})")
    libs_all = ([] if cfg["peers_only"] else cfg["gbml_lines"]) + cfg["peers"]
    versions = {"python": sys.version.split()[0]}
    for p in cfg["peers"]:
        versions[p] = __import__(p).__version__
    try:
        from threadpoolctl import threadpool_info
        blas = [(i.get("internal_api"), i.get("architecture"), i.get("version")) for i in threadpool_info()
                if i.get("internal_api") in ("openblas", "mkl", "blis")]
    except ImportError:
        blas = None
    if not cfg["peers_only"]:
        versions["gbml"] = psql("SELECT extversion FROM pg_extension WHERE extname = 'gbml';").strip() or None
        versions["postgresql"] = psql("SHOW server_version;").strip()
        if not versions["gbml"]:
            raise SystemExit("categorical_bench: the gbml extension is not installed in this database "
                             "(CREATE EXTENSION gbml, or PEERS_ONLY=1)")
    print("categorical_bench: " + ", ".join(f"{k} {v}" for k, v in versions.items())
          + (f"; BLAS seen by threadpoolctl: {blas}" if blas is not None else ""), flush=True)
    results = {"config": cfg, "versions": versions, "datasets": {}}
    for name in names:
        X, y, cats, spec = load_dataset(name)
        task, short = spec["task"], spec["short"]
        Xc = with_category_dtype(X, cats)
        info = {"rows": len(y), "features": X.shape[1], "categorical": len(cats), "categorical_columns": cats,
                "task": task, "what": spec["what"],
                "positive_rate": float(np.mean(y)) if task == "binary" else None}
        if task == "multiclass":
            info["class_rates"] = [float(np.mean(y == c)) for c in range(n_classes(y))]
        splits = {s: split(y, task, s) for s in cfg["seeds"]}
        libs = libs_all if task == "binary" else [l for l in libs_all if l not in GBML_BINARY_VARIANTS]
        per_seed = {l: [] for l in libs}
        errors, extras = {}, {}
        earlier = peers_from(cfg, earlier_run, name, libs)
        for lib, rows in earlier.items():
            per_seed[lib] = rows
        gbml_libs = [l for l in libs if l.startswith("gbml")]
        if gbml_libs:
            try:
                info["pg_types"] = gbml_load(short, X, y, task, splits)
            except RuntimeError as e:
                errors.update({l: f"loading the tables: {e}" for l in gbml_libs})
        for seed in cfg["seeds"]:
            tr, te = splits[seed]
            for lib in libs:
                if lib in errors or lib in earlier:
                    continue
                try:
                    if lib.startswith("gbml"):
                        ids, raw, secs, psecs, extra = run_gbml(cfg, task, short, seed, len(te), lib)
                        if not np.array_equal(ids, te):
                            raise RuntimeError("gbml.predict's ids are not the test split's")
                    elif lib == "catboost":
                        raw, secs, psecs, extra = run_catboost(cfg, task, X, y, cats, tr, te, seed)
                    elif lib == "lightgbm":
                        raw, secs, psecs, extra = run_lightgbm(cfg, task, Xc, y, cats, tr, te, seed)
                    else:
                        raw, secs, psecs, extra = run_xgboost(cfg, task, Xc, y, cats, tr, te, seed)
                    if task == "multiclass" and np.shape(raw) != (len(te), n_classes(y)):
                        raise RuntimeError(f"{lib}: probabilities of shape {np.shape(raw)}, "
                                           f"not {len(te)} x {n_classes(y)}")
                except (RuntimeError, subprocess.SubprocessError, ValueError) as e:
                    errors[lib] = f"seed {seed}: {e}"
                    print(f"  {name} {lib} seed {seed}: ERROR {str(e).splitlines()[0][:300]}", flush=True)
                    continue
                r = metrics(task, y[te], raw)
                r.update({"seed": seed, "train_seconds": secs, "predict_seconds": psecs})
                per_seed[lib].append(r)
                if extra:
                    extras[lib] = extra
                print(f"  {name} seed {seed} {lib:9} "
                      + " ".join(f"{lab} {r[k]:.{DIGITS.get(k, 4)}f}" for k, lab, _ in METRICS[task])
                      + f"  train {secs:.2f} s", flush=True)
        summary = {l: summarise(task, per_seed[l]) for l in libs
                   if per_seed[l] and not (l in errors and len(per_seed[l]) < len(cfg["seeds"]))}
        ratios = print_table(name, spec, info, cfg, libs, summary, errors, per_seed)
        results["datasets"][name] = {"info": info, "per_seed": per_seed, "summary": summary,
                                     "ratios": ratios, "errors": errors, "settings": extras}
        sys.stdout.flush()
    path = cfg["json"]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"\nresults: {path}")


if __name__ == "__main__":
    reexec_in_venv()
    main()
