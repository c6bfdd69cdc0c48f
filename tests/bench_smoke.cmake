# bench_smoke.cmake: builds the benchmark binary with the tests (when Google
# Benchmark is installed) and runs one tiny case once, so the suite cannot
# rot while benchmarks are off by default. Include from tests/CMakeLists.txt:
#   include(${CMAKE_CURRENT_SOURCE_DIR}/bench_smoke.cmake)
find_package(benchmark QUIET)
if(benchmark_FOUND)
  if(NOT BASHEXEC_BUILD_BENCHMARKS)
    set(BASHEXEC_BENCH_SMOKE_ONLY ON)
  endif()
  include(${PROJECT_SOURCE_DIR}/benchmarks/bench_target.cmake)
  add_test(NAME benchmark_smoke
    COMMAND bashexec_bench --benchmark_filter=^collect/tiny/
            --benchmark_min_time=0.001 --benchmark_repetitions=1)
  set_tests_properties(benchmark_smoke PROPERTIES TIMEOUT 60)  # exits non-zero when a case fails
  # A spaced case (issue 27): calls after 20 ms of idleness, about 3 s.
  add_test(NAME benchmark_smoke_spaced
    COMMAND bashexec_bench "--benchmark_filter=^spawn/true/fork_exec,20ms_apart/"
            --benchmark_repetitions=1)
  set_tests_properties(benchmark_smoke_spaced PROPERTIES TIMEOUT 60)
else()
  message(STATUS "bashexec: Google Benchmark not found; benchmark smoke test skipped")
endif()
