# shellcheck shell=bash
# tests/ops/lib.sh — sourced by the operational tests in tests/ops/: throwaway
# PostgreSQL 15 clusters (initdb in a mktemp -d, unix socket only, a port and a
# socket directory of their own, never the default 5432 socket), TAP-like
# `ok - ` / `not ok - ` lines, a final `N passed, N failed` line, and a cleanup
# trap that stops every cluster it started and removes the directory, on
# success, on failure and on Ctrl-C.  Runs as root (the servers then run as
# the postgres user through runuser) or as an ordinary user.
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OPS_PASS=0
OPS_FAIL=0
OPS_DONE=0
OPS_CLUSTERS=()
OPS_BG_PIDS=()
OPS_NAME=$(basename "$0" .sh)

ok()    { OPS_PASS=$((OPS_PASS + 1)); echo "ok - $*"; }
notok() { OPS_FAIL=$((OPS_FAIL + 1)); echo "not ok - $*"; }
note()  { echo "# $*"; }

# check DESCRIPTION EXPECTED ACTUAL
check() {
  if [ "$2" = "$3" ]; then ok "$1"; else notok "$1"; note "  expected: $2"; note "  got:      $3"; fi
}
# check_true DESCRIPTION VALUE   (VALUE is psql's boolean output: t)
check_true() { check "$1" t "$2"; }
# check_match DESCRIPTION REGEX ACTUAL
check_match() {
  if [[ "$3" =~ $2 ]]; then ok "$1"; else notok "$1"; note "  expected to match: $2"; note "  got: $3"; fi
}

finish() {
  OPS_DONE=1
  echo "$OPS_PASS passed, $OPS_FAIL failed"
  [ "$OPS_FAIL" -eq 0 ]
  exit $?
}
# bail MESSAGE: a step the rest depends on failed
bail() { notok "$*"; finish; }

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

OPS_WORK=$(mktemp -d "${TMPDIR:-/tmp}/gbml-ops-$OPS_NAME.XXXXXX")
chmod 755 "$OPS_WORK"
[ "$(id -u)" = 0 ] && chown postgres: "$OPS_WORK"

ops_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for p in "${OPS_BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for c in "${OPS_CLUSTERS[@]}"; do
    [ -f "$OPS_WORK/$c/data/postmaster.pid" ] &&
      as_pg "$PGBIN/pg_ctl" -D "$OPS_WORK/$c/data" -m immediate -w -t 30 stop >/dev/null 2>&1
  done
  wait 2>/dev/null
  if [ "$OPS_DONE" = 0 ]; then
    notok "$OPS_NAME stopped early (exit status $rc)"
    echo "$OPS_PASS passed, $OPS_FAIL failed"
    rc=1
  fi
  if [ -n "${KEEP_WORK:-}" ]; then echo "# kept $OPS_WORK"; else rm -rf "$OPS_WORK"; fi
  exit $rc
}
trap ops_cleanup EXIT
trap 'exit 130' INT TERM

# Per-cluster port: only a unix socket in the cluster's own directory listens
# (listen_addresses = ''), so the number never clashes with another server.
declare -A OPS_PORT
OPS_NEXT_PORT=$((15432 + RANDOM % 2000))

# new_cluster NAME [extra postgresql.conf lines...]: initdb, not started
new_cluster() {
  local c=$1; shift
  mkdir -p "$OPS_WORK/$c"
  [ "$(id -u)" = 0 ] && chown postgres: "$OPS_WORK/$c"
  as_pg "$PGBIN/initdb" -D "$OPS_WORK/$c/data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C >"$OPS_WORK/$c/initdb.log" 2>&1 ||
    { cat "$OPS_WORK/$c/initdb.log"; return 1; }
  cluster_conf "$c" "$@"
}

# cluster_conf NAME lines...: the settings every ops cluster gets, plus extras
cluster_conf() {
  local c=$1; shift
  OPS_PORT[$c]=$OPS_NEXT_PORT
  OPS_NEXT_PORT=$((OPS_NEXT_PORT + 1))
  {
    echo "port = ${OPS_PORT[$c]}"
    echo "unix_socket_directories = '$OPS_WORK/$c'"
    echo "listen_addresses = ''"
    echo "shared_buffers = 128MB"
    echo "max_connections = 20"
    echo "gbml.progress_interval = 0"
    echo "gbml.threads = 2"
    printf '%s\n' "$@"
  } | as_pg tee -a "$OPS_WORK/$c/data/postgresql.auto.conf" >/dev/null
}

