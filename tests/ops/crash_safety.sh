#!/usr/bin/env bash
# tests/ops/crash_safety.sh — a backend killed with SIGKILL in the middle of
# gbml.train or of gbml.deploy leaves the registry consistent after the crash
# restart: no half-written version, exactly one deployed version per name,
# scoring by name gives the same scores as before, and training / deploying
# still work afterwards.
#
# Five kills, each followed by the postmaster's crash recovery:
#   1. during the boosting iterations of a long gbml.train (autocommit);
#   2. after gbml.train returned inside an open transaction (its INSERT and the
#      deploy's UPDATEs written, not committed; the kill lands in pg_sleep);
#   3. after gbml.deploy returned inside an open transaction (likewise);
#   4. inside gbml.deploy, between its two UPDATEs: the previously deployed
#      version is already flagged false and the target's row is locked by
#      another session, so the second UPDATE waits (deterministic);
#   5. during a gbml.train of a model name that has no committed version yet.
# Then a training whose temporary files fill their filesystem (a 1 MB tmpfs
# as temp_tablespaces, where mounting one is allowed): disk_full, not a crash;
# and a REPEATABLE READ training that meets a newer version of its name: a
# serialization failure.
# Starts its own throwaway cluster; prints ok/not ok lines and "N passed, N failed".
cd "$(dirname "$0")" && source ./lib.sh

new_cluster main || bail "initdb"
start_cluster main || bail "start the cluster"
DB=postgres

q main $DB "CREATE EXTENSION gbml" || bail "CREATE EXTENSION gbml"
q_file main $DB <<'SQL' || bail "create the training data"
CREATE TABLE t AS
SELECT i AS id,
       ARRAY(SELECT ((i::bigint * 7919 + j * 104729) % 1000003) / 1000003.0 FROM generate_series(1, 20) AS j)::real[] AS features
  FROM generate_series(1, 50000) AS i;
ALTER TABLE t ADD COLUMN label real, ADD COLUMN cls real;
UPDATE t SET label = features[1] * 3 + features[2] * features[3], cls = (features[1] > 0.5)::int;
CREATE INDEX ON t (id);
VACUUM ANALYZE t;
SQL

# committed versions: ranker v1..v3 (v2 deployed), clusters v1..v2 (v2), lin v1
q_file main $DB <<'SQL' >/dev/null || bail "train the committed versions"
SELECT gbml.train('ranker', 'boost', 'SELECT features, label FROM t WHERE id % 20 = 0', '{"iterations": 20}');
SELECT gbml.train('ranker', 'boost', 'SELECT features, label FROM t WHERE id % 20 = 1', '{"iterations": 25}');
SELECT gbml.train('ranker', 'boost', 'SELECT features, label FROM t WHERE id % 20 = 2', '{"iterations": 30}');
SELECT gbml.deploy('ranker', 2);
SELECT gbml.train('clusters', 'kmeans', 'SELECT features FROM t WHERE id % 10 = 0', '{"k": 4}');
SELECT gbml.train('clusters', 'kmeans', 'SELECT features FROM t WHERE id % 10 = 1', '{"k": 5}');
SELECT gbml.train('lin', 'saga', 'SELECT features, cls AS label FROM t WHERE id % 10 = 0', '{"loss": "logistic"}');
SQL

REGISTRY_SQL="SELECT string_agg(format('%s:%s:%s:%s:%s', id, name, version, deployed, md5(model)), ' ' ORDER BY name, version) FROM gbml.models"
SCORES_SQL="SELECT string_agg(format('%s/%s/%s/%s', gbml.predict('ranker', features), gbml.kmeans_assign('clusters', features),
                                     gbml.predict_proba('lin', features), gbml.kmeans_distance('clusters', features)), ' ' ORDER BY id)
              FROM t WHERE id <= 25"
ONE_DEPLOYED_SQL="SELECT string_agg(format('%s=%s', name, n), ' ' ORDER BY name)
                    FROM (SELECT name, count(*) FILTER (WHERE deployed) AS n FROM gbml.models GROUP BY name) s"
registry_before=$(q main $DB "$REGISTRY_SQL")
scores_before=$(q main $DB "$SCORES_SQL")
deployed_before=$(q main $DB "SELECT string_agg(name || ':' || version, ' ' ORDER BY name) FROM gbml.models WHERE deployed")
check "before the kills: one deployed version per name" "clusters=1 lin=1 ranker=1" "$(q main $DB "$ONE_DEPLOYED_SQL")"
check "before the kills: ranker v2, clusters v2, lin v1 deployed" "clusters:2 lin:1 ranker:2" "$deployed_before"
[ -n "$scores_before" ] || bail "score by name before the kills"

