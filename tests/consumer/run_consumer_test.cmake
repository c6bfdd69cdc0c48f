# Installs the bashexec build tree to a fresh prefix, then configures, builds
# and runs tests/consumer against it with find_package(bashexec).
#   cmake -DBUILD_DIR=<bashexec build> -DSOURCE_DIR=<tests/consumer>
#         -DWORK_DIR=<scratch> [-DCXX_COMPILER=<c++>]
#         [-DEXTENDING_DIR=<docs/examples/extending>] -P run_consumer_test.cmake
# With EXTENDING_DIR, the example policies of docs/extending.md are built the
# same way and their laws check is run too.
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer_test.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/include/bashexec/local_executor.hpp)
  message(FATAL_ERROR "the install did not put the headers under ${prefix}/include")
endif()

set(compiler_arg)
if(CXX_COMPILER)
  set(compiler_arg -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
endif()
set(extending_arg)
if(EXTENDING_DIR)
  set(extending_arg -DBASHEXEC_EXTENDING_DIR=${EXTENDING_DIR})
endif()
step(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${consumer_build} -DCMAKE_PREFIX_PATH=${prefix} ${compiler_arg}
     ${extending_arg})
step(${CMAKE_COMMAND} --build ${consumer_build} -j2)
step(${consumer_build}/app)
step(${consumer_build}/app_compiled)
if(EXTENDING_DIR)
  step(${consumer_build}/extending)
  step(${consumer_build}/extending_compiled)
endif()
