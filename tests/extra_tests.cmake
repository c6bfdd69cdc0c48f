# Tests beyond the one-executable-per-file glob: the installed package as a
# downstream project sees it, and the concurrency test under ThreadSanitizer.
# Included from tests/CMakeLists.txt.

# --- find_package(bashexec) from a fresh install prefix ---------------------
add_test(NAME consumer_find_package
  COMMAND ${CMAKE_COMMAND}
    -DBUILD_DIR=${PROJECT_BINARY_DIR}
    -DSOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/consumer
    -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer
    -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
    -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run_consumer_test.cmake)
set_tests_properties(consumer_find_package PROPERTIES TIMEOUT 300 LABELS "package")

# --- the concurrency test built with -fsanitize=thread ----------------------
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS -fsanitize=thread)
set(CMAKE_REQUIRED_LINK_OPTIONS -fsanitize=thread)
check_cxx_source_compiles("int main() { return 0; }" BASHEXEC_HAVE_TSAN)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)

option(BASHEXEC_TSAN_TESTS "Build test_concurrency_tsan (test_concurrency under ThreadSanitizer)" ${BASHEXEC_HAVE_TSAN})
if(BASHEXEC_TSAN_TESTS)
  # Its own Catch2 main: everything in the binary is instrumented.
  add_executable(test_concurrency_tsan test_concurrency.cpp catch_main.cpp)
  target_link_libraries(test_concurrency_tsan PRIVATE bashexec_tools Catch2::Catch2)
  target_include_directories(test_concurrency_tsan PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(test_concurrency_tsan PRIVATE ${BASHEXEC_WARNINGS} -fsanitize=thread -g -O1)
  target_link_options(test_concurrency_tsan PRIVATE -fsanitize=thread)
  add_test(NAME test_concurrency_tsan COMMAND test_concurrency_tsan)
  set_tests_properties(test_concurrency_tsan PROPERTIES
    TIMEOUT 120
    LABELS "tsan"
    ENVIRONMENT "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1")
endif()

# --- the hardening tests again as an ordinary user (root runs the rest) ------
add_test(NAME test_hardening_unprivileged
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run_unprivileged.sh $<TARGET_FILE:test_hardening> --warn NoTests
          "[hardening]")
set_tests_properties(test_hardening_unprivileged PROPERTIES TIMEOUT 300 LABELS "unprivileged" SKIP_RETURN_CODE 77)
