#!/usr/bin/env bash
# The README's test command: install what is missing, build everything with
# warnings on, run the whole CTest suite (Catch2 cases, header checks, the
# find_package consumer, the [concurrency] tests under ThreadSanitizer, the
# benchmark smoke), prove that every Catch2 case ran exactly once
# (scripts/check-catch-count.sh), then run the fuzz lane with a short budget
# (scripts/run-fuzz.sh, FUZZ_SECONDS per target, 20 here).
# -O1 without debug info: the build is most of the CI budget, and -O2 -g
# costs twice as much per test file (docs/testing.md "Timings"). The
# ASan+UBSan lane is scripts/run-sanitizers.sh, run on its own.
# BASHEXEC_FUZZ=0 leaves the fuzz lane out (local iteration only).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/install-deps.sh
build=${BASHEXEC_BUILD_DIR:-build/tests}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" \
  -DBASHEXEC_BUILD_TESTS=ON -DBASHEXEC_BUILD_EXAMPLES=ON \
  -DBASHEXEC_TEST_SANITIZERS=${BASHEXEC_TEST_SANITIZERS:-}
cmake --build "$build" -j "$(nproc)"
cd "$build"

# Every Catch2 case that starts appends a line here (tests/catch_main.cpp);
# the count check reads it after the run, pass or fail.
run_log=$PWD/catch2_run.log
rm -f "$run_log"
status=0
BASHEXEC_CATCH_RUN_LOG=$run_log ctest --output-on-failure -j "$(nproc)" --timeout 300 || status=$?
bash "$root/scripts/check-catch-count.sh" "$PWD" "$run_log" || status=1

if [[ ${BASHEXEC_FUZZ:-1} != 0 ]]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-20} bash "$root/scripts/run-fuzz.sh" || status=1
fi
exit "$status"
