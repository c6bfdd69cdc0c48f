# Fails unless <bashexec/src.hpp> includes every impl/*.ipp under
# include/bashexec, and nothing that is not there: an unlisted file's bodies
# would be missing from bashexec::compiled and show up only as a link error
# in whichever program first calls them.
#   cmake -DINCLUDE_DIR=<repo>/include -P check_src_lists_ipp.cmake
cmake_minimum_required(VERSION 3.20)  # IN_LIST (policy CMP0057) in script mode
file(GLOB_RECURSE ipps RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/bashexec/*.ipp)
file(STRINGS ${INCLUDE_DIR}/bashexec/src.hpp listed REGEX "^#include \"bashexec/.*\\.ipp\"")
list(TRANSFORM listed REPLACE "^#include \"([^\"]+)\".*" "\\1")
set(problems "")
foreach(ipp IN LISTS ipps)
  if(NOT ipp IN_LIST listed)
    string(APPEND problems "  not in src.hpp: ${ipp}\n")
  endif()
endforeach()
foreach(entry IN LISTS listed)
  if(NOT entry IN_LIST ipps)
    string(APPEND problems "  listed but missing: ${entry}\n")
  endif()
endforeach()
list(LENGTH ipps count)
if(problems)
  message(FATAL_ERROR "src.hpp and the impl/*.ipp files disagree:\n${problems}")
endif()
message(STATUS "src.hpp lists all ${count} impl/*.ipp files")
