#!/usr/bin/env bash
# tests/run_all.sh — the set-up behind `make test` and `make demo` on a fresh
# Debian 12 machine: installs what is missing (PostgreSQL 15 server and
# headers, pgTAP, pg_cron, pg_prove) with apt-get, builds and installs gbml,
# starts a throwaway cluster with pg_virtualenv (pg_cron preloaded) and runs
#   test: gbml.so's exported symbols (tests/check_exports.sh), the C unit
#         tests (also under ASan + UBSan), the GPU checks on the
#         emulated CUDA backend, pg_regress (installcheck), pgTAP (pg_prove)
#         and the operational tests (tests/ops: crash, dump/restore, standby,
#         upgrade);
#   demo: tests/demo/demo.sql.
# Exits non-zero on any failure.
set -euo pipefail
mode=${1:-test}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need=()
command -v pg_config >/dev/null && [ -d "$(pg_config --includedir-server 2>/dev/null)" ] || need+=(postgresql-server-dev-15)
[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
[ -f /usr/share/postgresql/15/extension/pgtap.control ] || need+=(postgresql-15-pgtap)
[ -f /usr/share/postgresql/15/extension/pg_cron.control ] || need+=(postgresql-15-cron)
command -v pg_prove >/dev/null || need+=(libtap-parser-sourcehandler-pgtap-perl)
command -v pg_virtualenv >/dev/null || need+=(postgresql-common)
command -v make >/dev/null && command -v gcc >/dev/null && command -v g++ >/dev/null || need+=(build-essential)
if [ "$mode" = test ]; then
  # the fuzzers (clang's libFuzzer and sanitizer runtimes, libomp for the OpenMP engine)
  command -v clang >/dev/null || need+=(clang)
  ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || need+=(libclang-rt-14-dev)
  [ -e /usr/lib/llvm-14/lib/libomp.so ] || need+=(libomp-14-dev)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing: ${need[*]}"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
export PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config

echo "== building gbml"
make -s PG_CONFIG=$PG_CONFIG ${NO_CUDA:+NO_CUDA=1}
sudo_if_needed make -s PG_CONFIG=$PG_CONFIG ${NO_CUDA:+NO_CUDA=1} install

status=0
# each section's wall time, so the slow ones show (make test should stay under 15 minutes on 2 cores)
section_start=$SECONDS
section() {
  [ -z "${section_name:-}" ] || echo "   ($section_name: $((SECONDS - section_start)) s)"
  section_name=$1; section_start=$SECONDS
  echo "== $1"
}
if [ "$mode" = test ]; then
  section "gbml.so's exported symbols (only what PostgreSQL looks up)"
  tests/check_exports.sh || status=1
  section "C unit tests (src/core)"
  make -s -j"$(nproc)" -C tests/unit run || status=1
  section "GPU checks on the emulated CUDA backend (kernels, trainings, planted bugs)"
  make -s gpu-emu || status=1
  section "the unit tests and the GPU checker under AddressSanitizer + UndefinedBehaviorSanitizer"
  make -s sanitize || status=1
  section "fuzzing: model loader, params parser, dataset deserializer (libFuzzer, a few seconds each)"
  make -s fuzz || status=1
fi

# The throwaway cluster: pg_cron needs to be preloaded; it schedules in contrib_regression
# (pg_regress's database) so the pgTAP and regression tests can use it.
in_cluster() {
  pg_virtualenv -v 15 \
    -o "shared_preload_libraries=pg_cron" \
    -o "cron.database_name=gbml_test" \
    -o "cron.use_background_workers=on" \
    -o "max_worker_processes=16" \
    -o "max_parallel_workers_per_gather=2" \
    "$@"
}

if [ "$mode" = test ]; then
  section "pg_regress and pgTAP on a throwaway cluster"
  in_cluster bash -c '
    set -e
    createdb gbml_test
    rc=0
    make -s PG_CONFIG='"$PG_CONFIG"' installcheck || { rc=1; cat regression.diffs 2>/dev/null | head -200; }
    PGDATABASE=gbml_test pg_prove --ext .sql -r tests/pgtap || rc=1
    exit $rc' || status=1
  section "operational tests: crash safety, dump/restore, hot standby, upgrade (own clusters)"
  tests/ops/run_all.sh || status=1
  section "total: $SECONDS s"
  if [ $status = 0 ]; then echo "== all tests passed"; else echo "== SOME TESTS FAILED"; fi
  exit $status
else
  in_cluster bash -c 'createdb gbml_test && PGDATABASE=gbml_test psql -X -v ON_ERROR_STOP=1 -q -f tests/demo/demo.sql'
fi
