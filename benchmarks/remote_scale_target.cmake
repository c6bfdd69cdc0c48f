# remote_scale_target.cmake: defines `bashexec_remote_scale`, the harness of
# the simulated Kubernetes scale test (benchmarks/remote_scale.cpp, driven by
# benchmarks/remote_scale.sh). Included from benchmarks/CMakeLists.txt and
# from tests/extra_tests.cmake (its small run is a test), whichever comes
# first; needs nlohmann-json.
if(NOT TARGET bashexec_remote_scale)
  add_executable(bashexec_remote_scale ${CMAKE_CURRENT_LIST_DIR}/remote_scale.cpp)
  target_link_libraries(bashexec_remote_scale PRIVATE bashexec::bashexec nlohmann_json::nlohmann_json)
  target_compile_options(bashexec_remote_scale PRIVATE -Wall -Wextra -Wpedantic -Wshadow)
  set_target_properties(bashexec_remote_scale PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/benchmarks)
endif()
