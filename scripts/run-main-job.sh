#!/usr/bin/env bash
# The README's main job: build the bashexec CLI and run a real command under
# the read-only sandbox — a read that works and a write that is denied.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
build=${BASHEXEC_BUILD_DIR:-build/main}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBASHEXEC_BUILD_TESTS=OFF -DBASHEXEC_BUILD_EXAMPLES=ON
cmake --build "$build" -j "$(nproc)" --target bashexec_cli

workspace=$(mktemp -d)
trap 'rm -rf "$workspace"' EXIT
echo "\$ bashexec run --mode read-only --workdir $workspace -- 'head -n 3 /etc/os-release; echo hello > notes.txt'"
set +e
"$build/apps/bashexec" run --mode read-only --workdir "$workspace" -- \
  'head -n 3 /etc/os-release; echo hello > notes.txt'
status=$?
set -e
echo "(exit status $status; notes.txt exists afterwards: $([ -e "$workspace/notes.txt" ] && echo yes || echo no))"
[ ! -e "$workspace/notes.txt" ]  # the denied write must not have happened
