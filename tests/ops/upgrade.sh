#!/usr/bin/env bash
# tests/ops/upgrade.sh — the upgrade path ALTER EXTENSION gbml UPDATE from
# 0.1.0 to the current version: objects, settings and registered models
# survive, and models stored under 0.1.0 score the same afterwards.
#
# Database "up": CREATE EXTENSION gbml VERSION '0.1.0'; versions of boost
# (YetiRank and Logloss), kmeans and saga trained with gbml.train, plus the
# shipped format-1 model files of tests/models registered by hand (their scores
# on the probe rows are in tests/models/expected.txt); database and role
# settings, grants, a user view that scores by name, a table of model bytea.
# Then ALTER EXTENSION gbml UPDATE: the version, every registry row, every
# score, the settings and the grants are unchanged; gbml.gpu_resources(),
# gbml.kmeans_assign(text, real[]), gbml.kmeans_distance(text, real[]) and
# gbml.devices()' free_mb and emulated columns exist; the registry trains on.
# Last, the catalog (functions with argument and result types and attributes,
# aggregates, tables, columns, indexes, constraints, extension members, config
# tables, privileges, comments) of a fresh CREATE EXTENSION gbml equals that of
# the updated database, and an update blocked by a user view on gbml.devices()
# fails cleanly, leaving 0.1.0 and its models as they were.
# Starts its own throwaway cluster; prints ok/not ok lines and "N passed, N failed".
cd "$(dirname "$0")" && source ./lib.sh
MODELS=$(cd ../models && pwd)
TO_VERSION=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" ../../gbml.control)

new_cluster main || bail "initdb"
start_cluster main || bail "start the cluster"
q main postgres "CREATE DATABASE up" || bail "create database up"
q main postgres "CREATE DATABASE fresh" || bail "create database fresh"
q main postgres "CREATE DATABASE blocked" || bail "create database blocked"

q main up "CREATE EXTENSION gbml VERSION '0.1.0'" || bail "CREATE EXTENSION gbml VERSION '0.1.0'"
check "0.1.0 installed: no gpu_resources(), no kmeans_assign(text, real[]), devices() has 4 columns" "0.1.0|f|f|4" \
  "$(q main up "SELECT extversion FROM pg_extension WHERE extname = 'gbml'")|$(q main up "SELECT to_regprocedure('gbml.gpu_resources()') IS NOT NULL")|$(q main up "SELECT to_regprocedure('gbml.kmeans_assign(text, real[])') IS NOT NULL")|$(q main up "SELECT count(*) FROM unnest((SELECT proargmodes FROM pg_proc WHERE oid = 'gbml.devices()'::regprocedure)) m WHERE m = 't'")"

q_file main up <<'SQL' >/dev/null || bail "register models under 0.1.0"
CREATE ROLE ops_up_trainer;
CREATE ROLE ops_up_scorer;
CREATE TABLE t AS
SELECT i AS id, (i % 40)::bigint AS qid,
       ARRAY(SELECT ((i::bigint * 7919 + j * 104729) % 1000003) / 1000003.0 FROM generate_series(1, 6) AS j)::real[] AS features
  FROM generate_series(1, 12000) AS i;
ALTER TABLE t ADD COLUMN label real, ADD COLUMN cls real;
UPDATE t SET label = floor(features[1] * 4), cls = (features[2] + features[3] > 1)::int;
SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t WHERE id % 2 = 0',
                  '{"loss": "YetiRank", "iterations": 30}');
SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t WHERE id % 2 = 1',
                  '{"loss": "YetiRank", "iterations": 40}');
SELECT gbml.deploy('ranker', 1);
SELECT gbml.train('clicks', 'boost', 'SELECT features, cls AS label FROM t', '{"loss": "Logloss", "iterations": 30}');
SELECT gbml.train('clusters', 'kmeans', 'SELECT features FROM t', '{"k": 5}');
SELECT gbml.train('clusters', 'kmeans', 'SELECT features FROM t', '{"k": 7, "spherical": true}');
SELECT gbml.train('lin', 'saga', 'SELECT features, cls AS label FROM t', '{"loss": "logistic"}');
SELECT gbml.train('lin', 'saga', 'SELECT features, label FROM t', '{"loss": "squared", "deploy": "never"}');
CREATE TABLE fitted AS
SELECT 'kmeans' AS kind, gbml.kmeans_fit(features, 3) AS model FROM t
UNION ALL SELECT 'saga', gbml.saga_fit(features, cls, '{"loss": "logistic"}') FROM t
UNION ALL SELECT 'boost', gbml.boost_fit(features, label, '{"iterations": 15}') FROM t;
CREATE VIEW scored AS
SELECT t.id, t.features, gbml.predict('ranker', t.features) AS score, gbml.predict_proba('clicks', t.features) AS p_click,
       gbml.kmeans_assign(m.model, t.features) AS cluster
  FROM t, gbml.models m WHERE m.name = 'clusters' AND m.deployed;
