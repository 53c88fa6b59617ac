#!/usr/bin/env python3
"""kmeans_bench.py — gbml K-Means beside scikit-learn, in one run.

The K-Means seed's experiments, on this machine (2 threads for both):
  1. correctness: spambase, k = 10/20/50, the same initial centroids, both
     run to convergence (tol = 0, min_frac_changed = 0): inertia relative
     difference, label agreement, iterations;
  2. time per Lloyd iteration and the S1/S2 split: spambase k = 10/20/50 and
     synthetic 100,000 points of 10/50/100 dimensions with 10/50/100 clusters,
     the same data and initial centroids for both.  gbml: median over the
     iterations of its own S1+S2 timers.  scikit-learn (Lloyd, float32 and
     float64 input, the faster one is the peer): (t(fit, max_iter=20) -
     t(fit, max_iter=10)) / (n_iter difference) with tol=0, so the fixed
     costs of fit() cancel; best of REPEAT for every timing;
  3. k-means++ init time (gbml's init vs sklearn.cluster.kmeans_plusplus);
  4. quality: adjusted Rand index against the ground truth of the clustering
     benchmarks (k-means++, n_init = 3, default tolerances of each).

Run:  $(tests/bench/venv.sh) tests/bench/kmeans_bench.py [--quick]
The machine is shared: absolute times are noisy, read the ratios
(> 1 means gbml is faster).
"""
import os
import sys

# The peer's OpenBLAS must pick its own kernel: drop the overrides before numpy loads.
if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("OPENBLAS_L2_SIZE"):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import json
import statistics
import subprocess
import tempfile
import time

import numpy as np
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from threadpoolctl import threadpool_info, threadpool_limits

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
DATA = os.path.abspath(os.path.join(REPO, "..", "shared", "data"))
BIN = os.path.join(REPO, "tests", "bench", "bin", "bench_kmeans")
THREADS = 2
QUICK = "--quick" in sys.argv
REPEAT = 2 if QUICK else 3
PEAK_GFLOPS = 290.0  # DESIGN.md: float32 matrix products on the 2-core build machine


def build():
    subprocess.run(["make", "-s", "-f", "tests/bench/bench.mk", "tests/bench/bin/bench_kmeans"],
                   check=True, cwd=REPO)


def gbml(tmp, X, k, init, max_iter=300, tol=0.0, min_frac=0.0, repeat=1, labels=False, extra=()):
    """Runs the C driver on float32 X; init: 'k-means++' | 'random' | array."""
    xf = os.path.join(tmp, "X.f32")
    if not os.path.exists(xf) or getattr(gbml, "_cached", None) is not X:
        np.ascontiguousarray(X, dtype=np.float32).tofile(xf)
        gbml._cached = X
    args = [BIN, "--bin", xf, "--rows", str(X.shape[0]), "--cols", str(X.shape[1]), "--k", str(k),
            "--max-iter", str(max_iter), "--tol", str(tol), "--min-frac", str(min_frac),
            "--threads", str(THREADS), "--repeat", str(repeat)] + list(extra)
    if isinstance(init, str):
        args += ["--init", init]
    else:
        fi = os.path.join(tmp, "init.f64")
        np.ascontiguousarray(init, dtype=np.float64).tofile(fi)
        args += ["--init", fi]
    lf = os.path.join(tmp, "labels.i32")
    if labels:
        args += ["--labels-out", lf]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    r = json.loads(out.stdout)
    if labels:
        r["labels"] = np.fromfile(lf, dtype=np.int32)
    return r


def sk_fit(X, k, init, max_iter, tol=0.0):
    with threadpool_limits(THREADS):
        t = time.perf_counter()
        km = KMeans(k, init=init, n_init=1, algorithm="lloyd", tol=tol, max_iter=max_iter).fit(X)
        return time.perf_counter() - t, km


def per_iter(t1, i1, t2, i2):
    """Seconds per iteration from two fits of i1 < i2 iterations (fixed costs cancel)."""
    if i2 > i1 and t2 > t1:
        return (t2 - t1) / (i2 - i1), "diff"
    return t2 / max(i2, 1), "fit/iter"


