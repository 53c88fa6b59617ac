#!/usr/bin/env bash
# tests/ops/replica.sh — on a physical hot standby (a second throwaway cluster
# streaming from the first) scoring by name and by bytea works and gives the
# primary's scores; the registry's changes on the primary (new versions, a
# redeploy) reach it; recording a model there fails at once with a clear ERROR
# that says the server is read-only.  The training aggregates write nothing, so
# they work on a standby and give the primary's model bytes.  Last, the standby
# is promoted and trains.
#
# The messages are recorded as "# message: ..." lines.  gbml.deploy says at once
# that a standby (DEPLOY_MSG) or a READ ONLY transaction (DEPLOY_RO_XACT_MSG)
# cannot change the deployed version (the 0.2.0 update script's check);
# GBML_OPS_EXPECT_DEPLOY_CHECK=0 expects 0.1.0's generic message instead.
# Starts its own throwaway clusters; prints ok/not ok lines and "N passed, N failed".
cd "$(dirname "$0")" && source ./lib.sh

TRAIN_MSG='gbml.train: the server is read-only (a standby in recovery): a new model version cannot be recorded here'
TRAIN_RO_XACT_MSG='gbml.train: the transaction is read-only: a new model version cannot be recorded'
DEPLOY_MSG='gbml.deploy: the server is read-only (a standby in recovery): the deployed version cannot be changed here'
DEPLOY_RO_XACT_MSG='gbml.deploy: the transaction is read-only: the deployed version cannot be changed'
GENERIC_DEPLOY_MSG='cannot execute UPDATE in a read-only transaction'

new_cluster primary "wal_level = replica" "max_wal_senders = 4" || bail "initdb the primary"
start_cluster primary || bail "start the primary"
DB=postgres
q_file primary $DB <<'SQL' >/dev/null || bail "set up the primary"
CREATE EXTENSION gbml;
CREATE TABLE t AS
SELECT i AS id, (i % 40)::bigint AS qid,
       ARRAY(SELECT ((i::bigint * 7919 + j * 104729) % 1000003) / 1000003.0 FROM generate_series(1, 8) AS j)::real[] AS features
  FROM generate_series(1, 20000) AS i;
ALTER TABLE t ADD COLUMN label real, ADD COLUMN cls real;
UPDATE t SET label = floor(features[1] * 4), cls = (features[2] + features[3] > 1)::int;
SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t WHERE id % 2 = 0',
                  '{"loss": "YetiRank", "iterations": 30}');
SQL

# the standby: a base backup with primary_conninfo and standby.signal (-R), its own port and socket
mkdir -p "$OPS_WORK/standby" && { [ "$(id -u)" != 0 ] || chown postgres: "$OPS_WORK/standby"; }
# shellcheck disable=SC2046  # pgargs: options to split; the paths come from mktemp
as_pg "$PGBIN/pg_basebackup" $(pgargs primary) -D "$OPS_WORK/standby/data" -R -X stream -c fast --no-sync \
  >"$OPS_WORK/basebackup.log" 2>&1 || { cat "$OPS_WORK/basebackup.log"; bail "pg_basebackup -R"; }
cluster_conf standby "hot_standby = on"
start_cluster standby || bail "start the standby"
check "the standby is in recovery and streams from the primary" "t|streaming" \
  "$(q standby $DB "SELECT pg_is_in_recovery()")|$(poll standby $DB 30 "SELECT status FROM pg_stat_wal_receiver")"

# after the base backup: more versions, a rollback, two more algorithms, on the primary only
q_file primary $DB <<'SQL' >/dev/null || bail "train on the primary after the base backup"
SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t WHERE id % 2 = 1',
                  '{"loss": "YetiRank", "iterations": 40}');
SELECT gbml.train('clicks', 'boost', 'SELECT features, cls AS label FROM t', '{"loss": "Logloss", "iterations": 30}');
SELECT gbml.train('clusters', 'kmeans', 'SELECT features FROM t', '{"k": 5}');
SELECT gbml.train('lin', 'saga', 'SELECT features, cls AS label FROM t', '{"loss": "logistic"}');
SQL

# wait_replay: until the standby has replayed everything the primary wrote
wait_replay() {
  local lsn
  lsn=$(q primary $DB "SELECT pg_current_wal_lsn()")
  poll standby $DB 30 "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn" >/dev/null
}
wait_replay || notok "the standby replays the primary's WAL within 30 s"

