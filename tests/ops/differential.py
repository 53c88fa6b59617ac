#!/usr/bin/env python3
"""tests/ops/differential.py — a randomized differential probe of the training
paths that must give the same model bytes (not part of `make test`: a tool
for looking for bugs; tests/ops/differential.sh starts its servers).

Each case makes a random table (numeric columns of every type, NULLs,
categories of 1 to 300 values in text, varchar and integer columns (those
through categorical_columns), a real[] or float8[] column, groups, weights; 1
to 40,000 rows, sometimes few distinct rows and many duplicates) and random
params for a random trainer (boosting with every loss, symmetric or Depthwise
trees, sets, subsample, border types and samples, early stopping, one-hot
sizes, MultiClass hessian factors, eval shares; K-Means with one-hot,
spherical, n_init; SAGA with penalties, standardize, category caps), then
trains it on every path and compares the bytes:

  one server (default)  in memory; past a small memory budget (2-12 MB: the
                        rows in temporary files); two other scan orders; one
                        thread; the emulated GPU (gbml_cuda_emu) in memory and
                        spilled; K-Means' hybrid device; the aggregates'
                        whole-row form, in memory and spilled; when the table
                        has no text column, the aggregates' array form
                        serially, in a parallel plan and spilled (a group of
                        its own: the column form's model also keeps names).
                        SAGA on the GPU is another algorithm (mini-batch
                        SAGA): its two GPU paths must agree with each other.
                        An eval set given by eval_source: in memory,
                        spilled and on the GPU spilled (a group of its own).
                        And twice a training under a statement_timeout: it
                        ends cleanly, leaving no temporary file of its own;
                        and the in-memory model scores the table's rows
                        (the columns passed one by one) exactly as the same
                        rows as records (the composite path).
  --distributed         the table on one server against the same rows
                        partitioned over two postgres_fdw shards (groups kept
                        on one shard; the partitioned table by name, each kind
                        of label a column), in memory, with a small budget
                        and with an eval set by eval_source on the
                        coordinator (MultiClass's sometimes with a class the
                        training rows lack).  SAGA across servers reaches the
                        optimum, not SAGA's bytes: its objective is checked
                        against one server's SAGA run to convergence.

A case is OK when every path that trained gave the same bytes and every path
that failed failed with a HINT; MISMATCH when bytes differ; ERROR when a path
failed without a HINT, with the plain "memory limit exceeded: X MB needed" of
an allocation no check counted, or left temporary files.  Paths may fail with
a hint (a NULL a trainer cannot take, a budget below a step's floor): that is
an answer, not a finding.

Usage (a server with gbml and gbml_cuda_emu installed, as a superuser; PG*
variables, or DIFF_COORD / DIFF_SHARD1 / DIFF_SHARD2 as psql connection
options for --distributed):
    tests/ops/differential.py [--distributed] SEED [CASES] [--only N]
DIFF_BIG=1 makes tables of 100,000 to 400,000 rows and budgets of 12 to 48
MB (the reorders' windows, many chunks; minutes a case).
Prints a line per case (DIFF_VERBOSE=1: every path's outcome too) and
"SUMMARY seed {...}"; exits 1 if any case is not OK.  The same seed gives the same cases (--only N reruns case N alone, its
table left behind as dt<SEED> or ds<SEED>).
"""
import json
import os
import random
import re
import subprocess
import sys

args = [a for a in sys.argv[1:]]
DISTRIBUTED = "--distributed" in args
ONLY = -1
if "--only" in args:
    ONLY = int(args[args.index("--only") + 1])
    del args[args.index("--only"):args.index("--only") + 2]
args = [a for a in args if a != "--distributed"]
SEED = int(args[0]) if args else 1
COUNT = int(args[1]) if len(args) > 1 else 20
rnd = random.Random(SEED)
DRY = [False]
BIG = bool(os.environ.get("DIFF_BIG"))   # 100,000 to 400,000 rows, budgets of 12 to 48 MB
PLAIN = re.compile(r"memory limit exceeded: [0-9.]+ [kM]?B needed")
TARGETS = {"COORD": os.environ.get("DIFF_COORD", "").split(),
           "SHARD1": os.environ.get("DIFF_SHARD1", "").split(),
           "SHARD2": os.environ.get("DIFF_SHARD2", "").split()}
PRE = "SET client_min_messages = warning; " + ("" if DISTRIBUTED else "SET gbml.cuda_library = 'gbml_cuda_emu'; ")


