#!/usr/bin/env bash
# tests/ops/dump_restore.sh — pg_dump / pg_restore of a database with
# registered models keeps every version, the deployed flags and the model
# bytes, and scoring by name works after the restore.
#
# A database with a registry (boost, Logloss boost, kmeans, saga; several
# versions, a rolled-back deploy, a version never deployed), a table of model
# bytea from the training aggregates, a view that scores by name and a GRANT
# on gbml.models is dumped in the custom format and restored into two fresh
# databases (pg_restore --single-transaction, and pg_restore -j 2).  Compared:
# every registry column (md5 of the model), the sequence, the privileges, the
# scores by name and by bytea; then the restored registry trains and deploys.
# Starts its own throwaway cluster; prints ok/not ok lines and "N passed, N failed".
cd "$(dirname "$0")" && source ./lib.sh

new_cluster main || bail "initdb"
start_cluster main || bail "start the cluster"
PGARGS=$(pgargs main)

q main postgres "CREATE DATABASE src" || bail "create database src"
q_file main src <<'SQL' >/dev/null || bail "set up the source database"
CREATE EXTENSION gbml;
CREATE ROLE ops_trainer;
CREATE TABLE t AS
SELECT i AS id, (i % 50)::bigint AS qid,
       ARRAY(SELECT ((i::bigint * 7919 + j * 104729) % 1000003) / 1000003.0 FROM generate_series(1, 10) AS j)::real[] AS features
  FROM generate_series(1, 20000) AS i;
ALTER TABLE t ADD COLUMN label real, ADD COLUMN cls real;
UPDATE t SET label = floor(features[1] * 4), cls = (features[2] + features[3] > 1)::int;
SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t WHERE id % 4 = 0',
                  '{"loss": "YetiRank", "iterations": 30}');
SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t WHERE id % 4 = 1',
                  '{"loss": "YetiRank", "iterations": 40, "eval_fraction": 0.2}');
SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t WHERE id % 4 = 2',
                  '{"loss": "YetiRank", "iterations": 50}');
SELECT gbml.deploy('ranker', 2);
SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t WHERE id % 4 = 3',
                  '{"loss": "YetiRank", "iterations": 20, "deploy": "never"}');
SELECT gbml.train('clicks', 'boost', 'SELECT features, cls AS label FROM t', '{"loss": "Logloss", "iterations": 30}');
SELECT gbml.train('clusters', 'kmeans', 'SELECT features FROM t', '{"k": 6}');
SELECT gbml.train('lin', 'saga', 'SELECT features, cls AS label FROM t', '{"loss": "logistic"}');
SELECT gbml.train('lin', 'saga', 'SELECT features, label FROM t', '{"loss": "squared"}');
GRANT INSERT, UPDATE ON gbml.models TO ops_trainer;
GRANT USAGE ON SEQUENCE gbml.models_id_seq TO ops_trainer;
CREATE TABLE fitted AS
SELECT 'kmeans' AS kind, gbml.kmeans_fit(features, 3) AS model FROM t
UNION ALL SELECT 'saga', gbml.saga_fit(features, cls, '{"loss": "logistic"}') FROM t
UNION ALL SELECT 'boost', gbml.boost_fit(features, label, '{"iterations": 15}') FROM t;
CREATE VIEW ranked AS
SELECT id, gbml.predict('ranker', features) AS score, gbml.predict_proba('clicks', features) AS p_click,
       gbml.kmeans_assign('clusters', features) AS cluster, gbml.kmeans_distance('clusters', features) AS dist,
       gbml.predict('lin', features) AS lin
  FROM t;
SQL

REGISTRY_SQL="SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s', id, name, version, algorithm, deployed,
                                       md5(model), length(model), md5(params::text), md5(metrics::text), rows, features,
                                       device, md5(timings::text) || created_at), E'\n' ORDER BY id) FROM gbml.models"
SCORES_SQL="SELECT md5(string_agg(format('%s/%s/%s/%s/%s/%s', id, score, p_click, cluster, dist, lin), ' ' ORDER BY id))
              FROM ranked WHERE id % 97 = 0"
BYTEA_SQL="SELECT md5(string_agg(format('%s:%s:%s', kind, md5(model),
                  (SELECT string_agg(CASE kind WHEN 'kmeans' THEN gbml.kmeans_assign(model, features)::text
                                               ELSE gbml.predict(model, features)::text END, ',' ORDER BY id)
                     FROM t WHERE id % 211 = 0)), ' ' ORDER BY kind)) FROM fitted"