REGISTRY_SQL="SELECT string_agg(format('%s:%s:%s:%s:%s', id, name, version, deployed, md5(model)), ' ' ORDER BY id) FROM gbml.models"
BY_NAME_SQL="SELECT md5(string_agg(format('%s/%s/%s/%s/%s/%s', gbml.predict('ranker', features), gbml.predict_proba('clicks', features),
                                          gbml.kmeans_assign('clusters', features), gbml.kmeans_distance('clusters', features),
                                          gbml.predict('lin', features), gbml.predict_proba('lin', features)), ' ' ORDER BY id))
               FROM t WHERE id % 37 = 0"
BY_BYTEA_SQL="SELECT md5(string_agg(format('%s:%s:%s', m.id, gbml.predict(m.model, t.features),
                                           CASE m.algorithm WHEN 'kmeans' THEN gbml.kmeans_assign(m.model, t.features)::text END),
                                    ' ' ORDER BY m.id, t.id))
                FROM gbml.models m, t WHERE t.id % 101 = 0"
TOPK_SQL="SELECT string_agg(id::text, ',') FROM (SELECT id FROM t WHERE qid = 7 ORDER BY gbml.predict('ranker', features) DESC, id LIMIT 10) s"

check "the standby has the primary's registry rows (ids, versions, deployed, model bytes)" \
  "$(q primary $DB "$REGISTRY_SQL")" "$(q standby $DB "$REGISTRY_SQL")"
by_name_primary=$(q primary $DB "$BY_NAME_SQL")
check "the standby scores by name (predict, predict_proba, kmeans_assign, kmeans_distance) like the primary" \
  "$by_name_primary" "$(q standby $DB "$BY_NAME_SQL")"
check "the standby scores by bytea like the primary (every version)" \
  "$(q primary $DB "$BY_BYTEA_SQL")" "$(q standby $DB "$BY_BYTEA_SQL")"
check "the standby ranks a query's top 10 by name like the primary" "$(q primary $DB "$TOPK_SQL")" "$(q standby $DB "$TOPK_SQL")"

# a rollback on the primary reaches the standby's scoring by name
q primary $DB "SELECT gbml.deploy('ranker', 1)" >/dev/null
wait_replay
check "after gbml.deploy('ranker', 1) on the primary the standby scores with v1" \
  "$(q primary $DB "$TOPK_SQL")|1" "$(q standby $DB "$TOPK_SQL")|$(q standby $DB "SELECT version FROM gbml.models WHERE name = 'ranker' AND deployed")"
q primary $DB "SELECT gbml.deploy('ranker', 2)" >/dev/null
wait_replay

# training on the standby
registry_standby=$(q standby $DB "$REGISTRY_SQL")
start_ms=$(date +%s%3N)
out=$(OPS_VERBOSITY=verbose q_err standby $DB "SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t', '{\"loss\": \"YetiRank\", \"iterations\": 2000}')")
ms=$(($(date +%s%3N) - start_ms))
note "message: standby gbml.train: $(errline "$out") [SQLSTATE $(sqlstate "$out")]"
note "message: standby gbml.train HINT: $(hintline "$out")"
check "gbml.train on the standby: ERROR says the server is read-only (SQLSTATE 25006)" "$TRAIN_MSG|25006" "$(errline "$out")|$(sqlstate "$out")"
check_match "gbml.train on the standby: the HINT says to train on the primary" "^Run gbml.train on the primary" "$(hintline "$out")"
check_true "gbml.train on the standby fails at once, before reading and training (${ms} ms; training would take seconds)" \
  "$([ "$ms" -lt 1500 ] && echo t || echo f)"
out=$(q_err standby $DB "SELECT gbml.train('x', 'kmeans', 'SELECT features FROM t', '{\"k\": 3}')")
check "gbml.train (kmeans) on the standby: the same ERROR" "$TRAIN_MSG" "$(errline "$out")"

