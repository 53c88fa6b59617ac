#!/usr/bin/env bash
# tests/ops/run_all.sh — the operational tests of the hardening issue, one after
# the other (each starts and removes its own throwaway clusters):
#   crash_safety.sh  SIGKILLed backends during gbml.train / gbml.deploy
#   dump_restore.sh  pg_dump -Fc / pg_restore of a registry
#   replica.sh       scoring and (refused) training on a hot standby
#   upgrade.sh       ALTER EXTENSION gbml UPDATE from 0.1.0
#   distributed.sh   training across servers: a coordinator and two shards
# (and, only when named, differential.sh: the randomized differential probe)
# Needs PostgreSQL 15 (/usr/lib/postgresql/15/bin, or PGBIN) and gbml installed
# (make install); run as root (servers run as postgres) or as an ordinary user.
# Prints every script's lines, its wall time, then the combined
# "N passed, N failed"; exits non-zero if anything failed.
# Usage: tests/ops/run_all.sh [script names...]   (default: all five)
cd "$(dirname "$0")" || exit 2
scripts=("$@")
[ ${#scripts[@]} -gt 0 ] || scripts=(crash_safety dump_restore replica upgrade distributed)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
passed=0 failed=0 status=0
summary=()
for s in "${scripts[@]}"; do
  s=${s%.sh}
  echo "== $s"
  [ -f "./$s.sh" ] || { echo "not ok - no tests/ops/$s.sh"; failed=$((failed + 1)); status=1; continue; }
  start=$SECONDS
  bash "./$s.sh" 2>&1 | tee "$logs/$s.out"
  rc=${PIPESTATUS[0]}
  secs=$((SECONDS - start))
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$logs/$s.out" | tail -1)
  if [ -z "$line" ]; then
    echo "not ok - $s.sh printed no summary line (exit status $rc)"
    failed=$((failed + 1)); status=1
    summary+=("$s: no summary, exit $rc, ${secs} s")
    continue
  fi
  p=${line%% passed*}; f=${line#*, }; f=${f%% failed}
  passed=$((passed + p)); failed=$((failed + f))
  if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then status=1; fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "not ok - $s.sh exited with status $rc"; failed=$((failed + 1))
  fi
  summary+=("$s: $line, ${secs} s")
done
echo "== summary"
printf '%s\n' "${summary[@]}"
echo "$passed passed, $failed failed"
exit $status
