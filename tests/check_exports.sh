#!/usr/bin/env bash
# tests/check_exports.sh — gbml.so exports exactly what PostgreSQL looks up
# (the Makefile's gbml.map): Pg_magic_func, _PG_init, and each C function
# the extension's SQL scripts name, with its pg_finfo_ record.  An
# engine function in the table could be interposed by (or interpose on) a
# same-named symbol of another library in the backend; a SQL function
# missing from it could not be called.  Usage: tests/check_exports.sh [gbml.so]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
so=${1:-$top/gbml.so}
want=$(mktemp); have=$(mktemp)
trap 'rm -f "$want" "$have"' EXIT
# what the install and upgrade scripts name (AS 'MODULE_PATHNAME', 'symbol'): the
# SQL's view, independent of the Makefile's, which reads PG_FUNCTION_INFO_V1
{ echo Pg_magic_func; echo _PG_init
  grep -ho "MODULE_PATHNAME', *'[A-Za-z0-9_]*'" "$top"/gbml--*.sql | awk -F"'" '{print $3; print "pg_finfo_" $3}'; } |
  sort -u > "$want"
# defined functions and data in the dynamic table (not the linker's own _init/_fini)
nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | grep -v '^_\(init\|fini\)$' | sort -u > "$have"
if ! diff -u "$want" "$have" > /dev/null; then
  echo "gbml.so's exported symbols differ from the SQL functions (- missing, + extra):" >&2
  diff -u "$want" "$have" | sed -n '/^[-+][^-+]/p' | head -40 >&2
  exit 1
fi
echo "gbml.so exports $(wc -l < "$have") symbols: the SQL functions, their info records, Pg_magic_func and _PG_init"
