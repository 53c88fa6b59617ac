#!/usr/bin/env bash
# tests/bench/distributed_bench.sh — K-Means across servers (issue 14) against
# one server, on this machine: SHARDS shards (default 3), each its own cluster
# with N rows x D features (default 1,000,000 x 100, tests/bench/gen_rows.c,
# a seed per shard), a coordinator whose table is partitioned over them
# (postgres_fdw), and the union of the rows in one local table on the
# coordinator.  Both train K-Means (k KM_K, KM_ITERS Lloyd iterations, tol and
# min_frac_changed 0, k-means++) and the script prints, per side: wall
# seconds, init seconds, seconds per Lloyd iteration, and for the sharded run
# the round trips, bytes sent and received, bytes of one Lloyd pass, the
# coordinator's wait and the busiest shard's work per round trip (their
# difference is the coordination overhead), whether the model bytes are the
# same, and what a Lloyd iteration would take with each shard on a machine of
# its own (the single server's iteration / SHARDS + the overhead per round
# trip).  Then logistic regression: SAGA on one server against OWL-QN across
# the shards (objectives, iterations, seconds and bytes per gradient).  Then
# boosting (B_ITERS trees of depth B_DEPTH, RMSE on relevance): seconds per
# tree and for the borders and bins, round trips and bytes per tree, the
# coordination per round trip, the same model bytes, and the projected time
# per tree with a shard per machine; Depthwise trees, the MultiClass loss, an eval set (eval_fraction), AUC on it,
# a text column of 2,000 categories beside the array (its target statistics computed on the
# coordinator: the set-up's round trips and bytes printed), subsample 0.7, YetiRank on the query ids
# with subsample 0.7, RMSE with the query ids and subsample 0.7 (the rows' indices from the
# grouped merge), and the text column with the query ids (each query on one shard: its rows
# placed by the queries' sizes) and with ids shared by every shard (qs = query mod 100,000:
# each query on every shard, the rows placed by the grouped merge) (on relevance's five
# grades) the same way, a row each.
# Last, K-Means (one_hot) and logistic regression on the array beside a text column of 8
# categories: one-hot encoded on every shard by the union's counts (wall seconds, the same
# bytes / the objectives).  All
# clusters share this machine's cores, so the sharded time here is a
# correctness and overhead figure, not a speed-up.
# Needs gbml installed (make install); starts and removes its own clusters.
set -uo pipefail
N=${N:-1000000}
D=${D:-100}
SHARDS=${SHARDS:-3}
KM_K=${KM_K:-20}
KM_ITERS=${KM_ITERS:-10}
B_ITERS=${B_ITERS:-20}
B_DEPTH=${B_DEPTH:-6}
top=$(cd "$(dirname "$0")/../.." && pwd)
make -s -C "$top" -f tests/bench/bench.mk tests/bench/bin/gen_rows || exit 1
GEN=$top/tests/bench/bin/gen_rows
cd "$top/tests/ops" && source ./lib.sh

conf=("gbml.memory_limit = '8GB'" "max_parallel_workers_per_gather = 0" "work_mem = '64MB'")
new_cluster coord "${conf[@]}" || bail "initdb coord"
start_cluster coord || bail "start coord"
q coord postgres "CREATE EXTENSION gbml; CREATE EXTENSION postgres_fdw;
  CREATE TABLE t_local (id bigint, query bigint, f real[], relevance real, clicked real);
  CREATE TABLE t (id bigint, query bigint, f real[], relevance real, clicked real) PARTITION BY RANGE (query)" ||
  bail "coordinator set-up"
