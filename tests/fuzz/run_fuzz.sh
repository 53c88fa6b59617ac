#!/usr/bin/env bash
# run_fuzz.sh — runs libFuzzer harnesses and prints one TAP-like line each,
# then "N passed, N failed"; exits non-zero when any harness crashed, leaked,
# hit a sanitizer report or a harness check.  Called by the Makefile:
#
#   run_fuzz.sh time SECONDS harness...   each for SECONDS (-max_total_time)
#   run_fuzz.sh runs N harness...         each for N executions (-runs)
#   run_fuzz.sh replay DIR harness...     each on DIR/<harness>-* once
#
# JOBS (default: the CPU count) harnesses run at the same time.
# Fuzzing works on a temporary copy of corpus/<harness>: the kept corpus is
# never written.  Crashing inputs go to out/artifacts/<harness>-crash-...,
# logs to out/<harness>.log.
set -u
cd "$(dirname "$0")"
mode=$1
arg=$2
shift 2

passed=0
failed=0
mkdir -p out/artifacts
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

max_len() {
	case $1 in
		fuzz_params) echo 1024 ;;
		*) echo 16384 ;;
	esac
}

# Sanitizer reports or harness checks in a log, even if the exit status missed them.
reported() {
	grep -aqE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|fuzz check failed|SUMMARY: ' "$1"
}

# Fuzzes one harness; writes its result line(s) to out/<h>.result, first
# word "ok" or "not".
fuzz_one() {
	local h=$1 log=out/$1.log work limit dict start rc wall runs rate cov
	work=$(mktemp -d "${TMPDIR:-/tmp}/gbml_fuzz_$h.XXXXXX")
	mkdir -p "$work/corpus"
	cp corpus/"$h"/* "$work/corpus/" 2>/dev/null
	if [ "$mode" = time ]; then
		limit="-max_total_time=$arg"
	else
		limit="-runs=$arg"
	fi
	start=$(date +%s%N)
	dict=
	[ -f "$h.dict" ] && dict="-dict=$h.dict"
	./"$h" $limit $dict -max_len="$(max_len "$h")" -timeout=30 -rss_limit_mb=2560 -print_final_stats=1 \
		-artifact_prefix="out/artifacts/$h-" "$work/corpus" >"$log" 2>&1
	rc=$?
	wall=$(( ($(date +%s%N) - start) / 100000000 ))
	wall="$((wall / 10)).$((wall % 10))"
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	cov=$(grep -aoE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
	rm -rf "$work"
	if [ $rc -eq 0 ] && ! reported "$log"; then
		echo "ok - $h: ${runs:-0} runs, 0 crashes ($wall s, ${rate:-?} exec/s, $cov)" >out/"$h".result
	else
		{
			echo "not ok - $h: ${runs:-0} runs, 1 crash (exit $rc, $wall s; log: tests/fuzz/$log)"
			grep -aE 'ERROR:|runtime error:|fuzz check failed|SUMMARY:|Test unit written' "$log" | head -5 | sed 's/^/#   /'
		} >out/"$h".result
	fi
}

# Replays DIR/<h>-* through the <h>_replay build (no workarounds for known bugs).
replay_one() {
	local h=$1 log=out/$1.replay.log f files
	shopt -s nullglob
	files=("$arg"/"$h"-*)
	shopt -u nullglob
	: >out/"$h".result
	if [ ${#files[@]} -eq 0 ]; then
		echo "ok - $h: no inputs in $arg" >>out/"$h".result
		return
	fi
	for f in "${files[@]}"; do
		if ./"$h"_replay -runs=1 "$f" >"$log" 2>&1 && ! reported "$log"; then
			echo "ok - $h: $f" >>out/"$h".result
		else
			echo "not ok - $h: $f" >>out/"$h".result
			grep -aE 'runtime error:|fuzz check failed|SUMMARY:' "$log" | head -2 | sed 's/^/#   /' >>out/"$h".result
		fi
	done
}

# JOBS harnesses at a time (default: the CPU count); results print in order.
jobs_max=${JOBS:-$(nproc 2>/dev/null || echo 1)}
for h in "$@"; do
	rm -f out/"$h".result
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
		wait -n
	done
	if [ "$mode" = replay ]; then
		replay_one "$h" &
	else
		fuzz_one "$h" &
	fi
done
wait
for h in "$@"; do
	if [ -f out/"$h".result ]; then
		cat out/"$h".result
		passed=$((passed + $(grep -c '^ok' out/"$h".result)))
		failed=$((failed + $(grep -c '^not ok' out/"$h".result)))
	else
		echo "not ok - $h: no result"
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
