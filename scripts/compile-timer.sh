#!/usr/bin/env bash
# compile-timer.sh: the test build's compiler launcher (scripts/run-tests.sh
# sets it as CMAKE_CXX_COMPILER_LAUNCHER). Runs the compiler as given and
# appends "<wall seconds> <object file>" to $BASHEXEC_COMPILE_LOG, so every
# run reports where its build time went (the build is most of the 20-minute
# budget: docs/testing.md, "Timings"). Without the variable it only runs
# the compiler.
start=$(date +%s%N)
"$@"
status=$?
if [[ -n ${BASHEXEC_COMPILE_LOG:-} ]]; then
  object=unknown
  previous=
  for arg in "$@"; do
    [[ $previous == -o ]] && object=$arg
    previous=$arg
  done
  end=$(date +%s%N)
  printf '%d.%01d %s\n' $(((end - start) / 1000000000)) $((((end - start) / 100000000) % 10)) "$object" \
    >>"$BASHEXEC_COMPILE_LOG"
fi
exit "$status"
