#!/bin/sh
# Runs every test binary, then the viewer test, and prints one closing line:
# "tests: N passed, N failed, N skipped" over cmocka cases, viewer checks and e2e tests.
# A test binary or e2e pass that ran no test fails; under CI (CI set) so does any skip.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."

passed=0
failed=0
skipped=0
log=$(mktemp)
for bin in $(find "$build/tests" -type f -name 'test_*' | sort); do
	echo "== $bin"
	"$bin" 2>&1 | tee "$log"
	status=$?
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' "$log" | tail -1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below:/\1/p' "$log" | tail -1)
	s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test(s), listed below:/\1/p' "$log" | tail -1)
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	skipped=$((skipped + ${s:-0}))
	if [ "${p:-0}${f:-0}${s:-0}" = 000 ] && grep -q '^\[==========\] 0 test(s) run' "$log"; then
		echo "$bin ran no test"
		failed=$((failed + 1))
	fi
	# A binary that crashed before its summary still counts as a failure.
	if [ -z "$p$f" ] || { [ -z "$f" ] && ! grep -q '^\[  PASSED  \]' "$log"; }; then
		echo "$bin ended without a cmocka summary"
		failed=$((failed + 1))
	fi
done

for script in tests/viewer/test_*.mjs; do
	[ -e "$script" ] || continue
	echo "== $script"
	node "$script" "$build" 2>&1 | tee "$log"
	p=$(sed -n 's/^viewer: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$log")
	f=$(sed -n 's/^viewer: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$log")
	if [ -z "$p" ]; then
		echo "$script ended without a summary"
		failed=$((failed + 1))
	else
		passed=$((passed + p))
		failed=$((failed + f))
	fi
done
# The end-to-end tests, then the functional ones again with the tool under ASan+UBSan
# (the timing-sensitive pool test is left out of that pass: sanitizers slow the tool).
run_e2e() {
	label=$1
	shift
	echo "== tests/e2e ($label)"
	"$@" 2>&1 | tee "$log"
	p=$(sed -n "s/^$label: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1/p" "$log")
	f=$(sed -n "s/^$label: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\2/p" "$log")
	s=$(sed -n "s/^$label: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\3/p" "$log")
	if [ -z "$p" ]; then
		echo "tests/e2e ($label) ended without a summary"
		failed=$((failed + 1))
	elif [ $((p + f)) -eq 0 ]; then
		echo "tests/e2e ($label) ran no test"
		failed=$((failed + 1))
	else
		passed=$((passed + p))
		failed=$((failed + f))
		skipped=$((skipped + s))
	fi
}
run_e2e e2e env PYTRACE_BUILD="$build" python3 tests/e2e/run.py e2e
run_e2e e2e-asan env PYTRACE_BUILD="$build" \
	PYTRACE_TOOL="$(cd "$build" && pwd)/asan/pytrace-sample" \
	python3 tests/e2e/run.py e2e-asan test_perf_tree test_python_dump test_python_views \
	test_kernel_reader test_kernel_samples test_perfetto test_report \
	test_pool_flows.PoolFlows.test_ppe_fork_compute \
	test_pool_flows.PoolFlows.test_pool_forkserver_sleep
rm -f "$log"

# In CI (root, every package of make deps) nothing has a reason to skip: a skip there
# is a test that did not run, so it fails the run. Elsewhere each skip says why.
if [ -n "${CI:-}" ] && [ "$skipped" -gt 0 ]; then
	echo "tests: $skipped skipped under CI, where every test must run (see 'skipped' above)"
	failed=$((failed + skipped))
fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
