# Compositions that must fail to compile, each with a readable message
# (contract: invalid compositions are static_asserts that say what to do).
# Each test compiles one file with -fsyntax-only and passes when the
# compiler's output contains the expected message.
function(bashexec_compile_fail name expected)
  add_test(NAME compile_fail_${name}
    COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only
            -I${PROJECT_SOURCE_DIR}/include
            ${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/${name}.cpp)
  set_tests_properties(compile_fail_${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expected}" TIMEOUT 120
    COST 15)
endfunction()

bashexec_compile_fail(landlock_over_posix_spawner "use spawn_with<fork_exec>")
bashexec_compile_fail(same_kind_twice "may be picked at most once")
bashexec_compile_fail(not_a_policy "is not an output policy")
bashexec_compile_fail(spawn_without_handle "is not a spawn policy")
bashexec_compile_fail(spawn_settings_unconstructible "cannot construct its spawn policy")
