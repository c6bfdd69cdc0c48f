# bench_target.cmake: defines the `bashexec_bench` executable (Google
# Benchmark). Included from benchmarks/CMakeLists.txt and from
# tests/bench_smoke.cmake, whichever comes first; needs benchmark::benchmark.
# BASHEXEC_BENCH_SMOKE_ONLY (set by the smoke test when the benchmarks
# themselves are off) leaves bench_prespawn.cpp, bench_network.cpp and
# bench_shell_state.cpp (the tool layer) out:
# the smoke runs one collect case, the first is a quarter of the binary's
# compile time and the second compiles Asio and Beast (the egress proxy).
# bench_network.cpp registers its cases itself, so leaving it out needs no
# macro.
if(NOT TARGET bashexec_bench)
  add_executable(bashexec_bench
    ${CMAKE_CURRENT_LIST_DIR}/bench_main.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bench_common.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bench_collect.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bench_spawn.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bench_memory.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bench_protected.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bench_terminal.cpp)
  if(BASHEXEC_BENCH_SMOKE_ONLY)
    target_compile_definitions(bashexec_bench PRIVATE BASHEXEC_BENCH_WITHOUT_PRESPAWN)
  else()
    target_sources(bashexec_bench PRIVATE ${CMAKE_CURRENT_LIST_DIR}/bench_prespawn.cpp
                                          ${CMAKE_CURRENT_LIST_DIR}/bench_network.cpp
                                          ${CMAKE_CURRENT_LIST_DIR}/bench_shell_state.cpp)
    target_link_libraries(bashexec_bench PRIVATE bashexec::tools)
  endif()
  target_link_libraries(bashexec_bench PRIVATE bashexec::bashexec benchmark::benchmark)
  target_compile_options(bashexec_bench PRIVATE -Wall -Wextra -Wpedantic -Wshadow)
  # A fixed place, whichever directory defined it (scripts and the smoke test rely on it).
  set_target_properties(bashexec_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/benchmarks)
endif()