def psql(sql, where="COORD", extra=()):
    p = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"] + TARGETS[where] + ["-c", sql] +
                       list(extra), capture_output=True, text=True, timeout=900)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def outcome(rc, out, err):
    """The model's md5 (the last line), or ERR: and the message."""
    return out.split("\n")[-1] if rc == 0 else "ERR: " + err.replace("\n", " | ")


def make_table(name):
    n = rnd.choice([100000, 200000, 400000] if BIG else [1, 3, 40, 200, 1500, 6000, 20000, 40000])
    # rows from i, or from i % m: few distinct rows, many duplicates (and ties in the canonical order)
    v = "i" if rnd.random() < 0.8 else f"(i % {rnd.choice([2, 7, 50])})"
    cols, exprs = [], []
    nnum = rnd.randint(0, 12)
    ncat = rnd.randint(0, 3)
    if nnum + ncat == 0:
        nnum = 1
    nulls = rnd.random() < 0.3
    for j in range(nnum):
        t = rnd.choice(["real", "float8", "int4", "int8", "numeric", "bool", "int2"])
        nullp = rnd.choice([0, 0, 0.05, 0.3]) if nulls else 0
        base = f"((hashint4({v} * {j + 3} + {SEED}) % 1000) / 100.0)"
        if t == "bool":
            e = f"({base} > 5)"
        elif t in ("int4", "int8", "int2"):
            e = f"(floor({base}))::{t}"
        else:
            e = f"({base})::{t}"
        if nullp:
            e = f"CASE WHEN (hashint4(i + {j * 77}) % 1000) < {int(nullp * 1000)} THEN NULL ELSE {e} END"
        cols.append((f"x{j}", t))
        exprs.append(f"{e} AS x{j}")
    int_cats = []
    for j in range(ncat):
        card = rnd.choice([1, 2, 3, 5, 12, 60, 300])
        nullp = rnd.choice([0, 0, 0.1])
        kind = rnd.choice(["text", "text", "varchar", "int"])
        code = f"(abs(hashint4({v} * {j + 11} + 5)) % {card})"
        # an int column is categorical when categorical_columns names it
        e = code if kind == "int" else f"('v' || {code}::text)::{kind}"
        if kind == "int":
            int_cats.append(f"c{j}")
        if nullp:
            e = f"CASE WHEN (hashint4(i + {j * 91}) % 100) < {int(nullp * 100)} THEN NULL ELSE {e} END"
        cols.append((f"c{j}", "text"))
        exprs.append(f"{e} AS c{j}")
    if rnd.random() < 0.2:
        elem = rnd.choice(["real", "float8"])
        exprs.append(f"ARRAY[(i % 7)::{elem}, ((hashint4(i) % 100) / 10.0)::{elem}] AS arr")
    ngroups = max(2, n // rnd.choice([5, 20, 100]))
    exprs.append(f"((hashint4({v} * 13 + {SEED}) % 1000) / 1000.0 + ({v} % 7) / 7.0)::real AS yr")
    # a group's rows share i % 2, so a group stays on one shard
    exprs.append(f"((i % {ngroups}) * 2 + i % 2)::int8 AS group_id")
    exprs.append("(1 + (i % 3))::real AS w")
    exprs.append("i AS id")
    rows = f"SELECT {', '.join(exprs)} FROM generate_series(1, {n}) AS i"
    # across servers the training source is the partitioned table itself (a query over it trains
    # on one server), so each kind of label is a column of its own: label_yr, label_lbin, ...
    labels = ", ".join(f"({e})::real AS label_{k}" for k, e in LABELS.items())
    make = (lambda where: f"DROP TABLE IF EXISTS {name}; CREATE TABLE {name} AS SELECT *, {labels} FROM ({rows}{where}) s"
            ) if DISTRIBUTED else (lambda where: f"DROP TABLE IF EXISTS {name}; CREATE TABLE {name} AS {rows}{where}")
    if not DRY[0]:
        rc, out, err = psql(make(""))
        assert rc == 0, err
        if DISTRIBUTED:
            for r, shard in ((0, "SHARD1"), (1, "SHARD2")):
                rc, out, err = psql(make(f" WHERE i % 2 = {r}"), where=shard)
                assert rc == 0, err
            rc, out, err = psql(
                f"DROP TABLE IF EXISTS {name}_d; CREATE TABLE {name}_d (LIKE {name}) PARTITION BY LIST ((id % 2)); "
                f"CREATE FOREIGN TABLE {name}_d0 PARTITION OF {name}_d FOR VALUES IN (0) SERVER shard1 "
                f"OPTIONS (table_name '{name}'); "
                f"CREATE FOREIGN TABLE {name}_d1 PARTITION OF {name}_d FOR VALUES IN (1) SERVER shard2 "
                f"OPTIONS (table_name '{name}')")
            assert rc == 0, err
    return dict(n=n, nnum=nnum, ncat=ncat, types=[t for _, t in cols if t != "text"], int_cats=int_cats)


def boost_params(shape, p):
    loss = rnd.choice(["RMSE", "Logloss", "MultiClass", "YetiRank", "QueryRMSE", "PairLogit", "LambdaMART"])
    p.update(loss=loss, iterations=rnd.randint(2, 8), depth=rnd.randint(1, 6))
    if rnd.random() < 0.3:
        p["grow_policy"] = "Depthwise"
        if shape["ncat"] and rnd.random() < 0.5:
            p["categorical_split"] = "sets"
    if rnd.random() < 0.3:
        p["subsample"] = rnd.choice([0.5, 0.8])
    if rnd.random() < 0.3:
        p["one_hot_max_size"] = rnd.choice([0, 1, 4, 64])
    if rnd.random() < 0.3:
        p["border_count"] = rnd.choice([1, 8, 255])
    if rnd.random() < 0.2:
        p["random_strength"] = 1
    if rnd.random() < 0.2:
        p["border_type"] = "GreedyLogSum"
    if rnd.random() < 0.2 and shape["ncat"]:
        p["ctr_counter"] = False
    if loss == "MultiClass" and rnd.random() < 0.5:
        p["multiclass_hessian_factor"] = rnd.choice([1, 2])
    if loss == "Logloss" and rnd.random() < 0.4:
        p["leaf_estimation_iterations"] = 3
    if loss in ("Logloss", "YetiRank") and rnd.random() < 0.3:
        p["score_function"] = "L2"
    if rnd.random() < 0.2:
        p["border_sample_size"] = 1000   # borders from a sample of the rows, not all of them
    if rnd.random() < 0.3:
        p["early_stopping_rounds"] = rnd.randint(1, 3)   # with an eval set: the best iteration kept
    return {"Logloss": "lbin", "MultiClass": "lcls", "RMSE": "yr"}.get(loss, "lrank")


def params_for(shape):
    alg = rnd.choice(["boost", "boost", "kmeans", "saga"])
    p, label = {}, "yr"
    if alg == "boost":
        label = boost_params(shape, p)
    elif alg == "kmeans":
        p.update(k=rnd.randint(1, 6), max_iter=rnd.randint(1, 10), init=rnd.choice(["k-means++", "random"]))
        if shape["ncat"]:
            p["one_hot"] = True
        if rnd.random() < 0.2:
            p["spherical"] = True
        if rnd.random() < 0.2:
            p["n_init"] = 2
    else:
        p.update(loss=rnd.choice(["logistic", "squared"]), max_iter=rnd.randint(1, 5), tol=0)
        if rnd.random() < 0.4:
            p["standardize"] = True
        if rnd.random() < 0.3:
            p["max_categories"] = rnd.choice([1, 3, 100])
        if rnd.random() < 0.3:
            p["l1_ratio"] = rnd.choice([0.5, 1])
        if p["loss"] == "logistic":
            label = "lbin"
    if rnd.random() < 0.3:
        p["eval_fraction"] = 0.2
    p["random_seed"] = rnd.randint(0, 1000)
    return alg, p, label


LABELS = {"yr": "yr", "lbin": "(yr > 0.9)::int::real", "lcls": "floor(abs(yr) * 2)::real",
          "lrank": "floor(abs(yr) * 2)::real"}


def train(name, alg, src, params, where="COORD", what="md5(model)"):
    """The model's md5 (or `what` of the model just trained), or ERR: and the message."""
    sql = (f"{PRE}SELECT gbml.train('diff{SEED}', '{alg}', $q${src}$q$, '{json.dumps(params)}') IS NULL; "
           f"SELECT {what} FROM gbml.models WHERE name = 'diff{SEED}' ORDER BY version DESC LIMIT 1")
    return outcome(*psql(sql, where))


def cancelled(alg, src, params, ms):
    """A training under statement_timeout: '' when it ended cleanly, else what went wrong."""
    rc, out, err = psql(f"{PRE}SET statement_timeout = {ms}; SELECT gbml.train('diff{SEED}', '{alg}', "
                        f"$q${src}$q$, '{json.dumps(params)}') IS NULL",
                        extra=["-v", "ON_ERROR_STOP=0", "-c",
                               # (the session's timeout would cancel this too on a busy machine: "?")
                               "SET statement_timeout = 0; SELECT 'LEFT ' || count(*) FROM pg_ls_tmpdir() "
                               "WHERE name LIKE 'pgsql_tmp' || pg_backend_pid() || '.%'"])
    left = ([ln[5:] for ln in out.split("\n") if ln.startswith("LEFT ")] or ["?"])[0]
    if left != "0":
        return f"ERR: {left} temporary files of its own left after the training"
    if "ERROR" in err and "statement timeout" not in err:
        return "ERR: " + err.replace("\n", " | ")
    return ""


def scores_differ(alg, label, tbl):
    """The deployed model (the one just trained) scores a table's rows (the columns passed one by one)
    as it scores the same rows as records (the composite path): '' when every score is the same."""
    fn = ("gbml.kmeans_distance" if alg == "kmeans" else "gbml.predict_classes" if label == "lcls" else "gbml.predict")
    sql = (f"SELECT (SELECT md5(string_agg({fn}('diff{SEED}', t)::text, ',' ORDER BY id)) FROM {tbl} t) = "
           f"(SELECT md5(string_agg({fn}('diff{SEED}', r)::text, ',' ORDER BY (r).id)) FROM (SELECT * FROM {tbl} OFFSET 0) r)")
    rc, out, err = psql(f"{PRE}{sql}")
    if rc != 0:
        return "ERR: scoring: " + err.replace("\n", " | ")
    return "" if out == "t" else "ERR: a table's rows and the same rows as records score differently"


def array_paths(alg, base, label, grouped, shape, small, tbl):
    """The aggregates' array form (features from the numeric columns), serial, parallel and spilled."""
    fill = "'NaN'::real" if alg == "boost" else "0::real"
    arr = "ARRAY[" + ", ".join((f"coalesce(x{j}::int::real, {fill})" if t == "bool" else f"coalesce(x{j}::real, {fill})")
                               for j, t in enumerate(shape["types"])) + "]"
    ap = {k: v for k, v in base.items() if k not in ("exclude_columns", "weight_column")}
    if alg == "kmeans":
        k = ap.pop("k")
        call = f"gbml.kmeans_fit({arr}, {k}, '%s')"
    elif alg == "saga":
        wt = "w" if "weight_column" in base else "NULL::real"
        call = f"gbml.saga_fit({arr}, {LABELS[label]}, {wt}, '%s')"
    else:
        call = f"gbml.boost_fit({arr}, {LABELS[label]}, {'group_id' if grouped else 'NULL::int8'}, '%s')"
    par = ("SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0; "
           "SET max_parallel_workers_per_gather = 2; SET parallel_leader_participation = off; ")
    out = {}
    for name, pre, extra in (("arr", "", {}), ("arr_par", par, {}), ("arr_spill", "", {"memory_limit_mb": small}),
                             ("arr_par_spill", par, {"memory_limit_mb": small})):
        ap2 = dict(ap)
        ap2.update(extra)
        out[name] = outcome(*psql(f"{PRE}{pre}SELECT md5({call % json.dumps(ap2)}) FROM {tbl}"))
    return out


def trained_objective(alg, src, params):
    """SAGA's objective and stop reason ("OBJ value reason"), or ERR: and the message."""
    return train("", alg, src, params,
                 what="'OBJ ' || (gbml.model_info(model) ->> 'objective') || ' ' || "
                      "(gbml.model_info(model) ->> 'stop_reason')")


def saga_across(case, tbl, base, small):
    """SAGA across servers minimises the same objective by OWL-QN (not SAGA's steps, so not its
    bytes): its objective within 1e-6 of one server's SAGA run to convergence (tol 1e-12), when
    that converged; the same with the eval set by eval_source and with a small budget."""
    results = {}
    for name, extra in (("", {}), ("_evsrc", {"eval_source": f"SELECT * FROM {tbl}_ev"}),
                        ("_small", {"memory_limit_mb": small})):
        pp = dict({k: v for k, v in base.items() if not (extra.get("eval_source") and k == "eval_fraction")}, **extra)
        loc = trained_objective("saga", tbl, dict(pp, tol=1e-12, max_iter=5000))
        dist = trained_objective("saga", f"{tbl}_d", dict(pp, max_iter=5000))
        results["local" + name], results["dist" + name] = loc, dist
        if loc.startswith("OBJ") and dist.startswith("OBJ"):
            a, b = float(loc.split()[1]), float(dist.split()[1])
            # (only where both say they converged: OWL-QN at max_iter says it did not, as SAGA does)
            if loc.split()[2] == "tol" and dist.split()[2] != "max_iter" and abs(a - b) > 1e-6 * max(abs(a), 1e-3):
                results["objective" + name] = f"ERR: the objective across servers {b!r} is not one server's {a!r}"
        elif loc.startswith("OBJ") != dist.startswith("OBJ") and not (name == "_small" and "HINT" in loc + dist):
            # (under a small budget one server may need more than a shard: a named ERROR is an answer)
            results["outcome" + name] = "ERR: one server and the shards disagree on training at all"
    bad = {k: v for k, v in results.items()
           if v.startswith("ERR") and ("HINT" not in v or PLAIN.search(v) or "disagree" in v or "objective" in v)}
    verdict = "ERROR" if bad else "OK"
    print(f"case {case} {verdict} alg=saga (across servers: objectives) params={json.dumps(base)}", flush=True)
    if verdict != "OK" or os.environ.get("DIFF_VERBOSE"):
        for k, v in results.items():
            print(f"    {k}: {v[:400]}", flush=True)
    return verdict


def run_case(case, tbl, shape):
    alg, p, label = params_for(shape)
    grouped = label == "lrank"
    src_cols = f"*, {LABELS[label]} AS label"
    excl = ["id", "yr", "w"] + ([] if grouped else ["group_id"])
    base = dict(p, exclude_columns=excl)
    if shape["int_cats"]:
        base["categorical_columns"] = shape["int_cats"]
    if rnd.random() < 0.3:
        base["weight_column"] = "w"
        excl.remove("w")
    small = rnd.choice([12, 24, 48] if BIG else [2, 3, 4, 6, 8, 12])
    gpu_batch = rnd.choice([0, 0, 1, 7, 256, 5000])
    timeouts = [rnd.choice([20, 60, 150, 400]) for _ in range(2)]
    if DRY[0]:
        return "SKIP"
    results = {}
    src = f"SELECT {src_cols} FROM {tbl}"
    shift_eval_class = label == "lcls" and random.Random(SEED * 1000 + case).random() < 0.4
    if DISTRIBUTED:
        # the tables by name (the partitioned one trains across servers), the label a column
        base = dict(base, label_column=f"label_{label}",
                    exclude_columns=excl + [f"label_{k}" for k in LABELS if k != label])
        ev_tbl = f"{tbl}_ev"
        rc, out, err = psql(f"DROP TABLE IF EXISTS {ev_tbl}; CREATE TABLE {ev_tbl} AS SELECT * FROM {tbl} WHERE id % 5 = 0"
                            + (f"; UPDATE {ev_tbl} SET label_lcls = label_lcls + 1 WHERE id % 10 = 0"
                               if shift_eval_class else ""))
        assert rc == 0, err
        if alg == "saga":
            return saga_across(case, tbl, base, small)
        paths = {"local": (tbl, {}), "dist": (f"{tbl}_d", {}), "dist_small": (f"{tbl}_d", {"memory_limit_mb": small})}
    else:
        paths = {"mem": (src, {}), "spill": (src, {"memory_limit_mb": small}),
                 "order": (f"{src} ORDER BY md5(id::text)", {}),
                 "order_spill": (f"{src} ORDER BY md5(id::text) DESC", {"memory_limit_mb": small}),
                 "thr1": (f"{src} ORDER BY id DESC", {"threads": 1}),
                 "gpu": (src, {"device": "gpu"}),
                 "gpu_spill": (f"{src} ORDER BY md5(id::text)", {"device": "gpu", "memory_limit_mb": small})}
        if alg == "kmeans":
            paths["hybrid"] = (f"{src} ORDER BY id DESC", {"device": "hybrid"})
            paths["hybrid_spill"] = (f"{src} ORDER BY md5(id::text)", {"device": "hybrid", "memory_limit_mb": small})
    for name, (source, extra) in paths.items():
        pp = dict(base, **extra)
        if alg == "saga" and name.startswith("gpu") and gpu_batch:
            pp["batch_size"] = gpu_batch
        results[name] = train(name, alg, source, pp)
        if name == "mem" and not results[name].startswith("ERR"):
            bad = scores_differ(alg, label, tbl)
            if bad:
                results["scores"] = bad
    # an eval set given by eval_source (the rows the training source leaves out, on this server):
    # a group of its own; MultiClass's eval labels sometimes a class past the training's (its own
    # stream of draws, so a seed's other cases stay as they were)
    ev = {k: v for k, v in base.items() if k != "eval_fraction"}
    if DISTRIBUTED:
        # (the training rows are the whole table: a partitioned table cannot be filtered)
        ev["eval_source"] = f"SELECT * FROM {tbl}_ev"
        for name, source in (("evsrc_local", tbl), ("evsrc_dist", f"{tbl}_d")):
            results[name] = train(name, alg, source, ev)
    else:
        ev_label = LABELS[label] + (" + (id % 10 = 0)::int" if shift_eval_class else "")
        ev["eval_source"] = f"SELECT *, {ev_label} AS label FROM {tbl} WHERE id % 5 = 0"
        train_src = f"{src} WHERE id % 5 <> 0"
        for name, extra in (("evsrc", {}), ("evsrc_spill", {"memory_limit_mb": small}),
                            ("evsrc_gpu_spill", {"device": "gpu", "memory_limit_mb": small})):
            results[name] = train(name, alg, train_src, dict(ev, **extra))
        for name, extra, ms in (("cancel", {"memory_limit_mb": small}, timeouts[0]),
                                ("cancel_gpu", {"memory_limit_mb": small, "device": "gpu"}, timeouts[1])):
            bad = cancelled(alg, src, dict(base, **extra), ms)
            if bad:
                results[name] = bad
        fit = {"boost": "gbml.boost_fit(t, '%s')", "kmeans": "gbml.kmeans_fit(t, %d, '%s')",
               "saga": "gbml.saga_fit(t, '%s')"}[alg]
        ap = dict(base, label_column="label")
        k = ap.pop("k", None)
        for name, order, extra in (("agg", "ORDER BY id DESC", {}), ("agg_spill", "", {"memory_limit_mb": small})):
            js = json.dumps(dict(ap, **extra))
            call = fit % ((k, js) if alg == "kmeans" else (js,))
            results[name] = outcome(*psql(f"{PRE}SELECT md5({call}) FROM (SELECT {src_cols} FROM {tbl} {order}) t"))
        if shape["ncat"] == 0 and shape["nnum"] > 0:
            results.update(array_paths(alg, base, label, grouped, shape, small, tbl))
    # the groups whose paths must agree
    groups = {}
    for name, v in results.items():
        if v.startswith("ERR"):
            continue
        g = ("arr" if name.startswith("arr") else "evsrc_gpu" if alg == "saga" and name == "evsrc_gpu_spill" else
             "evsrc" if name.startswith("evsrc") else "gpu" if alg == "saga" and name.startswith("gpu") else "main")
        groups.setdefault(g, set()).add(v)
    bad = {k: v for k, v in results.items()
           if v.startswith("ERR") and ("HINT" not in v or PLAIN.search(v) or "files of its own left" in v)}
    verdict = ("MISMATCH" if any(len(v) > 1 for v in groups.values()) else "ERROR" if bad else "OK")
    print(f"case {case} {verdict} alg={alg} label={label} shape={shape} small={small} params={json.dumps(base)}",
          flush=True)
    if verdict != "OK" or os.environ.get("DIFF_VERBOSE"):
        for k, v in results.items():
            print(f"    {k}: {v[:400]}", flush=True)
    return verdict


def main():
    tbl = f"ds{SEED}" if DISTRIBUTED else f"dt{SEED}"
    counts = {}
    for case in range(COUNT):
        DRY[0] = ONLY >= 0 and case != ONLY
        shape = make_table(tbl)
        v = run_case(case, tbl, shape)
        counts[v] = counts.get(v, 0) + 1
    print("SUMMARY", SEED, counts, flush=True)
    sys.exit(1 if counts.get("MISMATCH") or counts.get("ERROR") else 0)


main()
