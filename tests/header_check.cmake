# Every header under include/bashexec compiles on its own (and twice in a row).
#
# One translation unit per header would parse the standard library and the
# library's lower headers again for each of the ~100 headers (about 200 s of
# CPU, a fifth of the build). Instead the headers are grouped into chains
# X1, X2, …, Xn in which each header includes the one before it (directly or
# through others), and one translation unit includes the chain in that
# order: whatever stands before Xi in that unit is something Xi includes
# itself, so Xi sees nothing it would not see alone, and every header of the
# chain is checked as if it had a unit of its own. The cost of a chain is
# about that of its last header. This holds because the library's headers
# include everything at their top and define no macro that changes a header
# they include; a header that broke either rule would need a unit of its own.
#
# The chains come from the headers' own `#include "bashexec/…"` lines,
# greedily: from the header with the most (transitive) library includes not
# yet in a chain, down through the one of its includes that has the most.
# Included from tests/CMakeLists.txt.

file(GLOB_RECURSE header_check_headers CONFIGURE_DEPENDS
  RELATIVE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/include/bashexec/*.hpp)
# src.hpp is the separately compiled mode's one translation unit, which
# bashexec::compiled builds; it refuses the header-only mode by design.
list(REMOVE_ITEM header_check_headers bashexec/src.hpp)

# The direct library includes of each header (`direct_<id>`).
foreach(header IN LISTS header_check_headers)
  string(MAKE_C_IDENTIFIER ${header} id)
  file(STRINGS ${PROJECT_SOURCE_DIR}/include/${header} lines REGEX "^#include [\"<]bashexec/")
  set(direct_${id} "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^#include [\"<](bashexec/[^\">]+)[\">].*" "\\1" included "${line}")
    list(APPEND direct_${id} ${included})
  endforeach()
endforeach()

# The transitive library includes of each header (`closure_<id>`), to a fixed point.
foreach(header IN LISTS header_check_headers)
  string(MAKE_C_IDENTIFIER ${header} id)
  set(closure_${id} ${direct_${id}})
endforeach()
set(changed TRUE)
while(changed)
  set(changed FALSE)
  foreach(header IN LISTS header_check_headers)
    string(MAKE_C_IDENTIFIER ${header} id)
    set(grown ${closure_${id}})
    foreach(included IN LISTS closure_${id})
      string(MAKE_C_IDENTIFIER ${included} included_id)
      list(APPEND grown ${closure_${included_id}})
    endforeach()
    list(REMOVE_DUPLICATES grown)
    list(LENGTH grown after)
    list(LENGTH closure_${id} before)
    if(NOT after EQUAL before)
      set(closure_${id} ${grown})
      set(changed TRUE)
    endif()
  endforeach()
endwhile()

# Returns, in `out`, the header of `candidates` with the largest closure
# (the first such in list order: the result does not depend on the run).
function(header_check_largest candidates out)
  set(best "")
  set(best_size -1)
  foreach(candidate IN LISTS candidates)
    string(MAKE_C_IDENTIFIER ${candidate} id)
    list(LENGTH closure_${id} size)
    if(size GREATER best_size)
      set(best ${candidate})
      set(best_size ${size})
    endif()
  endforeach()
  set(${out} ${best} PARENT_SCOPE)
endfunction()

set(unassigned ${header_check_headers})
set(header_check_sources "")
set(chain_number 0)
while(unassigned)
  header_check_largest("${unassigned}" top)
  set(chain ${top})
  list(REMOVE_ITEM unassigned ${top})
  set(current ${top})
  while(TRUE)
    string(MAKE_C_IDENTIFIER ${current} id)
    set(candidates "")
    foreach(included IN LISTS closure_${id})
      if(included IN_LIST unassigned)
        list(APPEND candidates ${included})
      endif()
    endforeach()
    if(NOT candidates)
      break()
    endif()
    header_check_largest("${candidates}" next)
    list(PREPEND chain ${next})  # included before the header that includes it
    list(REMOVE_ITEM unassigned ${next})
    set(current ${next})
  endwhile()
  set(content "// Header self-containment, one chain: each header includes the one before it.\n")
  foreach(header IN LISTS chain)
    string(APPEND content "#include <${header}>\n")
  endforeach()
  foreach(header IN LISTS chain)
    string(APPEND content "#include <${header}>  // again: include guard\n")
  endforeach()
  math(EXPR chain_number "${chain_number} + 1")
  set(check ${CMAKE_CURRENT_BINARY_DIR}/header_check/chain_${chain_number}.cpp)
  file(CONFIGURE OUTPUT ${check} CONTENT "${content}")
  list(APPEND header_check_sources ${check})
endwhile()

add_library(bashexec_header_check OBJECT ${header_check_sources})
target_link_libraries(bashexec_header_check PRIVATE bashexec_tools)
target_compile_options(bashexec_header_check PRIVATE ${BASHEXEC_WARNINGS})
add_test(NAME header_self_containment
  COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target bashexec_header_check)

# The same chains in the separately compiled mode, where a header without its
# impl/*.ipp must still carry every include its declarations need.
if(TARGET bashexec_compiled)
  add_library(bashexec_header_check_compiled OBJECT ${header_check_sources})
  target_link_libraries(bashexec_header_check_compiled PRIVATE bashexec_tools)
  target_compile_definitions(bashexec_header_check_compiled PRIVATE BASHEXEC_SEPARATE_COMPILATION)
  target_compile_options(bashexec_header_check_compiled PRIVATE ${BASHEXEC_WARNINGS})
  add_test(NAME header_self_containment_compiled
    COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target bashexec_header_check_compiled)
endif()

# Every impl/*.ipp is compiled by bashexec::compiled: src.hpp lists each one.
add_test(NAME separate_compilation_lists_every_ipp
  COMMAND ${CMAKE_COMMAND} -DINCLUDE_DIR=${PROJECT_SOURCE_DIR}/include
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_src_lists_ipp.cmake)

# Every include arrow points down the layers (docs/architecture.md, "Layers");
# the controls plant one arrow that breaks each rule and must fail.
add_test(NAME layers_include_downward
  COMMAND ${CMAKE_COMMAND} -DINCLUDE_DIR=${PROJECT_SOURCE_DIR}/include -P ${CMAKE_CURRENT_SOURCE_DIR}/layer_check.cmake)
# Each control passes on its own report only.
set(layer_control_upward "bashexec/detail/kernel/user_namespace.hpp:bashexec/spawn/detail/fork_exec_child.hpp")
set(layer_report_upward "fork_exec_child.hpp \\(backends\\): points up")
set(layer_control_sibling "bashexec/confinement/landlock.hpp:bashexec/spawn/fork_exec.hpp")
set(layer_report_sibling "one back end includes another \\(confinement/ -> spawn/\\)")
set(layer_control_unplaced "bashexec/detail/text/c_strings.hpp:bashexec/detail/stray.hpp")
set(layer_report_unplaced "stray.hpp: the included file is in no layer")
foreach(control upward sibling unplaced)
  add_test(NAME layers_control_${control}_arrow_fails
    COMMAND ${CMAKE_COMMAND} -DINCLUDE_DIR=${PROJECT_SOURCE_DIR}/include -DPLANT=${layer_control_${control}}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/layer_check.cmake)
  set_tests_properties(layers_control_${control}_arrow_fails PROPERTIES
    PASS_REGULAR_EXPRESSION "${layer_report_${control}}")
endforeach()