out=$(OPS_VERBOSITY=verbose q_err standby $DB "SELECT gbml.deploy('ranker', 1)")
note "message: standby gbml.deploy: $(errline "$out") [SQLSTATE $(sqlstate "$out")]"
note "message: standby gbml.deploy CONTEXT: $(sed -n 's/^CONTEXT: *//p' <<<"$out" | head -1)"
if [ "${GBML_OPS_EXPECT_DEPLOY_CHECK:-1}" = 1 ]; then
  check "gbml.deploy on the standby: ERROR says the server is read-only (SQLSTATE 25006)" "$DEPLOY_MSG|25006" "$(errline "$out")|$(sqlstate "$out")"
else
  check "gbml.deploy on the standby: ERROR (PostgreSQL's generic read-only message, SQLSTATE 25006)" \
    "$GENERIC_DEPLOY_MSG|25006" "$(errline "$out")|$(sqlstate "$out")"
fi
check "the standby's registry is unchanged by the failed calls, scoring by name too" "$registry_standby|$by_name_primary" \
  "$(q standby $DB "$REGISTRY_SQL")|$(q standby $DB "$BY_NAME_SQL")"

# the training aggregates only read: they work on the standby and give the primary's bytes
AGG_SQL="SELECT md5(gbml.boost_fit(features, label, qid, '{\"loss\": \"YetiRank\", \"iterations\": 20}')) || ' ' ||
                (SELECT md5(gbml.kmeans_fit(features, 4)) FROM t) || ' ' ||
                (SELECT md5(gbml.saga_fit(features, cls, '{\"loss\": \"logistic\"}')) FROM t) FROM t"
check "the training aggregates (boost_fit, kmeans_fit, saga_fit) work on the standby, same bytes as the primary" \
  "$(q primary $DB "$AGG_SQL")" "$(q standby $DB "$AGG_SQL" 2>&1)"
out=$(OPS_VERBOSITY=verbose q_err standby $DB "CREATE TABLE fitted AS SELECT gbml.boost_fit(features, label) AS model FROM t")
note "message: standby CREATE TABLE AS SELECT gbml.boost_fit: $(errline "$out") [SQLSTATE $(sqlstate "$out")]"
check "storing an aggregate's model on the standby: PostgreSQL's read-only ERROR" \
  "cannot execute CREATE TABLE AS in a read-only transaction|25006" "$(errline "$out")|$(sqlstate "$out")"

# a read-only transaction on the primary: gbml.train says so at once too; gbml.deploy as on the standby
out=$(OPS_VERBOSITY=verbose q_err primary $DB "BEGIN READ ONLY; SELECT gbml.deploy('ranker', 1); COMMIT")
note "message: primary, read-only transaction, gbml.deploy: $(errline "$out") [SQLSTATE $(sqlstate "$out")]"
if [ "${GBML_OPS_EXPECT_DEPLOY_CHECK:-1}" = 1 ]; then
  check "gbml.deploy in a READ ONLY transaction on the primary: ERROR says the transaction is read-only" \
    "$DEPLOY_RO_XACT_MSG|25006" "$(errline "$out")|$(sqlstate "$out")"
else
  check "gbml.deploy in a READ ONLY transaction on the primary: ERROR (generic read-only message)" \
    "$GENERIC_DEPLOY_MSG|25006" "$(errline "$out")|$(sqlstate "$out")"
fi
out=$(OPS_VERBOSITY=verbose q_err primary $DB "BEGIN READ ONLY; SELECT gbml.train('ranker', 'boost', 'SELECT features, label FROM t', '{\"iterations\": 5}'); COMMIT")
note "message: primary, read-only transaction, gbml.train: $(errline "$out") [SQLSTATE $(sqlstate "$out")]"
check "gbml.train in a READ ONLY transaction on the primary: ERROR says the transaction is read-only" \
  "$TRAIN_RO_XACT_MSG|25006" "$(errline "$out")|$(sqlstate "$out")"

# failover: the promoted standby records versions (the next number after the replicated ones)
as_pg "$PGBIN/pg_ctl" -D "$OPS_WORK/standby/data" -w -t 60 promote >/dev/null || notok "promote the standby"
poll standby $DB 30 "SELECT NOT pg_is_in_recovery()" >/dev/null
id=$(q standby $DB "SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t', '{\"loss\": \"YetiRank\", \"iterations\": 10}')")
[[ "$id" =~ ^[0-9]+$ ]] || id=0
check "after promotion the former standby trains ranker v3 and deploys it" "3|t" \
  "$(q standby $DB "SELECT version, deployed FROM gbml.models WHERE id = $id")"

finish
