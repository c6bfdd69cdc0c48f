#!/usr/bin/env bash
# The README's test command: install what is missing, build everything with
# warnings on, and run the whole CTest suite (Catch2 cases, header checks,
# the find_package consumer, the ThreadSanitizer build, the benchmark smoke).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
build=${BASHEXEC_BUILD_DIR:-build/tests}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBASHEXEC_BUILD_TESTS=ON -DBASHEXEC_BUILD_EXAMPLES=ON
cmake --build "$build" -j "$(nproc)"
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 300
