#!/usr/bin/env bash
# tests/bench/load_bench.sh — scoring by name under load while the model is
# retrained and redeployed (the hardening issue's load test):
#   CLIENTS pgbench clients (default 8) run, weighted 1 : PK_WEIGHT,
#     top-k:  SELECT id FROM t ORDER BY gbml.predict('live', features) DESC LIMIT 10
#     lookup: SELECT gbml.predict('live', features) FROM t WHERE id = :id
#   for QUIET seconds alone (default 20), then for BUSY seconds (default 60) while
#   another session retrains 'live' (gbml.train, deploy always) every RETRAIN_EVERY s.
# Prints, per phase: transactions processed, tps, errors and aborted clients
# (pgbench aborts a client whose query errors, so "failed transactions" alone
# would hide them), and the scoring backends' resident memory early and late in
# the busy phase (it must not grow).  Exits non-zero on any error, aborted client
# or memory growth over GROWTH_MB.  Needs gbml installed; starts its own cluster.
set -euo pipefail
N=${N:-100000}
D=${D:-20}
CLIENTS=${CLIENTS:-8}
QUIET=${QUIET:-20}
BUSY=${BUSY:-60}
RETRAIN_EVERY=${RETRAIN_EVERY:-3}
PK_WEIGHT=${PK_WEIGHT:-20}
GROWTH_MB=${GROWTH_MB:-8}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 777 "$work"
echo "SELECT id FROM t ORDER BY gbml.predict('live', features) DESC LIMIT 10;" > "$work/topk.sql"
printf '\\set id random(1, %d)\nSELECT gbml.predict('"'"'live'"'"', features) FROM t WHERE id = :id;\n' "$N" > "$work/lookup.sql"
export N D CLIENTS QUIET BUSY RETRAIN_EVERY PK_WEIGHT GROWTH_MB work
exec pg_virtualenv -v 15 -o max_connections=40 -o shared_buffers=512MB bash -c '
set -euo pipefail
psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION gbml;
SET gbml.progress_interval = 0;
CREATE TABLE t AS
SELECT i AS id, (SELECT array_agg(((i::bigint * 7919 + j * 104729) % 1000003) / 1000003.0)::real[]
                   FROM generate_series(1, $D) AS j) AS features
  FROM generate_series(1, $N) AS i;
ALTER TABLE t ADD PRIMARY KEY (id);
ALTER TABLE t ADD COLUMN label real;
UPDATE t SET label = features[1] * 3 + features[2] * features[3];
VACUUM ANALYZE t;
SELECT gbml.train('"'"'live'"'"', '"'"'boost'"'"', '"'"'SELECT features, label FROM t WHERE id % 10 = 0'"'"',
                  '"'"'{"iterations": 50}'"'"') > 0 AS first_version;
SQL

rss_of() {  # VmRSS in kB of backend $1 (0 when gone)
  awk "/^VmRSS/ {print \$2}" /proc/$1/status 2>/dev/null || echo 0
}

phase() {  # name seconds -> pgbench log in $work/$name.out
  pgbench -n -c "$CLIENTS" -j 2 -T "$2" -f "$work/topk.sql@1" -f "$work/lookup.sql@$PK_WEIGHT" \
    > "$work/$1.out" 2> "$work/$1.err" || true
}

echo "== quiet: $CLIENTS clients, ${QUIET} s"
phase quiet "$QUIET"
echo "== busy: $CLIENTS clients, ${BUSY} s, retraining every ${RETRAIN_EVERY} s"
phase busy "$BUSY" &
bench=$!
# the scoring backends warm (+5 s) and near the end: "pid:kB ..." each
( sleep 5
  for pid in $(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = '"'"'pgbench'"'"'"); do
    echo "$pid:$(rss_of $pid)"
  done > "$work/rss.early"
  sleep $((BUSY - 8))
  for pid in $(cut -d: -f1 "$work/rss.early"); do echo "$pid:$(rss_of $pid)"; done > "$work/rss.late" ) &
sampler=$!
retrains=0; retrain_errors=0
end=$((SECONDS + BUSY - 3))
while [ $SECONDS -lt $end ]; do
  if psql -X -q -At -c "SET gbml.progress_interval = 0; SELECT gbml.train('"'"'live'"'"', '"'"'boost'"'"', '"'"'SELECT features, label FROM t WHERE id % 20 = $((retrains % 20))'"'"', '"'"'{\"iterations\": 30}'"'"')" > /dev/null 2>> "$work/retrain.err"; then
    retrains=$((retrains + 1))
  else
    retrain_errors=$((retrain_errors + 1))
  fi
  sleep "$RETRAIN_EVERY"
done
wait $sampler
growth_max=0; growth_total=0; early_total=0; n_early=0
for e in $(cat "$work/rss.early"); do
  pid=${e%%:*}; kb=${e##*:}
  late_kb=$(sed -n "s/^$pid://p" "$work/rss.late")
  [ "${late_kb:-0}" = 0 ] && continue
  g=$((late_kb - kb)); growth_total=$((growth_total + g)); early_total=$((early_total + kb)); n_early=$((n_early + 1))
  [ $g -gt $growth_max ] && growth_max=$g
done
wait $bench

status=0
report() {
  local f=$work/$1.out e=$work/$1.err
  local tx=$(sed -n "s/^number of transactions actually processed: \([0-9]*\).*/\1/p" $f)
  local tps=$(sed -n "s/^tps = \([0-9.]*\) (without initial connection time)/\1/p" $f)
  local failed=$(sed -n "s/^number of failed transactions: \([0-9]*\).*/\1/p" $f)
  local aborted=$(grep -c "aborted" $e || true)
  local errors=$(grep -c "ERROR" $e || true)
  printf "%-6s transactions %8s   tps %9s   failed %s   aborted clients %s   errors %s\n" "$1" "${tx:-?}" "${tps:-?}" "${failed:-0}" "$aborted" "$errors"
  if [ "${aborted:-0}" != 0 ] || [ "${errors:-0}" != 0 ] || [ "${failed:-0}" != 0 ] || [ -z "$tx" ]; then
    status=1; head -5 $e
  fi
}
echo
report quiet
report busy
echo "retrains during the busy phase: $retrains done, $retrain_errors failed (versions now: $(psql -X -At -c "SELECT count(*) FROM gbml.models WHERE name = '"'"'live'"'"'"), deployed: $(psql -X -At -c "SELECT count(*) FROM gbml.models WHERE name = '"'"'live'"'"' AND deployed"))"
echo "scoring backends resident memory: $n_early backends, $((early_total / 1024)) MB at +5 s;" \
     "growth until 3 s before the end: $((growth_total / 1024)) MB in all, at most $((growth_max / 1024)) MB in one backend (limit $GROWTH_MB MB)"
if [ "$retrain_errors" != 0 ] || [ "$retrains" = 0 ]; then status=1; head -5 "$work/retrain.err"; fi
if [ $n_early = 0 ] || [ $growth_max -gt $(( GROWTH_MB * 1024 )) ]; then status=1; fi
[ $status = 0 ] && echo "load: passed" || echo "load: FAILED"
exit $status
'