t0=$SECONDS
for s in $(seq 1 "$SHARDS"); do
  new_cluster shard$s "${conf[@]}" || bail "initdb shard$s"
  start_cluster shard$s || bail "start shard$s"
  q shard$s postgres "CREATE EXTENSION gbml; CREATE TABLE t (id bigint, query bigint, f real[], relevance real, clicked real)" ||
    bail "shard$s set-up"
  # the shard's rows, and the same rows again (deterministic) into the coordinator's local union;
  # gen_rows numbers queries from 0 in every stream: each shard's get a range of their own
  "$GEN" "$N" "$D" $((6 + s)) | q shard$s postgres "COPY t FROM STDIN (FORMAT binary)" || bail "load shard$s"
  q shard$s postgres "UPDATE t SET query = query + $s * 100000000" && q shard$s postgres "VACUUM ANALYZE t" ||
    bail "shard$s queries"
  "$GEN" "$N" "$D" $((6 + s)) | q coord postgres "COPY t_local FROM STDIN (FORMAT binary)" || bail "load the union"
  # (the union's copies of this shard's rows take its query range too: the queries are the shards')
  q coord postgres "UPDATE t_local SET query = query + $s * 100000000 WHERE query < 100000000" || bail "the union's queries"
  q coord postgres "CREATE SERVER shard$s FOREIGN DATA WRAPPER postgres_fdw
      OPTIONS (host '$OPS_WORK/shard$s', port '${OPS_PORT[shard$s]}', dbname 'postgres', extensions 'gbml');
    CREATE USER MAPPING FOR postgres SERVER shard$s OPTIONS (user 'postgres');
    CREATE FOREIGN TABLE t_$s PARTITION OF t FOR VALUES FROM ($s * 100000000) TO (($s + 1) * 100000000)
      SERVER shard$s OPTIONS (table_name 't')" || bail "partition $s"
done
# a text column of 2,000 categories (every row's query's, hashed) for the categorical row below
for c in $(seq 1 "$SHARDS"); do
  q shard$c postgres "ALTER TABLE t ADD COLUMN cat text, ADD COLUMN tier text, ADD COLUMN qs bigint;
    UPDATE t SET cat = 'g' || ((query * 7919) % 2000), tier = 't' || (query % 8), qs = query % 100000" &&
    q shard$c postgres "VACUUM ANALYZE t" || bail "shard$c's categorical column"
done
q coord postgres "ALTER TABLE t ADD COLUMN cat text, ADD COLUMN tier text, ADD COLUMN qs bigint;
  ALTER TABLE t_local ADD COLUMN cat text, ADD COLUMN tier text, ADD COLUMN qs bigint;
  UPDATE t_local SET cat = 'g' || ((query * 7919) % 2000), tier = 't' || (query % 8), qs = query % 100000" ||
  bail "the coordinator's categorical column"
q coord postgres "VACUUM ANALYZE t_local" || bail "analyze"
note "loaded $SHARDS x $N rows x $D features in $((SECONDS - t0)) s"
params="{\"k\": $KM_K, \"max_iter\": $KM_ITERS, \"tol\": 0, \"min_frac_changed\": 0, \"features_column\": \"f\", \"random_seed\": 5}"
run() { # name source [algorithm params]: prints wall seconds
  local t1 t2
  t1=$(date +%s.%N)
  q coord postgres "SELECT gbml.train('$1', '${3:-kmeans}', '$2', '${4:-$params}')" >/dev/null || return 1
  t2=$(date +%s.%N)
  echo "$(echo "$t2 - $t1" | bc)"
}
same_models() { # name name: t when the two models' bytes are the same
  q coord postgres "SELECT (SELECT model FROM gbml.models WHERE name = '$1') = (SELECT model FROM gbml.models WHERE name = '$2')"
}
one_wall=$(run km_one t_local) || bail "train on one server"
dist_wall=$(run km_dist t) || bail "train across the shards"
same=$(same_models km_one km_dist)
check "the sharded model is the single-server model, byte for byte" t "$same"
saga_params='{"loss": "logistic", "alpha": 0.0001, "standardize": true, "features_column": "f", "label_column": "clicked"}'
saga_one_wall=$(run lin_one t_local saga "$saga_params") || bail "SAGA on one server"
saga_dist_wall=$(run lin_dist t saga "$saga_params") || bail "OWL-QN across the shards"
boost_params="{\"iterations\": $B_ITERS, \"depth\": $B_DEPTH, \"features_column\": \"f\", \"label_column\": \"relevance\"}"
boost_one_wall=$(run b_one t_local boost "$boost_params") || bail "boosting on one server"
boost_dist_wall=$(run b_dist t boost "$boost_params") || bail "boosting across the shards"
same=$(same_models b_one b_dist)
check "the sharded boosting model is the single-server model, byte for byte" t "$same"
# the other tree shape and the multiclass loss: the same bytes, their cost a tree
variant_rows=""
for v in "Depthwise:\"grow_policy\": \"Depthwise\"" "MultiClass:\"loss\": \"MultiClass\"" \
         "eval_fraction_0.2:\"eval_fraction\": 0.2" \
         "AUC_on_eval_fraction_0.2:\"eval_fraction\": 0.2, \"eval_metric\": \"AUC\"" \
         "a_categorical_column:\"feature_columns\": [\"f\", \"cat\"]" \
         "subsample_0.7:\"subsample\": 0.7" \
         "YetiRank_subsample_0.7:\"group_column\": \"query\", \"subsample\": 0.7" \
         "RMSE_with_query_ids_subsample_0.7:\"loss\": \"RMSE\", \"group_column\": \"query\", \"subsample\": 0.7" \
         "categorical_RMSE_with_query_ids:\"loss\": \"RMSE\", \"group_column\": \"query\", \"feature_columns\": [\"f\", \"cat\"]" \
         "categorical_RMSE_queries_on_every_shard:\"loss\": \"RMSE\", \"group_column\": \"qs\", \"feature_columns\": [\"f\", \"cat\"]"; do
  vname=${v%%:*}
  vparams="{\"iterations\": $B_ITERS, \"depth\": $B_DEPTH, \"features_column\": \"f\", \"label_column\": \"relevance\", ${v#*:}}"
  w1=$(run "v_one_$vname" t_local boost "$vparams") || bail "$vname on one server"
  w2=$(run "v_dist_$vname" t boost "$vparams") || bail "$vname across the shards"
  same=$(same_models "v_one_$vname" "v_dist_$vname")
  check "boosting with $vname across the shards gives the single-server model bytes" t "$same"
  variant_rows="$variant_rows $vname:$w1:$w2:$same"