GRANT INSERT, UPDATE ON gbml.models TO ops_up_trainer;
GRANT USAGE ON SEQUENCE gbml.models_id_seq TO ops_up_trainer;
GRANT SELECT ON scored TO ops_up_scorer;
ALTER DATABASE up SET gbml.threads = 1;
ALTER ROLE ops_up_scorer IN DATABASE up SET gbml.device = 'cpu';
ALTER ROLE ops_up_trainer SET gbml.memory_limit = '512MB';
CREATE TABLE probes (r int, features real[]);
INSERT INTO probes VALUES (1, '{0.1,0.2,0.3,0.4}'), (2, '{0.9,0.8,0.1,0.5}'), (3, '{0.5,0.5,0.5,0.5}');
CREATE TABLE stored_expected (file text, output int, r int, score float8);
SQL

# the shipped format-1 model files: registered as 'stored_<algorithm>_<n>', each deployed
while read -r file output s1 s2 s3; do
  case $file in \#*|'') continue ;; esac
  name="stored_$(basename "$file" .gbml | sed 's/^v[0-9]*_//')"
  q main up "INSERT INTO gbml.models (name, version, algorithm, params, metrics, rows, features, device, timings, deployed, model)
             SELECT '$name', 1, i ->> 'algorithm', COALESCE(i -> 'params', '{}'), COALESCE(i -> 'metrics', '{}'),
                    COALESCE((i ->> 'rows')::bigint, 0), (i ->> 'features')::int, 'cpu', '{}', true, m
               FROM (SELECT decode('$(base64 -w0 "$MODELS/$file")', 'base64') AS m) b, gbml.model_info(m) AS i;
             INSERT INTO stored_expected VALUES ('$name', $output, 1, '$s1'), ('$name', $output, 2, '$s2'), ('$name', $output, 3, '$s3')" ||
    notok "register $file"
done <"$MODELS/expected.txt"
# (every file expected.txt lists: 5 through 0.6.0, the MultiClass one since 0.7.0)
N_STORED=$(grep -c '^v[0-9]*_' "$MODELS/expected.txt")
check "the $N_STORED shipped format-1 models are registered" "$N_STORED" "$(q main up "SELECT count(*) FROM gbml.models WHERE name LIKE 'stored_%'")"

# by name, with the function each one's expected output is for (1 score, 2 probability, 8 distance)
STORED_SQL="SELECT count(*) || '/' || count(*) FILTER (WHERE got = e.score)
              FROM stored_expected e JOIN probes p USING (r),
                   LATERAL (SELECT CASE e.output WHEN 1 THEN gbml.predict(e.file, p.features)
                                                 WHEN 2 THEN gbml.predict_proba(e.file, p.features)
                                                 WHEN 8 THEN gbml.kmeans_distance(m.model, p.features) END AS got
                              FROM gbml.models m WHERE m.name = e.file AND m.deployed) s"
check "0.1.0: the shipped format-1 models score as expected.txt says, by name" "$((3 * N_STORED))/$((3 * N_STORED))" "$(q main up "$STORED_SQL")"

REGISTRY_SQL="SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s|%s', id, name, version, algorithm, deployed, md5(model),
                                       md5(params::text || metrics::text || timings::text), rows, features, created_at), E'\n' ORDER BY id)
                FROM gbml.models"
SCORES_SQL="SELECT md5(string_agg(format('%s/%s/%s/%s/%s/%s', id, score, p_click, cluster,
                                         gbml.predict('lin', features), gbml.predict_proba('lin', features)), ' ' ORDER BY id))
              FROM scored WHERE id % 13 = 0"
BYTEA_SQL="SELECT md5(string_agg(format('%s:%s:%s', m.id, gbml.predict(m.model, t.features),
                                        CASE m.algorithm WHEN 'kmeans' THEN gbml.kmeans_distance(m.model, t.features) END),
                                 ' ' ORDER BY m.id, t.id))
             FROM gbml.models m, t WHERE t.id % 101 = 0 AND m.features = 6"