crashes=0
# kill_backend LABEL PID: SIGKILL, then wait for the crash restart
kill_backend() {
  local label=$1 pid=$2
  if ! kill -KILL "$pid"; then notok "$label: SIGKILL backend $pid"; return 1; fi
  crashes=$((crashes + 1))
  # the postmaster notices, kills every backend, reinitializes and replays WAL
  local i
  for ((i = 0; i < 300; i++)); do
    [ "$(grep -c 'all server processes terminated; reinitializing' "$OPS_WORK/main/server.log")" -ge $crashes ] && break
    sleep 0.1
  done
  if wait_ready main 60 && poll main $DB 30 "SELECT NOT pg_is_in_recovery()" >/dev/null; then
    ok "$label: server back after crash recovery"
  else
    notok "$label: server back after crash recovery"; return 1
  fi
}

# after_crash LABEL: the registry is exactly what was committed and scores the same
after_crash() {
  local label=$1
  check "$label: registry rows (id, name, version, deployed, md5(model)) are the committed ones" \
    "$registry_before" "$(q main $DB "$REGISTRY_SQL")"
  check "$label: exactly one deployed version per name" "clusters=1 lin=1 ranker=1" "$(q main $DB "$ONE_DEPLOYED_SQL")"
  check "$label: scoring by name gives the same scores" "$scores_before" "$(q main $DB "$SCORES_SQL")"
}

# backend_of APPNAME CONDITION: pid of the session named APPNAME once CONDITION holds
backend_of() {
  poll main $DB 60 "SELECT pid FROM pg_stat_activity WHERE application_name = '$1' AND ($2)"
}

# 1. SIGKILL during the boosting iterations of a long training (~150 s if left alone)
bg main $DB "$OPS_WORK/train1.out" ops_victim \
  "SELECT gbml.train('ranker', 'boost', 'SELECT features, label FROM t', '{\"iterations\": 5000, \"depth\": 6}')"
victim=$BG_PID
pid=$(backend_of ops_victim "state = 'active' AND query LIKE '%gbml.train%' AND now() - query_start > interval '2 s'")
if [ -z "$pid" ]; then
  notok "1. the long gbml.train is running"
else
  ok "1. the long gbml.train is running (backend $pid, 2 s in)"
  kill_backend "1. SIGKILL during gbml.train's boosting" "$pid"
  wait "$victim"; rc=$?
  check "1. the killed gbml.train's client lost its connection, no model id returned" "failed:" \
    "$([ $rc -ne 0 ] && echo failed || echo "rc $rc"):$(grep -E '^[0-9]+$' "$OPS_WORK/train1.out")"
  after_crash "1. kill during training"
fi

# 2. SIGKILL after gbml.train returned in an open transaction: the new version is written, uncommitted
bg main $DB "$OPS_WORK/train2.out" ops_victim \
  "BEGIN; SELECT gbml.train('ranker', 'boost', 'SELECT features, label FROM t WHERE id % 20 = 3', '{\"iterations\": 20}'); SELECT pg_sleep(120);"
victim=$BG_PID
pid=$(backend_of ops_victim "wait_event = 'PgSleep'")
if [ -z "$pid" ]; then
  notok "2. gbml.train returned in an open transaction"
else
  check "2. the open transaction holds the new version's row (RowExclusiveLock on gbml.models)" t \
    "$(q main $DB "SELECT EXISTS (SELECT FROM pg_locks WHERE pid = $pid AND relation = 'gbml.models'::regclass AND mode = 'RowExclusiveLock' AND granted)")"
  kill_backend "2. SIGKILL with gbml.train's version uncommitted" "$pid"
  wait "$victim"
  after_crash "2. kill before train's commit"
fi

# 3. SIGKILL after gbml.deploy returned in an open transaction
bg main $DB "$OPS_WORK/deploy3.out" ops_victim "BEGIN; SELECT gbml.deploy('ranker', 1); SELECT gbml.deploy('clusters', 1); SELECT pg_sleep(120);"
victim=$BG_PID
pid=$(backend_of ops_victim "wait_event = 'PgSleep'")
if [ -z "$pid" ]; then
  notok "3. gbml.deploy returned in an open transaction"