done

# K-Means (one_hot) and the linear model on the array and a text column of 8 categories
kmc_params="{\"k\": $KM_K, \"max_iter\": $KM_ITERS, \"tol\": 0, \"min_frac_changed\": 0, \"feature_columns\": [\"f\", \"tier\"], \"one_hot\": true, \"random_seed\": 5}"
kmc_one=$(run kmc_one t_local kmeans "$kmc_params") || bail "one-hot K-Means on one server"
kmc_dist=$(run kmc_dist t kmeans "$kmc_params") || bail "one-hot K-Means across the shards"
same=$(same_models kmc_one kmc_dist)
check "one-hot K-Means on a text column across the shards gives the single-server model bytes" t "$same"
linc_params='{"loss": "logistic", "alpha": 0.0001, "standardize": true, "feature_columns": ["f", "tier"], "label_column": "clicked"}'
linc_one=$(run linc_one t_local saga "$linc_params") || bail "one-hot SAGA on one server"
linc_dist=$(run linc_dist t saga "$linc_params") || bail "one-hot OWL-QN across the shards"
q coord postgres "SELECT 'one-hot K-Means (k $KM_K, $KM_ITERS iterations, ' || (gbml.model_info(model) ->> 'one_hot_columns') || ' columns) wall: one server $kmc_one s, sharded $kmc_dist s'
    FROM gbml.models WHERE name = 'kmc_dist'" | sed 's/^/# /'
q coord postgres "SELECT 'one-hot logistic regression wall: one server SAGA $linc_one s, sharded OWL-QN $linc_dist s; objective relative difference '
    || to_char(((d.metrics->>'objective')::float8 - (o.metrics->>'objective')::float8) / (o.metrics->>'objective')::float8, '9.99EEEE')
    || ' (SAGA ' || (gbml.model_info(o.model) ->> 'epochs') || ' epochs, OWL-QN ' || (gbml.model_info(d.model) ->> 'epochs') || ' iterations)'
    || '; the same one-hot columns: ' || (gbml.model_json(d.model) -> 'columns' = gbml.model_json(o.model) -> 'columns')
    FROM gbml.models d, gbml.models o WHERE d.name = 'linc_dist' AND o.name = 'linc_one'" | sed 's/^/# /'