FITTED_SQL="SELECT md5(string_agg(kind || md5(model) || (SELECT sum(gbml.predict(model, features)) FROM t), ' ' ORDER BY kind)) FROM fitted"
INFO_SQL="SELECT md5(string_agg(gbml.model_info(model)::text || gbml.model_json(model)::text, ' ' ORDER BY id)) FROM gbml.models"
SETTINGS_SQL="SELECT string_agg(coalesce(d.datname, '-') || ':' || coalesce(r.rolname, '-') || ':' || array_to_string(s.setconfig, ','), ' '
                                ORDER BY d.datname, r.rolname)
                FROM pg_db_role_setting s LEFT JOIN pg_database d ON d.oid = s.setdatabase LEFT JOIN pg_roles r ON r.oid = s.setrole"
PRIVS_SQL="SELECT concat_ws(' ', has_table_privilege('ops_up_trainer', 'gbml.models', 'INSERT'),
                  has_table_privilege('ops_up_trainer', 'gbml.models', 'UPDATE'), has_table_privilege('ops_up_trainer', 'gbml.models', 'DELETE'),
                  has_sequence_privilege('ops_up_trainer', 'gbml.models_id_seq', 'USAGE'),
                  has_table_privilege('public', 'gbml.models', 'SELECT'), has_table_privilege('ops_up_scorer', 'scored', 'SELECT'),
                  has_schema_privilege('public', 'gbml', 'USAGE'), (SELECT last_value FROM gbml.models_id_seq),
                  (SELECT extconfig::regclass[]::text FROM pg_extension WHERE extname = 'gbml'))"

before_registry=$(q main up "$REGISTRY_SQL"); before_scores=$(q main up "$SCORES_SQL"); before_bytea=$(q main up "$BYTEA_SQL")
before_fitted=$(q main up "$FITTED_SQL"); before_info=$(q main up "$INFO_SQL"); before_settings=$(q main up "$SETTINGS_SQL")
before_privs=$(q main up "$PRIVS_SQL")
[ -n "$before_scores" ] && [ -n "$before_bytea" ] || bail "score under 0.1.0"

upd_err=$(q_err main up "ALTER EXTENSION gbml UPDATE")
check "ALTER EXTENSION gbml UPDATE succeeds without a message" "" "$upd_err"
check "extversion is now $TO_VERSION" "$TO_VERSION" "$(q main up "SELECT extversion FROM pg_extension WHERE extname = 'gbml'")"
check "the registry rows are unchanged (ids, versions, deployed, model bytes, metadata, created_at)" \
  "$before_registry" "$(q main up "$REGISTRY_SQL")"
check "the shipped format-1 models still score as expected.txt says, by name" "$((3 * N_STORED))/$((3 * N_STORED))" "$(q main up "$STORED_SQL")"
check "scoring by name (user view: predict, predict_proba, kmeans_assign) gives identical scores" "$before_scores" "$(q main up "$SCORES_SQL")"
check "scoring every version by bytea gives identical scores" "$before_bytea" "$(q main up "$BYTEA_SQL")"
check "the aggregates' model bytea in a user table and their scores are identical" "$before_fitted" "$(q main up "$FITTED_SQL")"
check "model_info and model_json of every version are identical" "$before_info" "$(q main up "$INFO_SQL")"
check "database and role settings are unchanged" "$before_settings" "$(q main up "$SETTINGS_SQL")"
check "grants, the sequence and the pg_dump config tables are unchanged" "$before_privs" "$(q main up "$PRIVS_SQL")"
check "a new session gets the database's gbml.threads = 1" "1" "$(q main up "SHOW gbml.threads")"

# the 0.2.0 objects
check "gbml.gpu_resources() exists and holds nothing between trainings" "jsonb|t" \
  "$(q main up "SELECT pg_typeof(gbml.gpu_resources()), NOT EXISTS (SELECT FROM jsonb_each_text(gbml.gpu_resources()) WHERE value ~ '^[0-9.]+$' AND value::numeric <> 0)")"
check "gbml.kmeans_assign(text, real[]) and gbml.kmeans_distance(text, real[]) score by name like the deployed bytea" "t" \
  "$(q main up "SELECT bool_and(gbml.kmeans_assign('clusters', t.features) = gbml.kmeans_assign(m.model, t.features)
                               AND gbml.kmeans_distance('clusters', t.features) = gbml.kmeans_distance(m.model, t.features))
                  FROM t, gbml.models m WHERE m.name = 'clusters' AND m.deployed AND t.id % 7 = 0")"
