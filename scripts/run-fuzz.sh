#!/usr/bin/env bash
# run-fuzz.sh: the fuzz lane. Builds fuzz/ with clang++-14
# (-fsanitize=fuzzer,address,undefined) in its own build directory and runs
# every fuzz_* target for a fixed budget, starting from its seed corpus in
# fuzz/corpus/<name>/. Fails on any crash, sanitizer report, property
# failure, leak or timeout; the input that found it is copied into
# fuzz/corpus/<name>/ as a regression input (commit it with the fix: every
# later run replays it first).
#
#   scripts/run-fuzz.sh                  # every target, FUZZ_SECONDS each
#   FUZZ_SECONDS=600 scripts/run-fuzz.sh fuzz_render   # one target, longer
#
# Targets run side by side, one per core (two at most).
#
# Environment: FUZZ_SECONDS (per target, default 45), FUZZ_CXX (default
# clang++-14), BASHEXEC_FUZZ_BUILD_DIR (default build/fuzz), FUZZ_BUILD_ONLY=1
# (build the targets and stop). New corpus
# entries found along the way stay in <build>/corpus/, not in the repository.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BASHEXEC_FUZZ_BUILD_DIR:-$root/build/fuzz}
seconds=${FUZZ_SECONDS:-45}
cxx=${FUZZ_CXX:-clang++-14}
jobs=$(nproc)
((jobs <= 2)) || jobs=2

cmake -S "$root/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs"
if [[ ${FUZZ_BUILD_ONLY:-0} == 1 ]]; then
  echo "run-fuzz: targets built in $build"
  exit 0
fi

# Symbolized reports; leaks count as failures; UB aborts (-fno-sanitize-recover).
if symbolizer=$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer); then
  export ASAN_SYMBOLIZER_PATH=$symbolizer UBSAN_SYMBOLIZER_PATH=$symbolizer
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1

# The targets' scratch files (session logs, spill files) go here, on tmpfs
# when there is one, and go away with the script whatever the targets do.
scratch=$(mktemp -d /dev/shm/bashexec-fuzz-run.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export BASHEXEC_FUZZ_SCRATCH=$scratch

targets=("$@")
if ((${#targets[@]} == 0)); then
  for exe in "$build"/fuzz_*; do
    [[ -x $exe && -f $exe ]] && targets+=("$(basename "$exe")")
  done
fi
((${#targets[@]})) || { echo "run-fuzz: no fuzz targets were built" >&2; exit 1; }

# One target: fuzz it, then print its summary in one piece (targets run
# side by side, up to one per core, so their lines must not interleave).
fuzz_one() {
  local target=$1 name=${1#fuzz_} start=$SECONDS
  local seeds=$root/fuzz/corpus/$name work=$build/corpus/$name artifacts=$build/artifacts/$name
  mkdir -p "$seeds" "$work" "$artifacts"
  rm -f "$artifacts"/*
  # The first directory receives new inputs; the seed corpus is only read.
  # Every seed (regression inputs included) is replayed before fuzzing.
  if "$build/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$artifacts/" "$work" "$seeds" >"$build/$target.log" 2>&1; then
    echo "run-fuzz: $target for ${seconds}s (seeds: fuzz/corpus/$name, $(find "$seeds" -type f | wc -l) files)" \
      "$(grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)' "$build/$target.log" | tr '\n' ' ')" \
      "-> ok ($((SECONDS - start))s)"
    return 0
  fi
  {
    echo "run-fuzz: $target FAILED ($((SECONDS - start))s); its report:"
    grep -v '^#[0-9]' "$build/$target.log" | tail -n 60
    for found in "$artifacts"/*; do
      [[ -f $found ]] || continue
      cp "$found" "$seeds/regression-$(basename "$found")"
      echo "run-fuzz: saved fuzz/corpus/$name/regression-$(basename "$found") (commit it with the fix)"
    done
  } >&2
  return 1
}

declare -A pid_of=()
failed=()
collect() {  # wait for one running target; remember it if it failed
  local done_pid status=0 target
  wait -n -p done_pid || status=$?
  for target in "${!pid_of[@]}"; do
    [[ ${pid_of[$target]} == "$done_pid" ]] || continue
    ((status == 0)) || failed+=("$target")
    unset "pid_of[$target]"
  done
}
for target in "${targets[@]}"; do
  while ((${#pid_of[@]} >= jobs)); do collect; done
  fuzz_one "$target" &
  pid_of[$target]=$!
done
while ((${#pid_of[@]})); do collect; done

if ((${#failed[@]})); then
  echo "run-fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "run-fuzz: ${#targets[@]} targets, ${seconds}s each, $jobs at a time, no failure"
