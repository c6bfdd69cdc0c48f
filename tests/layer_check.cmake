# The library's layers, and the proof that every include arrow points down.
#
# Each file under include/bashexec belongs to one layer (docs/architecture.md,
# "Layers", draws them). A file may include a file of a lower layer, or of its
# own layer — except that the back ends are siblings: spawn/, confinement/,
# output/, ownership/ and network/ never include one another (policies.hpp, one
# layer up, is where they meet). A file that no rule below places is an error
# too, so a new header is given its layer when it is added.
#   cmake -DINCLUDE_DIR=<repo>/include -P layer_check.cmake
# -DPLANT=<file>:<included> adds one arrow to the real ones, for the negative
# controls that prove the check can fail.
cmake_minimum_required(VERSION 3.20)

# Layers, lowest first: a name, then the patterns (regular expressions over the
# path below include/, whole-path match) of the files it holds. The root
# headers are split between two layers: the vocabulary (values with no system
# behind them) lies below the kernel wrappers, the concepts (plans, handles,
# policies' contracts) above them. Each root `impl/X.ipp` is in the layer of X.
set(layer_names
  linkage text vocabulary kernel trust concepts backends policies engine facade laws session tools remote server)
set(layer_linkage    "bashexec/detail/linkage\\.hpp")
set(layer_text       "bashexec/detail/text/.*")
set(root_vocabulary  "errors|ids|unique_fd|exit_facts|sandbox_mode|network_access|network_policy|containment|signal_name|run_progress|subscription|terminal|shell_state|version")
set(layer_vocabulary "bashexec/(impl/)?(${root_vocabulary})\\.(hpp|ipp)")
set(layer_kernel     "bashexec/detail/kernel/.*")
set(layer_trust      "bashexec/detail/trust/.*")
set(root_concepts    "config|executor|launch|process_handle|spill_directory|result|request|confinement|spawn|output|ownership|host_hardening|egress")
set(layer_concepts   "bashexec/(impl/)?(${root_concepts})\\.(hpp|ipp)")
set(backend_folders  spawn confinement output ownership network)
list(JOIN backend_folders "|" backend_alternatives)
set(layer_backends   "bashexec/(${backend_alternatives})/.*")
set(layer_policies   "bashexec/(policies|executor_traits)\\.hpp")
set(layer_engine     "bashexec/detail/engine/.*")
set(layer_facade     "bashexec/(basic_executor|local_executor|sandbox_executor|bashexec|src)\\.hpp|bashexec/impl/basic_executor\\.hpp")
set(layer_laws       "bashexec/laws/.*")
set(layer_session    "bashexec/session/.*")
set(layer_tools      "bashexec/tools/.*")
set(layer_remote     "bashexec/remote/.*|bashexec/remote_executor\\.hpp")
set(layer_server     "bashexec/server/.*")

# The layer of `path` (its index in layer_names) in `out`, -1 if none.
function(layer_of path out)
  set(index 0)
  foreach(name IN LISTS layer_names)
    if(path MATCHES "^(${layer_${name}})$")
      set(${out} ${index} PARENT_SCOPE)
      return()
    endif()
    math(EXPR index "${index} + 1")
  endforeach()
  set(${out} -1 PARENT_SCOPE)
endfunction()

# The back-end folder of `path` in `out`, empty if it is in none.
function(backend_of path out)
  if(path MATCHES "^bashexec/(${backend_alternatives})/")
    set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

get_filename_component(INCLUDE_DIR "${INCLUDE_DIR}" ABSOLUTE)
file(GLOB_RECURSE files RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/bashexec/*.hpp ${INCLUDE_DIR}/bashexec/*.ipp)
list(SORT files)
set(problems "")
set(arrows 0)
foreach(file IN LISTS files)
  layer_of(${file} from)
  if(from EQUAL -1)
    string(APPEND problems "  ${file}: in no layer (give it one in tests/layer_check.cmake)\n")
    continue()
  endif()
  list(GET layer_names ${from} from_name)
  backend_of(${file} from_backend)
  file(STRINGS ${INCLUDE_DIR}/${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]bashexec/")
  set(includes "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<](bashexec/[^\">]+)[\">].*" "\\1" included "${line}")
    list(APPEND includes ${included})
  endforeach()
  if(DEFINED PLANT AND PLANT MATCHES "^${file}:(.+)$")
    list(APPEND includes ${CMAKE_MATCH_1})
  endif()
  foreach(included IN LISTS includes)
    math(EXPR arrows "${arrows} + 1")
    layer_of(${included} to)
    backend_of(${included} to_backend)
    if(to EQUAL -1)
      string(APPEND problems "  ${file} -> ${included}: the included file is in no layer\n")
    elseif(to GREATER from)
      list(GET layer_names ${to} to_name)
      string(APPEND problems "  ${file} (${from_name}) -> ${included} (${to_name}): points up\n")
    elseif(to EQUAL from AND from_name STREQUAL "backends" AND NOT to_backend STREQUAL from_backend)
      string(APPEND problems
        "  ${file} -> ${included}: one back end includes another (${from_backend}/ -> ${to_backend}/)\n")
    endif()
  endforeach()
endforeach()

list(LENGTH files count)
list(LENGTH layer_names layer_count)
if(problems)
  message(FATAL_ERROR "include arrows that break the layers:\n${problems}")
endif()
message(STATUS "${count} files in ${layer_count} layers; all ${arrows} include arrows point down or sideways within a layer")