else
  check "3. the open transaction holds the deploys' advisory locks and row locks" "2|t" \
    "$(q main $DB "SELECT count(*) FILTER (WHERE locktype = 'advisory'), bool_or(relation = 'gbml.models'::regclass AND mode = 'RowExclusiveLock') FROM pg_locks WHERE pid = $pid")"
  kill_backend "3. SIGKILL with gbml.deploy uncommitted" "$pid"
  wait "$victim"
  after_crash "3. kill before deploy's commit"
fi

# 4. SIGKILL inside gbml.deploy, between its two UPDATEs: another session locks the
#    target row, so deploy has cleared the deployed flag of v2 and waits to set v1's
bg main $DB "$OPS_WORK/blocker.out" ops_blocker \
  "BEGIN; SELECT id FROM gbml.models WHERE name = 'ranker' AND version = 1 FOR UPDATE; SELECT pg_sleep(120);"
blocker=$BG_PID
bpid=$(backend_of ops_blocker "wait_event = 'PgSleep'")
if [ -z "$bpid" ]; then
  notok "4. the blocking session holds ranker v1's row"
else
  bg main $DB "$OPS_WORK/deploy4.out" ops_victim "SELECT gbml.deploy('ranker', 1)"
  victim=$BG_PID
  pid=$(backend_of ops_victim "wait_event_type = 'Lock' AND $bpid = ANY (pg_blocking_pids(pid))")
  if [ -z "$pid" ]; then
    notok "4. gbml.deploy waits on the target row inside its transaction"
  else
    # the first UPDATE ran: the deploy's transaction has an xid and its row lock on v2
    check "4. gbml.deploy is between its UPDATEs (v2's row updated by its xid, waiting for v1's row lock)" t \
      "$(q main $DB "SELECT a.wait_event = 'transactionid' AND m.xmax::text = a.backend_xid::text
                       FROM pg_stat_activity a, gbml.models m WHERE a.pid = $pid AND m.name = 'ranker' AND m.version = 2")"
    kill_backend "4. SIGKILL inside gbml.deploy" "$pid"
    wait "$victim" "$blocker"
    after_crash "4. kill inside deploy"
  fi
fi

# 5. SIGKILL during the first training of a new name: no row for it afterwards
bg main $DB "$OPS_WORK/train5.out" ops_victim \
  "SELECT gbml.train('fresh', 'boost', 'SELECT features, label FROM t', '{\"iterations\": 5000}')"
victim=$BG_PID
pid=$(backend_of ops_victim "state = 'active' AND now() - query_start > interval '1 s'")
if [ -z "$pid" ]; then
  notok "5. the first gbml.train of 'fresh' is running"
else
  kill_backend "5. SIGKILL during the first training of a new name" "$pid"
  wait "$victim"
  after_crash "5. kill during a new name's first training"
  check "5. no version of 'fresh' and scoring it says so" \
    "0|gbml.predict: no deployed model named \"fresh\"" \
    "$(q main $DB "SELECT count(*) FROM gbml.models WHERE name = 'fresh'")|$(errline "$(q_err main $DB "SELECT gbml.predict('fresh', features) FROM t LIMIT 1")")"
fi

check "the server log shows $crashes backend SIGKILLs and crash restarts" "$crashes:$crashes" \
  "$(grep -c 'was terminated by signal 9' "$OPS_WORK/main/server.log"):$(grep -c 'all server processes terminated; reinitializing' "$OPS_WORK/main/server.log")"

# the registry's indexes (primary key, (name, version), one deployed per name) are intact
if q main $DB "CREATE EXTENSION IF NOT EXISTS amcheck" 2>/dev/null; then
  check "amcheck: gbml.models' three indexes are consistent with the heap" "3" \
    "$(q main $DB "SELECT count(bt_index_check(indexrelid, true)) FROM pg_index WHERE indrelid = 'gbml.models'::regclass" 2>&1)"
else
  note "amcheck not installed: index check skipped"
fi

# the registry still works: next version number, deploy, roll back
new_id=$(q main $DB "SELECT gbml.train('ranker', 'boost', 'SELECT features, label FROM t WHERE id % 20 = 4', '{\"iterations\": 20}')")
check "after the crashes gbml.train records ranker v4 (next after the committed v3) and deploys it" "4|t" \
  "$(q main $DB "SELECT version, deployed FROM gbml.models WHERE id = ${new_id:-0}")"
