#!/usr/bin/env bash
# The README's test command: install what is missing, build everything with
# warnings on, run the whole CTest suite (Catch2 cases, header checks, the
# find_package consumer, the [concurrency] tests under ThreadSanitizer, the
# benchmark smoke), prove that every Catch2 case ran exactly once
# (scripts/check-catch-count.sh), then run the fuzz lane with a short budget
# (scripts/run-fuzz.sh, FUZZ_SECONDS per target, 12 here: five targets, two at
# a time, in about as long as four took at 20).
#
# Every Catch2 executable is built with AddressSanitizer and
# UndefinedBehaviorSanitizer (at -O0: docs/testing.md "Timings"), so the
# whole suite is the ASan+UBSan lane: a memory error, a leak or undefined
# behaviour fails its test. The programs the tests drive as black boxes (the
# CLI, the benchmarks) are plain -O1, so the bounds measured on them are
# the real program's. BASHEXEC_TEST_SANITIZERS= (empty) builds the tests
# plain; scripts/run-sanitizers.sh instruments everything.
#
# The Release lane: the executor, sandbox, hardening, prespawned and tools
# suites are built once more as a user's Release build compiles the library
# (-O3 -DNDEBUG, no sanitizers; CTest prefix release/, counted like the
# rest), since code that runs in a CLONE_VM child has gone wrong at -O3
# only (spawn/detail/fork_exec_child.hpp). BASHEXEC_RELEASE_LANE=OFF leaves it out
# (local iteration only).
# BASHEXEC_FUZZ=0 leaves the fuzz lane out (local iteration only).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/install-deps.sh
build=${BASHEXEC_BUILD_DIR:-build/tests}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" \
  -DBASHEXEC_BUILD_TESTS=ON -DBASHEXEC_BUILD_EXAMPLES=ON \
  -DBASHEXEC_TEST_SANITIZERS=${BASHEXEC_TEST_SANITIZERS-address,undefined} \
  -DBASHEXEC_TEST_RELEASE_LANE=${BASHEXEC_RELEASE_LANE:-ON} \
  "-DCMAKE_CXX_COMPILER_LAUNCHER=$root/scripts/compile-timer.sh"
compile_log=$(cd "$build" && pwd)/compile-times.log
: >"$compile_log"
build_start=$SECONDS
BASHEXEC_COMPILE_LOG=$compile_log cmake --build "$build" -j "$(nproc)"
# Where the build time went: the slowest objects and the sum (CPU-ish: two
# compile at once on two cores).
echo "run-tests: build took $((SECONDS - build_start)) s; compiles summed $(awk '{s += $1} END {printf "%d", s}' "$compile_log") s over $(wc -l <"$compile_log") objects; the slowest:"
# (awk, not head: head leaves early and under pipefail sort's SIGPIPE would
# end the script with 141.)
sort -rn "$compile_log" | awk 'NR <= 12' | sed "s#$root/##; s#^#  #"
cd "$build"

# Every Catch2 case that starts appends a line here (tests/catch_main.cpp);
# the count check reads it after the run, pass or fail.
run_log=$PWD/catch2_run.log
rm -f "$run_log"
status=0
fuzz=${BASHEXEC_FUZZ:-1}
# Most cases wait on processes, pipes and timeouts rather than compute, so
# the fuzz targets compile (niced) while CTest runs, and CTest runs one case
# more than there are cores.
if [[ $fuzz != 0 ]]; then
  fuzz_build_log=$PWD/fuzz-build.log
  FUZZ_BUILD_ONLY=1 nice -n 10 bash "$root/scripts/run-fuzz.sh" >"$fuzz_build_log" 2>&1 &
  fuzz_build=$!
fi
# Leaks fail their test; UBSan reports come with a stack.
BASHEXEC_CATCH_RUN_LOG=$run_log \
  ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1 \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j "$(($(nproc) + 1))" --timeout 300 || status=$?
bash "$root/scripts/check-catch-count.sh" "$PWD" "$run_log" || status=1

if [[ $fuzz != 0 ]]; then
  if wait "$fuzz_build"; then
    FUZZ_SECONDS=${FUZZ_SECONDS:-12} bash "$root/scripts/run-fuzz.sh" || status=1
  else
    echo "run-tests: the fuzz targets did not build:" >&2
    tail -n 40 "$fuzz_build_log" >&2
    status=1
  fi
fi
exit "$status"