check "gbml.devices() returns (id, name, memory_mb, compute_capability, free_mb, emulated)" \
  "TABLE(id integer, name text, memory_mb bigint, compute_capability text, free_mb bigint, emulated boolean)" \
  "$(q main up "SELECT pg_get_function_result('gbml.devices()'::regprocedure)")"
check "gbml.devices() can be called" "0" "$(q main up "SELECT count(*) * 0 FROM gbml.devices()")"
check "the new functions belong to the extension" "3" \
  "$(q main up "SELECT count(*) FROM pg_depend WHERE deptype = 'e' AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gbml')
                  AND objid IN ('gbml.gpu_resources()'::regprocedure, 'gbml.kmeans_assign(text, real[])'::regprocedure,
                                'gbml.kmeans_distance(text, real[])'::regprocedure)")"

# the updated registry trains, deploys and rolls back
id=$(q main up "SELECT gbml.train('ranker', 'boost', 'SELECT features, label, qid AS group_id FROM t', '{\"loss\": \"YetiRank\", \"iterations\": 10}')")
[[ "$id" =~ ^[0-9]+$ ]] || id=0
check "after the update gbml.train records ranker v3 and deploys it" "3|t" "$(q main up "SELECT version, deployed FROM gbml.models WHERE id = $id")"
q main up "SELECT gbml.deploy('ranker', 1)" >/dev/null
check "gbml.deploy rolls back to v1: the scores by name are the 0.1.0 ones again" "$before_scores" "$(q main up "$SCORES_SQL")"

# fresh install (default_version through the update chain) vs the updated one: the same catalog
CATALOG_SQL=$(cat <<'SQL'
SELECT string_agg(x, E'\n' ORDER BY x) FROM (
  SELECT format('function %s(%s) returns %s kind=%s volatile=%s strict=%s parallel=%s secdef=%s leakproof=%s cost=%s rows=%s src=%s bin=%s config=%s acl=%s comment=%s',
                p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid), p.prokind, p.provolatile,
                p.proisstrict, p.proparallel, p.prosecdef, p.proleakproof, p.procost, p.prorows, md5(p.prosrc), p.probin,
                p.proconfig, p.proacl, obj_description(p.oid, 'pg_proc')) AS x
    FROM pg_proc p WHERE p.pronamespace = 'gbml'::regnamespace
  UNION ALL
  SELECT format('aggregate %s(%s) kind=%s trans=%s final=%s modify=%s combine=%s serial=%s deserial=%s stype=%s init=%s',
                a.aggfnoid::regproc, pg_get_function_identity_arguments(a.aggfnoid), a.aggkind, a.aggtransfn::regprocedure,
                a.aggfinalfn::regprocedure, a.aggfinalmodify, a.aggcombinefn::regprocedure, a.aggserialfn::regprocedure,
                a.aggdeserialfn::regprocedure, a.aggtranstype::regtype, a.agginitval)
    FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid WHERE p.pronamespace = 'gbml'::regnamespace
  UNION ALL
  SELECT format('relation %s kind=%s persistence=%s acl=%s comment=%s', c.relname, c.relkind, c.relpersistence,
                coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relowner)),
                obj_description(c.oid, 'pg_class'))
    FROM pg_class c WHERE c.relnamespace = 'gbml'::regnamespace
  UNION ALL
  SELECT format('column %s.%s %s notnull=%s default=%s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                a.attnotnull, pg_get_expr(d.adbin, d.adrelid))
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE c.relnamespace = 'gbml'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
   WHERE c.relnamespace = 'gbml'::regnamespace
  UNION ALL
  SELECT format('constraint %s %s', conname, pg_get_constraintdef(oid)) FROM pg_constraint WHERE connamespace = 'gbml'::regnamespace
  UNION ALL
  SELECT format('type %s %s', typname, typtype) FROM pg_type WHERE typnamespace = 'gbml'::regnamespace
  UNION ALL
  SELECT 'member ' || pg_describe_object(classid, objid, objsubid) FROM pg_depend
   WHERE deptype = 'e' AND refclassid = 'pg_extension'::regclass AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gbml')
  UNION ALL
  SELECT format('extension %s config=%s conditions=%s relocatable=%s schema=%s', extversion, extconfig::regclass[], extcondition,
                extrelocatable, extnamespace::regnamespace) FROM pg_extension WHERE extname = 'gbml'
  UNION ALL
  SELECT format('schema gbml acl=%s', nspacl) FROM pg_namespace WHERE nspname = 'gbml'
  UNION ALL
  SELECT format('init_privs %s %s', pg_describe_object(classoid, objoid, objsubid), initprivs) FROM pg_init_privs
   WHERE privtype = 'e' AND (classoid, objoid) IN (SELECT classid, objid FROM pg_depend WHERE deptype = 'e'
                    AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gbml')
                    UNION ALL SELECT 'pg_namespace'::regclass, 'gbml'::regnamespace)
) s
SQL
)
q main fresh "CREATE EXTENSION gbml" || notok "CREATE EXTENSION gbml (fresh)"
fresh_cat=$(q main fresh "$CATALOG_SQL")
# the updated database has grants of its own on the registry; compare without them
# (a revoked grant leaves an explicit default ACL: the listing spells NULL as the default)
up_cat=$(q main up "REVOKE INSERT, UPDATE ON gbml.models FROM ops_up_trainer; REVOKE USAGE ON SEQUENCE gbml.models_id_seq FROM ops_up_trainer; $CATALOG_SQL")
check "a fresh CREATE EXTENSION gbml is version $TO_VERSION" "$TO_VERSION" "$(q main fresh "SELECT extversion FROM pg_extension WHERE extname = 'gbml'")"
if [ -n "$fresh_cat" ] && [ "$fresh_cat" = "$up_cat" ]; then
  ok "fresh and updated installs have the same catalog ($(grep -c '^function' <<<"$fresh_cat") functions, $(grep -c '^member' <<<"$fresh_cat") extension members)"