DEPLOYED_SQL="SELECT string_agg(name || ':' || version, ' ' ORDER BY name) FROM gbml.models WHERE deployed"
MISC_SQL="SELECT (SELECT last_value FROM gbml.models_id_seq) || ' ' ||
                 has_table_privilege('ops_trainer', 'gbml.models', 'INSERT') || ' ' ||
                 has_table_privilege('ops_trainer', 'gbml.models', 'UPDATE') || ' ' ||
                 has_table_privilege('ops_trainer', 'gbml.models', 'DELETE') || ' ' ||
                 has_sequence_privilege('ops_trainer', 'gbml.models_id_seq', 'USAGE') || ' ' ||
                 has_table_privilege('public', 'gbml.models', 'SELECT') || ' ' ||
                 (SELECT extversion FROM pg_extension WHERE extname = 'gbml')"

reg_src=$(q main src "$REGISTRY_SQL"); scores_src=$(q main src "$SCORES_SQL"); bytea_src=$(q main src "$BYTEA_SQL")
deployed_src=$(q main src "$DEPLOYED_SQL"); misc_src=$(q main src "$MISC_SQL")
check "source: 8 versions (ranker 4, clicks 1, clusters 1, lin 2), deployed ranker v2 (rolled back), clicks v1, clusters v1, lin v2" \
  "8|clicks:1 clusters:1 lin:2 ranker:2" "$(q main src "SELECT count(*) FROM gbml.models")|$deployed_src"
[ -n "$scores_src" ] && [ -n "$bytea_src" ] || bail "score in the source database"

start=$SECONDS
"$PGBIN/pg_dump" $PGARGS -Fc -f "$OPS_WORK/src.dump" src 2>"$OPS_WORK/dump.err"
rc=$?
check "pg_dump -Fc succeeds without a message" "0|" "$rc|$(cat "$OPS_WORK/dump.err")"
toc=$("$PGBIN/pg_restore" -l "$OPS_WORK/src.dump")
check_match "the dump's table of contents has the extension and the registry's rows and sequence value" \
  "EXTENSION - gbml.*TABLE DATA gbml models .*SEQUENCE SET gbml models_id_seq" "$(tr '\n' ' ' <<<"$toc")"

# restore_into DB MODE OPTIONS...: fresh database, pg_restore, compare
restore_into() {
  local db=$1 mode=$2; shift 2
  q main postgres "CREATE DATABASE $db" || { notok "$mode: create database $db"; return; }
  "$PGBIN/pg_restore" $PGARGS --exit-on-error "$@" -d "$db" "$OPS_WORK/src.dump" 2>"$OPS_WORK/restore-$db.err"
  local rc=$?
  check "$mode: pg_restore succeeds without a message" "0|" "$rc|$(cat "$OPS_WORK/restore-$db.err")"
  check "$mode: extension version, sequence, privileges (INSERT, UPDATE granted; DELETE not; PUBLIC reads)" \
    "$misc_src" "$(q main $db "$MISC_SQL")"
  check "$mode: every registry row identical (id, version, deployed, model bytes, metadata, created_at)" \
    "$reg_src" "$(q main $db "$REGISTRY_SQL")"
  check "$mode: the same deployed versions" "$deployed_src" "$(q main $db "$DEPLOYED_SQL")"
  check "$mode: scoring by name (predict, predict_proba, kmeans_assign, kmeans_distance) gives the same scores" \
    "$scores_src" "$(q main $db "$SCORES_SQL")"
  check "$mode: the aggregates' model bytea and their scores are the same" "$bytea_src" "$(q main $db "$BYTEA_SQL")"
  check "$mode: the one-deployed-per-name index is back" "t" \
    "$(q main $db "SELECT indisunique AND pg_get_expr(indpred, indrelid) = 'deployed' FROM pg_index WHERE indexrelid = 'gbml.models_one_deployed'::regclass")"
  # the restored registry keeps working: a new version gets a fresh id and the next number
  local id
  id=$(q main $db "SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t WHERE id % 4 = 0', '{\"loss\": \"YetiRank\", \"iterations\": 10}')")
  check "$mode: gbml.train after the restore records ranker v5 with a new id and deploys it" "5|t|t" \
    "$(q main $db "SELECT version, deployed, id > $(q main src "SELECT max(id) FROM gbml.models") FROM gbml.models WHERE id = ${id:-0}")"
  q main $db "SELECT gbml.deploy('ranker', 2)" >/dev/null
  check "$mode: gbml.deploy rolls back to v2 and the scores are the source's again" "$deployed_src|$scores_src" \
    "$(q main $db "$DEPLOYED_SQL")|$(q main $db "$SCORES_SQL")"
}
restore_into dst1 "restore --single-transaction" --single-transaction
restore_into dst2 "restore -j 2" -j 2
note "dump + 2 restores: $((SECONDS - start)) s; dump size $(stat -c %s "$OPS_WORK/src.dump") bytes"

finish