python3 - "$one_wall" "$dist_wall" "$SHARDS" "$N" "$D" "$KM_K" "$saga_one_wall" "$saga_dist_wall" "$boost_one_wall" "$boost_dist_wall" "$B_DEPTH" "$variant_rows" <<PY
import json, subprocess, sys
one_wall, dist_wall, shards, n, d, k = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
def timings(name):
    out = subprocess.run(["$PGBIN/psql", "-X", "-At", "-h", "$OPS_WORK/coord", "-p", "${OPS_PORT[coord]}", "-U", "postgres",
                          "-d", "postgres", "-c", f"SELECT timings FROM gbml.models WHERE name = '{name}'"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)
a, b = timings("km_one"), timings("km_dist")
t = b["timings"] if "timings" in b else b
a = a["timings"] if "timings" in a else a
it_one = a["lloyd_seconds"] / max(1, len(a["s1_seconds"]))
it_dist = t["lloyd_seconds"] / max(1, len(t["s1_seconds"]))
rt = t["shard_round_trips"] - t.get("setup_round_trips", 0)
overhead = (t["coordination_seconds"] - (t.get("setup_wait_seconds", 0) - t.get("setup_shard_seconds", 0))) / rt
print(f"# {shards} shards x {n:,} rows x {d} features, k {k}")
print(f"# {'':34s} {'one server':>12s} {'sharded':>12s}")
print(f"# {'wall seconds (gbml.train)':34s} {one_wall:12.2f} {dist_wall:12.2f}")
print(f"# {'init (k-means++) seconds':34s} {a['init_seconds']:12.2f} {t['init_seconds']:12.2f}")
print(f"# {'seconds per Lloyd iteration':34s} {it_one:12.3f} {it_dist:12.3f}")
print(f"# round trips {t['shard_round_trips']}; sent {t['shard_bytes_sent']/1e6:.1f} MB, received {t['shard_bytes_received']/1e6:.1f} MB; "
      f"of which the rows' global order (16 bytes a row in, 8 out, once): {t.get('setup_round_trips', 0)} round trips, "
      f"{t.get('setup_bytes', 0)/1e6:.1f} MB, {t.get('setup_wait_seconds', 0):.2f} s")
print(f"# one Lloyd pass: {t['lloyd_pass_bytes']/1e3:.1f} kB over all shards (centroids out, sums and counts back)")
print(f"# coordinator waiting {t['shard_wait_seconds']:.2f} s, busiest shard working {t['shard_busy_seconds']:.2f} s: "
      f"coordination {1e3*overhead:.2f} ms per round trip after the order")
print(f"# projected Lloyd iteration, a shard per machine: {it_one/shards:.3f} s (one server's / {shards}) "
      f"+ {1e3*overhead:.2f} ms = {it_one/shards+overhead:.3f} s, {it_one/(it_one/shards+overhead):.2f}x one server")
def model(name):
    out = subprocess.run(["$PGBIN/psql", "-X", "-At", "-h", "$OPS_WORK/coord", "-p", "${OPS_PORT[coord]}", "-U", "postgres",
                          "-d", "postgres", "-c", f"SELECT metrics, timings, gbml.model_info(model) FROM gbml.models WHERE name = '{name}'"],
                         capture_output=True, text=True, check=True).stdout.strip().split("|")
    return [json.loads(x) for x in out]
(m1, t1, i1), (m2, t2, i2) = model("lin_one"), model("lin_dist")
t2 = t2.get("timings", t2)
t1 = t1.get("timings", t1)
o1, o2 = m1["objective"], m2["objective"]
ev = t2["shard_round_trips"] - 2
print(f"# logistic regression (alpha 1e-4, standardized): one server SAGA {float(sys.argv[7]):.2f} s, objective {o1:.9f}, "
      f"{i1.get('epochs')} epochs")
print(f"#   sharded OWL-QN {float(sys.argv[8]):.2f} s, objective {o2:.9f} ({(o2-o1)/abs(o1):+.2e} relative), "
      f"{i2.get('epochs')} iterations, {ev} gradient evaluations")
tr_it, tr_obj = i2.get("trace_epochs", []), i2.get("trace_objective", [])
best = min([o1, o2])
first = {}
for it, ob in zip(tr_it, tr_obj):
    for lvl in (1e-4, 1e-6, 1e-8):
        if lvl not in first and (ob - best) <= lvl * abs(best):
            first[lvl] = int(it)
print("#   OWL-QN iterations to within 1e-4 / 1e-6 / 1e-8 of the better objective: " +
      " / ".join(str(first.get(l, "-")) for l in (1e-4, 1e-6, 1e-8)))
print(f"#   per evaluation: {t2['solver_seconds']/max(1,ev):.3f} s, {t2['gradient_bytes']/1e3:.1f} kB; "
      f"coordination {1e3*t2['coordination_seconds']/t2['shard_round_trips']:.2f} ms per round trip")
b1, b2 = timings("b_one"), timings("b_dist")
b1 = b1.get("timings", b1)
b2 = b2.get("timings", b2)
depth = int(sys.argv[11])
trees = round(b2["boost_seconds"] / b2["seconds_per_tree"]) if b2["seconds_per_tree"] > 0 else 0
rt = b2["shard_round_trips"] - b2.get("setup_round_trips", 0)
boh = (b2["coordination_seconds"] - (b2.get("setup_wait_seconds", 0) - b2.get("setup_shard_seconds", 0))) / max(1, rt)
print(f"# boosting, RMSE, {trees} trees of depth {depth}")
print(f"# {'':34s} {'one server':>12s} {'sharded':>12s}")
print(f"# {'wall seconds (gbml.train)':34s} {float(sys.argv[9]):12.2f} {float(sys.argv[10]):12.2f}")
print(f"# {'borders and bins seconds':34s} {b1['quantize_seconds']:12.2f} {b2['quantize_seconds']:12.2f}")
print(f"# {'seconds per tree':34s} {b1['seconds_per_tree']:12.3f} {b2['seconds_per_tree']:12.3f}")
print(f"# round trips {b2['shard_round_trips']} ({rt / max(1, trees):.1f} per tree after the set-up); "
      f"set-up (order, border sample, borders): {b2.get('setup_round_trips', 0)} round trips, "
      f"{b2.get('setup_bytes', 0)/1e6:.1f} MB, {b2.get('setup_wait_seconds', 0):.2f} s")
print(f"# one tree: {b2['tree_bytes']/1e6:.2f} MB over all shards (maxima, splits and leaves out, histograms back)")
print(f"# coordination {1e3*boh:.2f} ms per round trip after the set-up")
# the split search stays on the coordinator; the rows' work divides among the shards
split = b1['split_seconds'] / max(1, trees)
rows = b1['seconds_per_tree'] - split
proj = rows / shards + split + (depth + 1) * boh
print(f"# projected tree, a shard per machine: {rows/shards:.3f} s (one server's row work / {shards}) + {split:.3f} s "
      f"(split search) + {depth + 1} x {1e3*boh:.2f} ms = {proj:.3f} s, {b1['seconds_per_tree']/proj:.2f}x one server")
print("# | boosting variant | one server s/tree | sharded s/tree | round trips a tree | kB a tree | set-up round trips | "
      "set-up MB | borders and bins s, one / sharded | same bytes |")
for row in sys.argv[12].split():
    name, w1, w2, same = row.split(":")
    v1, v2 = timings("v_one_" + name), timings("v_dist_" + name)
    v1, v2 = v1.get("timings", v1), v2.get("timings", v2)
    ntrees = round(v2["boost_seconds"] / v2["seconds_per_tree"]) if v2["seconds_per_tree"] > 0 else 0
    vrt = v2["shard_round_trips"] - v2.get("setup_round_trips", 0)
    print(f"# | {name} | {v1['seconds_per_tree']:.3f} | {v2['seconds_per_tree']:.3f} | {vrt / max(1, ntrees):.1f} | "
          f"{v2['tree_bytes']/1e3:.1f} | {v2.get('setup_round_trips', 0)} | {v2.get('setup_bytes', 0)/1e6:.1f} | "
          f"{v1['quantize_seconds']:.2f} / {v2['quantize_seconds']:.2f} | {'yes' if same == 't' else 'NO'} |")
PY
finish