def sk_per_iter(X, k, init, n1=10, n2=20):
    """scikit-learn: best of REPEAT fits with max_iter n1 and n2."""
    best = {}
    for n in (n1, n2):
        ts, it = [], None
        for _ in range(REPEAT):
            t, km = sk_fit(X, k, init, n)
            ts.append(t)
            it = km.n_iter_
        best[n] = (min(ts), it)
    return per_iter(best[n1][0], best[n1][1], best[n2][0], best[n2][1])


def gbml_per_iter(tmp, X, k, init, n1=10, n2=20):
    """gbml, timed exactly like the peer: best of REPEAT fits with max_iter n1 and n2."""
    r1 = gbml(tmp, X, k, init, max_iter=n1, repeat=REPEAT)
    r2 = gbml(tmp, X, k, init, max_iter=n2, repeat=REPEAT)
    return per_iter(r1["fit_seconds"], r1["iterations"], r2["fit_seconds"], r2["iterations"]), r2


def load_csv(path):
    a = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64)
    return a[:, 1:].astype(np.float32), a[:, 0].astype(np.int64)


def main():
    if not os.path.exists(os.path.join(DATA, "spambase", "spambase.csv")):
        print("kmeans_bench: %s/spambase is absent — skipping (the bench needs ../shared/data)" % DATA)
        return 0
    build()
    blas = [(i.get("internal_api"), i.get("architecture"), i.get("num_threads")) for i in threadpool_info()]
    print("peer: scikit-learn %s, numpy %s; threadpoolctl reports %s" % (
        __import__("sklearn").__version__, np.__version__, blas))
    print("threads: %d for both; machine load average at start: %s" % (THREADS, os.getloadavg()))
    tmp = tempfile.mkdtemp(prefix="kmeans_bench_")
    Xs, _ = load_csv(os.path.join(DATA, "spambase", "spambase.csv"))

    # ---- 1. correctness ----
    print("\n## 1. Correctness: spambase, same initial centroids (k-means++ of sklearn, seed = k), run to convergence")
    print("| k | gbml iters | sklearn iters | gbml inertia | sklearn inertia | rel. diff | labels agree | rows re-checked in double |")
    print("|---|---|---|---|---|---|---|---|")
    ok = True
    for k in (10, 20, 50):
        init, _ = kmeans_plusplus(Xs.astype(np.float64), k, random_state=k)
        r = gbml(tmp, Xs, k, init, labels=True)
        _, km = sk_fit(Xs.astype(np.float64), k, init, 300)
        rel = abs(r["inertia"] - km.inertia_) / km.inertia_
        agree = float(np.mean(r["labels"] == km.labels_))
        ok &= rel <= 1e-6 and agree == 1.0
        print("| %d | %d | %d | %.10g | %.10g | %.1e | %.4f | %d |" % (
            k, r["iterations"], km.n_iter_, r["inertia"], km.inertia_, rel, agree, r["rechecked"]))
    print("correctness: %s (criterion: inertia within 1e-6 relative and every label equal)" % ("PASS" if ok else "FAIL"))

    # ---- 2. time per iteration ----
    print("\n## 2. Time per Lloyd iteration, 2 threads (ms); ratio = sklearn / gbml (> 1: gbml faster)")
    print("both timed the same way: (t(fit, max_iter=20) - t(fit, max_iter=10)) / iterations between, tol=0, "
          "same data and initial centroids, best of %d fits each; S1/S2: gbml's own phase timers "
          "(median over the iterations of its fastest 20-iteration fit)" % REPEAT)
    print("| data | n | d | k | gbml ms/iter | gbml S1 ms | gbml S2 ms | S1/S2 | S1 vs floor | sklearn f32 | sklearn f64 | ratio (best sklearn / gbml) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    cells = [("spambase", Xs, k) for k in (10, 20, 50)]
    dims = (10, 50, 100)
    ks = (10, 50, 100)
    if QUICK:
        dims, ks = (10, 100), (10, 100)
    synth = {}
    for d in dims:
        for k in ks:
            cells.append(("synthetic", (d, k), k))
    ratios = []
    for name, X, k in cells:
        if name == "synthetic":
            d, kk = X
            X, _ = make_blobs(100000, d, centers=kk, cluster_std=8.0, center_box=(-10, 10), random_state=d * 1000 + kk)
            X = X.astype(np.float32)
            synth[(d, kk)] = X
        rng = np.random.default_rng(k)
        init = X[rng.choice(X.shape[0], k, replace=False)].astype(np.float64)
        (ours, mo), r = gbml_per_iter(tmp, X, k, init)
        s1 = statistics.median(r["s1"])
        s2 = statistics.median(r["s2"])
        sk32, m32 = sk_per_iter(X, k, init.astype(np.float32))
        sk64, m64 = sk_per_iter(X.astype(np.float64), k, init)
        best = min(sk32, sk64)
        ratios.append(best / ours)
        floor = 2.0 * X.shape[0] * k * X.shape[1] / (PEAK_GFLOPS * 1e9)
        print("| %s | %d | %d | %d | %.3f%s | %.3f | %.3f | %.1f | %.0f%% | %.3f%s | %.3f%s | %.2f |" % (
            name, X.shape[0], X.shape[1], k, ours * 1e3, "" if mo == "diff" else "*", s1 * 1e3, s2 * 1e3, s1 / s2 if s2 > 0 else float("inf"),
            100 * floor / s1, sk32 * 1e3, "" if m32 == "diff" else "*", sk64 * 1e3, "" if m64 == "diff" else "*",
            best / ours))
    print("(* converged before 20 iterations, or the difference was not positive on this noisy machine: "
          "fit time / iterations, fixed costs included)")
    print("S1 vs floor: 2nkd / %.0f GFLOP/s (the float32 matrix-product peak of DESIGN.md) over gbml's S1 time" % PEAK_GFLOPS)
    print("per-iteration ratio: min %.2f, median %.2f, max %.2f" % (min(ratios), statistics.median(ratios), max(ratios)))

    # ---- 3. k-means++ init ----
    print("\n## 3. k-means++ init, 2 threads (ms), best of %d; ratio = sklearn / gbml" % REPEAT)
    print("| data | d | k | gbml init | sklearn kmeans_plusplus f32 | f64 | ratio |")
    print("|---|---|---|---|---|---|---|")
    init_cells = [("spambase", Xs, 50)] + [("synthetic", synth[(d, k)], k) for (d, k) in sorted(synth) if d == k or QUICK]
    for name, X, k in init_cells:
        r = gbml(tmp, X, k, "k-means++", max_iter=1, repeat=REPEAT)
        sk = {}
        for dt in (np.float32, np.float64):
            Xd = X.astype(dt)
            ts = []
            for rep in range(REPEAT):
                with threadpool_limits(THREADS):
                    t = time.perf_counter()
                    kmeans_plusplus(Xd, k, random_state=rep)
                    ts.append(time.perf_counter() - t)
            sk[dt] = min(ts)
        best = min(sk.values())
        print("| %s | %d | %d | %.2f | %.2f | %.2f | %.2f |" % (
            name, X.shape[1], k, r["init_seconds"] * 1e3, sk[np.float32] * 1e3, sk[np.float64] * 1e3,
            best / r["init_seconds"]))

    # ---- 4. quality ----
    print("\n## 4. Quality on the clustering benchmarks (ground-truth labels): k-means++, n_init = 3, seed 0")
    print("gbml defaults (tol 1e-4 of the mean variance, min_frac_changed 0.001); sklearn defaults (tol 1e-4)")
    print("| data | n | k | gbml ARI | sklearn ARI | gbml inertia | sklearn inertia | gbml iters (kept run) |")
    print("|---|---|---|---|---|---|---|---|")
    known_k = {"s1": 15, "s2": 15, "s3": 15, "s4": 15, "a1": 20, "a2": 35, "a3": 50,
               "birch1": 100, "birch2": 100, "unbalance": 8}
    cb = os.path.join(DATA, "clustering_benchmarks")
    for name in sorted(known_k):
        path = os.path.join(cb, name + ".csv")
        if not os.path.exists(path):
            continue
        X, y = load_csv(path)
        k = known_k[name]
        r = gbml(tmp, X, k, "k-means++", max_iter=300, tol=1e-4, min_frac=0.001, labels=True,
                 extra=("--n-init", "3", "--seed", "0"))
        with threadpool_limits(THREADS):
            km = KMeans(k, n_init=3, random_state=0).fit(X.astype(np.float64))
        print("| %s | %d | %d | %.4f | %.4f | %.6g | %.6g | %d |" % (
            name, X.shape[0], k, adjusted_rand_score(y, r["labels"]), adjusted_rand_score(y, km.labels_),
            r["inertia"], km.inertia_, r["iterations"]))
    print("\nmachine load average at the end: %s" % (os.getloadavg(),))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
