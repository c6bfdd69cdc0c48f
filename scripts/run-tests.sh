#!/usr/bin/env bash
# The README's test command: install what is missing, build everything with
# warnings on, run the whole CTest suite (Catch2 cases, header checks, the
# find_package consumer, the ThreadSanitizer build, the benchmark smoke), and
# prove that every Catch2 case ran exactly once (scripts/check-catch-count.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/install-deps.sh
build=${BASHEXEC_BUILD_DIR:-build/tests}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBASHEXEC_BUILD_TESTS=ON -DBASHEXEC_BUILD_EXAMPLES=ON
cmake --build "$build" -j "$(nproc)"
cd "$build"

# Every Catch2 case that starts appends a line here (tests/catch_main.cpp);
# the count check reads it after the run, pass or fail.
run_log=$PWD/catch2_run.log
rm -f "$run_log"
status=0
BASHEXEC_CATCH_RUN_LOG=$run_log ctest --output-on-failure -j "$(nproc)" --timeout 300 || status=$?
bash "$root/scripts/check-catch-count.sh" "$PWD" "$run_log" || status=1
exit "$status"