else
  notok "fresh and updated installs have the same catalog"
  diff <(echo "$fresh_cat") <(echo "$up_cat") | sed 's/^/#   /' | head -40
fi
check "the fresh install's functions include the 0.2.0 ones with their types" "3" \
  "$(grep -cE '^function (gpu_resources\(\) returns jsonb|kmeans_assign\(name text, features real\[\]\) returns integer|kmeans_distance\(name text, features real\[\]\) returns double precision) ' <<<"$fresh_cat")"

# an update that cannot drop gbml.devices() (a user view uses it) fails and changes nothing
q_file main blocked <<'SQL' >/dev/null || notok "set up database blocked"
CREATE EXTENSION gbml VERSION '0.1.0';
CREATE TABLE t AS SELECT ARRAY[i % 5, i % 3]::real[] AS features, (i % 4)::real AS label FROM generate_series(1, 2000) AS i;
SELECT gbml.train('m', 'boost', 't', '{"iterations": 10}');
CREATE VIEW gpus AS SELECT * FROM gbml.devices();
SQL
blocked_before=$(q main blocked "$REGISTRY_SQL")
out=$(q_err main blocked "ALTER EXTENSION gbml UPDATE")
note "message: ALTER EXTENSION gbml UPDATE with a user view on gbml.devices(): $(errline "$out") / $(sed -n 's/^DETAIL: *//p' <<<"$out" | head -1)"
# PostgreSQL's own message today; the clearer one proposed for the update script is accepted too
check_match "an update blocked by a view on gbml.devices() fails with a dependency ERROR" \
  "^(cannot drop function (gbml\.)?devices\(\) because other objects depend on it|gbml 0\.2\.0 changes the result columns of gbml\.devices\(\).*)$" \
  "$(errline "$out")"
check "... and leaves 0.1.0, its registry and scoring as they were" "0.1.0|$blocked_before|t" \
  "$(q main blocked "SELECT extversion FROM pg_extension WHERE extname = 'gbml'")|$(q main blocked "$REGISTRY_SQL")|$(q main blocked "SELECT gbml.predict('m', '{1,1}') IS NOT NULL")"
q main blocked "DROP VIEW gpus; ALTER EXTENSION gbml UPDATE; CREATE VIEW gpus AS SELECT * FROM gbml.devices()" 2>&1
check "with the view dropped and re-created around it the update succeeds" "$TO_VERSION|6" \
  "$(q main blocked "SELECT extversion FROM pg_extension WHERE extname = 'gbml'")|$(q main blocked "SELECT count(*) FROM information_schema.columns WHERE table_name = 'gpus'")"

finish