check "after the crashes its id is new" t "$(q main $DB "SELECT ${new_id:-0} > max(id) FILTER (WHERE id <> ${new_id:-0}) FROM gbml.models")"
q main $DB "SELECT gbml.deploy('ranker', 2)" >/dev/null
check "after the crashes gbml.deploy rolls back to v2, one deployed per name, same scores" \
  "clusters=1 lin=1 ranker=1|$scores_before" "$(q main $DB "$ONE_DEPLOYED_SQL")|$(q main $DB "$SCORES_SQL")"

# 6. a full filesystem under the temporary files (a 1 MB tmpfs as
# temp_tablespaces; skipped where mounting is refused): disk_full with a
# hint, nothing left there, the server up
TS_DIR=$OPS_WORK/small_tmp
mkdir -p "$TS_DIR"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=1m tmpfs "$TS_DIR" 2>/dev/null; then
  chown postgres: "$TS_DIR"
  q main $DB "CREATE TABLESPACE small_tmp LOCATION '$TS_DIR'"
  out=$(OPS_VERBOSITY=verbose q_err main $DB "SET temp_tablespaces = small_tmp; SELECT gbml.train('full', 'kmeans', 'SELECT features FROM t', '{\"k\": 4, \"memory_limit_mb\": 2}')")
  check "a full filesystem under the temporary files: SQLSTATE 53100 (disk_full), its hint naming temp_tablespaces" \
    "53100|yes" "$(sqlstate "$out")|$(hintline "$out" | grep -q temp_tablespaces && echo yes)"
  check "... no temporary file left there, no version recorded" "0|0" \
    "$(q main $DB "SELECT count(*) FROM pg_ls_tmpdir((SELECT oid FROM pg_tablespace WHERE spcname = 'small_tmp'))")|$(q main $DB "SELECT count(*) FROM gbml.models WHERE name = 'full'")"
  # SAGA's rows go to the file grouped by hash, each group's run written at
  # once (120 floats a row, 24 MB: past half the budget, with room left for
  # the groups' staging, at least 32 KB a group)
  out=$(OPS_VERBOSITY=verbose q_err main $DB "SET temp_tablespaces = small_tmp; SELECT gbml.train('full', 'saga', 'SELECT features || features || features || features || features || features AS f, label FROM t', '{\"label_column\": \"label\", \"memory_limit_mb\": 40}')")
  check "... SAGA's runs grouped by hash on it: 53100 too, nothing left there" "53100|0" \
    "$(sqlstate "$out")|$(q main $DB "SELECT count(*) FROM pg_ls_tmpdir((SELECT oid FROM pg_tablespace WHERE spcname = 'small_tmp'))")"
  q main $DB "DROP TABLESPACE small_tmp"
  umount "$TS_DIR"
else
  note "no tmpfs could be mounted: the full-filesystem check skipped"
fi

# 7. gbml.train in a REPEATABLE READ transaction whose snapshot predates a
# version another session recorded: a serialization failure (40001, which
# clients retry) with a hint, not the unique index's message
q main $DB "SELECT gbml.train('rr', 'kmeans', 'SELECT features FROM t WHERE id % 50 = 0', '{\"k\": 2}')" >/dev/null
bg main $DB "$OPS_WORK/rr.out" rr_session "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM gbml.models; SELECT pg_sleep(2); SELECT gbml.train('rr', 'kmeans', 'SELECT features FROM t WHERE id % 50 = 1', '{\"k\": 2}'); COMMIT"
sleep 0.5
q main $DB "SELECT gbml.train('rr', 'kmeans', 'SELECT features FROM t WHERE id % 50 = 2', '{\"k\": 2}')" >/dev/null
wait "$BG_PID"
rr_out=$(sed 's/^psql:[^:]*:[0-9]*: //' "$OPS_WORK/rr.out")
check "a REPEATABLE READ gbml.train meeting a newer version of its name: a serialization failure, with its hint" \
  "serialization failure|yes" \
  "$(grep -q 'another session recorded a version of "rr"' <<<"$rr_out" && echo 'serialization failure')|$(hintline "$rr_out" | grep -q 'Retry the transaction' && echo yes)"
check "... the registry holds versions 1 and 2 of rr" "1,2" "$(q main $DB "SELECT string_agg(version::text, ',' ORDER BY version) FROM gbml.models WHERE name = 'rr'")"

finish