start_cluster() {
  local c=$1
  as_pg "$PGBIN/pg_ctl" -D "$OPS_WORK/$c/data" -l "$OPS_WORK/$c/server.log" -w -t 60 start >/dev/null ||
    { tail -20 "$OPS_WORK/$c/server.log"; return 1; }
  OPS_CLUSTERS+=("$c")
}

# wait_ready NAME [SECONDS]: until the server accepts connections again
wait_ready() {
  local c=$1 t=${2:-60} i
  for ((i = 0; i < t * 10; i++)); do
    "$PGBIN/pg_isready" -q -h "$OPS_WORK/$c" -p "${OPS_PORT[$c]}" -U postgres && return 0
    sleep 0.1
  done
  return 1
}

# psql against cluster NAME, database DB: q NAME DB SQL  (unaligned, tuples only, stops on error)
q() {
  local c=$1 db=$2; shift 2
  "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$OPS_WORK/$c" -p "${OPS_PORT[$c]}" -U postgres -d "$db" -c "$*"
}
# q_file NAME DB < script
q_file() {
  "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$OPS_WORK/$1" -p "${OPS_PORT[$1]}" -U postgres -d "$2" -f -
}
# q_err NAME DB SQL: what psql prints on stderr (ERROR:, DETAIL:, HINT: lines, without
# psql's "psql:...:" prefix); empty when the statement succeeded.  OPS_VERBOSITY=verbose
# adds the SQLSTATE (ERROR:  25006: ...) and the C location
q_err() {
  local c=$1 db=$2; shift 2
  "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=${OPS_VERBOSITY:-default} -h "$OPS_WORK/$c" -p "${OPS_PORT[$c]}" -U postgres -d "$db" -c "$*" 2>&1 >/dev/null |
    sed 's/^psql:[^:]*:[0-9]*: //'
}
# errline TEXT: the message of the ERROR line in q_err's output
errline() { sed -n 's/^ERROR: *\([0-9A-Z]\{5\}: \)\{0,1\}//p' <<<"$1" | head -1; }
# sqlstate TEXT: the SQLSTATE of q_err's output under OPS_VERBOSITY=verbose
sqlstate() { sed -n 's/^ERROR: *\([0-9A-Z]\{5\}\):.*/\1/p' <<<"$1" | head -1; }
hintline() { sed -n 's/^HINT: *//p' <<<"$1" | head -1; }
# pgargs NAME: connection options for pg_dump & co.
pgargs() { echo "-h $OPS_WORK/$1 -p ${OPS_PORT[$1]} -U postgres"; }

# poll NAME DB SECONDS SQL: repeats SQL until it prints a non-empty line other
# than f; prints that line; fails after SECONDS
poll() {
  local c=$1 db=$2 t=$3 sql=$4 i out
  for ((i = 0; i < t * 10; i++)); do
    out=$(q "$c" "$db" "$sql" 2>/dev/null | head -1)
    if [ -n "$out" ] && [ "$out" != f ]; then echo "$out"; return 0; fi
    sleep 0.1
  done
  return 1
}

# bg NAME DB OUTFILE APPNAME SQL: runs SQL in the background in a session named APPNAME;
# sets BG_PID to the psql process
bg() {
  local c=$1 db=$2 out=$3 app=$4; shift 4
  PGAPPNAME=$app "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$OPS_WORK/$c" -p "${OPS_PORT[$c]}" -U postgres -d "$db" -c "$*" >"$out" 2>&1 &
  BG_PID=$!
  OPS_BG_PIDS+=("$BG_PID")
}

# fdw_shards COORD SHARD...: on COORD, postgres_fdw and a server named after each
# SHARD cluster (its database postgres, extensions 'gbml') with a user mapping
fdw_shards() {
  local coord=$1 s; shift
  {
    echo "CREATE EXTENSION postgres_fdw;"
    for s in "$@"; do
      echo "CREATE SERVER $s FOREIGN DATA WRAPPER postgres_fdw"
      echo "  OPTIONS (host '$OPS_WORK/$s', port '${OPS_PORT[$s]}', dbname 'postgres', extensions 'gbml');"
      echo "CREATE USER MAPPING FOR postgres SERVER $s OPTIONS (user 'postgres');"
    done
  } | q_file "$coord" postgres
}
