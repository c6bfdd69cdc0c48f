#!/usr/bin/env bash
# run-sanitizers.sh: the sanitizer lanes.
#
#   asan  the whole suite built with g++ -fsanitize=address,undefined
#         (-fno-sanitize-recover: undefined behaviour fails its test) in its
#         own build directory, run with ctest, every Catch2 case
#         count-checked like the normal suite (scripts/check-catch-count.sh).
#   tsan  the [concurrency] tests under ThreadSanitizer: the test_*_tsan
#         executables of tests/extra_tests.cmake (label tsan), built alone.
#
#   scripts/run-sanitizers.sh                 # both lanes
#   SANITIZER_LANES=asan scripts/run-sanitizers.sh
#
# Environment: SANITIZER_LANES (default "asan tsan"), BASHEXEC_ASAN_BUILD_DIR
# (default build/asan), BASHEXEC_TSAN_BUILD_DIR (default build/tsan). Each
# lane prints how long it took.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lanes=${SANITIZER_LANES:-asan tsan}
jobs=$(nproc)
status=0

for lane in $lanes; do
  start=$SECONDS
  case $lane in
    asan)
      build=${BASHEXEC_ASAN_BUILD_DIR:-$root/build/asan}
      flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
      # TSan cannot share a binary with ASan: its lane builds elsewhere.
      cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBASHEXEC_BUILD_TESTS=ON \
        -DBASHEXEC_BUILD_EXAMPLES=ON -DBASHEXEC_TSAN_TESTS=OFF \
        -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
      cmake --build "$build" -j "$jobs"
      run_log=$build/catch2_run.log
      rm -f "$run_log"
      lane_status=0
      (cd "$build" &&
        BASHEXEC_CATCH_RUN_LOG=$run_log \
        ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1 \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1 \
        ctest --output-on-failure -j "$jobs" --timeout 300) || lane_status=1
      bash "$root/scripts/check-catch-count.sh" "$build" "$run_log" || lane_status=1
      ;;
    tsan)
      build=${BASHEXEC_TSAN_BUILD_DIR:-$root/build/tsan}
      cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBASHEXEC_BUILD_TESTS=ON \
        -DBASHEXEC_BUILD_EXAMPLES=OFF -DBASHEXEC_TSAN_TESTS=ON >/dev/null
      targets=$(cd "$build" && ctest -N -L '^tsan$' | sed -n 's/^ *Test *#[0-9]*: //p')
      if [[ -z $targets ]]; then
        echo "run-sanitizers: this compiler cannot build -fsanitize=thread; the tsan lane has nothing to run" >&2
        lane_status=1
      else
        # shellcheck disable=SC2086  # one word per target
        cmake --build "$build" -j "$jobs" --target $targets
        lane_status=0
        (cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 300 -L '^tsan$') || lane_status=1
      fi
      ;;
    *)
      echo "run-sanitizers: unknown lane '$lane' (asan, tsan)" >&2
      exit 2
      ;;
  esac
  if ((lane_status == 0)); then
    echo "run-sanitizers: $lane lane passed in $((SECONDS - start))s"
  else
    echo "run-sanitizers: $lane lane FAILED after $((SECONDS - start))s" >&2
    status=1
  fi
done
exit "$status"
