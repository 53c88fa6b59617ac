#!/usr/bin/env python3
"""tests/bench/spill_bench.py — the measuring half of spill_bench.sh (run by
it, inside its throwaway cluster, with the table t loaded): each trainer in
memory and past its budget, figures from the run report, same model bytes."""
import json, os, subprocess, time
env = os.environ
N, D, LIMIT, BIG = int(env["N"]), int(env["D"]), env["LIMIT"], env["BIG"]
# boosting holds its bins (a quarter of the features) and per-row state whatever the budget
LIMITS = {"boost": env.get("BOOST_LIMIT", "640"), "kmeans": LIMIT, "saga": LIMIT}
CATEGORICAL = env.get("CATEGORICAL", "0") == "1"
fits = {
    "boost": "gbml.boost_fit(f, relevance, query, %s)",
    "kmeans": "gbml.kmeans_fit(f, " + env["KM_K"] + ", %s)",
    "saga": "gbml.saga_fit(f, clicked, %s)",
}
params = {
    "boost": {"iterations": int(env["BOOST_ITERS"]), "depth": 6},
    "kmeans": {"max_iter": int(env["KM_ITERS"]), "random_seed": 3, "min_frac_changed": 0, "tol": 0},
    "saga": {"loss": "logistic", "alpha": 1e-4, "max_iter": int(env["SAGA_EPOCHS"]), "tol": 0},
}
if CATEGORICAL:
    # the whole-row forms over tc (t's columns and two text ones), the same trainings otherwise
    fits = {"boost": "gbml.boost_fit(s, %s)", "kmeans": "gbml.kmeans_fit(s, " + env["KM_K"] + ", %s)",
            "saga": "gbml.saga_fit(s, %s)"}
    params["boost"].update({"label_column": "relevance", "group_column": "query", "exclude_columns": ["id", "clicked"]})
    params["kmeans"].update({"one_hot": True, "exclude_columns": ["id", "query", "relevance", "clicked"]})
    params["saga"].update({"label_column": "clicked", "exclude_columns": ["id", "query", "relevance"]})
SOURCE = "tc s" if CATEGORICAL else "t"
def run(trainer, limit):
    p = dict(params[trainer])
    if limit is not None:
        p["memory_limit_mb"] = float(limit)
    sql = ("SELECT md5(m) FROM (SELECT " + fits[trainer] % ("'" + json.dumps(p) + "'") + " AS m FROM " + SOURCE + ") q;"
           " SELECT gbml.last_training_report();")
    t = time.perf_counter()
    out = subprocess.run(["psql", "-X", "-At", "-c", sql], check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - t
    lines = out.strip().splitlines()
    rep = json.loads(lines[-1])
    return {"wall": wall, "md5": lines[0], "prepare": rep["prepare_seconds"], "train": rep["train_seconds"],
            "peak": rep["peak_memory_mb"], "spilled": rep.get("spilled_rows", 0),
            "wrote": rep.get("temp_written_mb", 0), "read": rep.get("temp_read_mb", 0),
            "gone": rep.get("temp_discarded_mb", 0)}
print(f"\n{N:,} rows x {D} features = {N * D * 4 / 2**20:,.0f} MB of float features")
if CATEGORICAL:
    print("with two text columns (city: 64 values, device: 8), the aggregates' whole-row forms")
hdr = f"{'trainer':8} {'run':22} {'wall s':>8} {'prep s':>7} {'train s':>8} {'peak MB':>8} {'rows spilled':>13} {'temp W MB':>10} {'temp R MB':>10} {'given back MB':>14}"
print(hdr); print("-" * len(hdr))
# Page freshness swings a run's time on a virtual machine (pages the host has taken back fault in
# again, about 2.7 s a GB here, recycled ones do not), so the budgets alternate REPEAT times and
# the ratio is of the median walls, each run printed.
REPEAT = int(env.get("REPEAT", "3"))
for trainer in env["TRAINERS"].split():
    runs = [("default gbml.memory_limit", None)] if env["ONLY_DEFAULT"] == "1" else \
           [(f"budget {BIG} MB", BIG), (f"budget {LIMITS[trainer]} MB", LIMITS[trainer])]
    res = [[] for _ in runs]
    for rep in range(REPEAT if len(runs) == 2 else 1):
        for k, (name, limit) in enumerate(runs):
            r = run(trainer, limit)
            res[k].append(r)
            print(f"{trainer:8} {name:22} {r['wall']:8.1f} {r['prepare']:7.1f} {r['train']:8.1f} {r['peak']:8.1f} "
                  f"{r['spilled']:13,} {r['wrote']:10.0f} {r['read']:10.0f} {r['gone']:14.0f}", flush=True)
    if len(runs) == 2:
        med = [sorted(x["wall"] for x in rs)[len(rs) // 2] for rs in res]
        same = len({x["md5"] for rs in res for x in rs}) == 1
        print(f"{trainer:8} same model bytes: {same}; small / big budget wall time, medians of {REPEAT}: "
              f"{med[1]:.1f} / {med[0]:.1f} s = {med[1] / med[0]:.2f}", flush=True)
print("(boosting sends its float features to temporary files past 32 MB whatever the budget, and keeps bins:"
      " its big-budget run spills too; bench_boost --spill 0|1 compares it with the features in memory)")
