# cmake -P script behind the ctest test consumer_project: install the build tree into a fresh
# prefix, configure and build tests/consumer against it (find_package(tapegrad CONFIG)), run it.
# Variables: TAPEGRAD_BUILD_DIR, CONSUMER_SOURCE_DIR, WORK_DIR, CXX_COMPILER, LAUNCHER, BUILD_TYPE,
# CONSUMER_ARGS (extra configure arguments, `|`-separated, e.g. CMAKE_DISABLE_FIND_PACKAGE_MPI=ON),
# RUN_DIR (optional: the folder the app runs in, and the text its output must hold, PASS_OUTPUT).
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "consumer_project: `${cmd}` failed (${rc}):\n${out}")
  endif()
  message("${out}")
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
run(${CMAKE_COMMAND} --build ${TAPEGRAD_BUILD_DIR} --target tapegrad_libraries)
run(${CMAKE_COMMAND} --install ${TAPEGRAD_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
string(REPLACE "|" ";" consumer_args "${CONSUMER_ARGS}")
set(extra "")
foreach(a ${consumer_args})
  list(APPEND extra -D${a})
endforeach()
run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} ${launcher} ${extra})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
if(RUN_DIR)
  execute_process(COMMAND ${WORK_DIR}/build/app WORKING_DIRECTORY ${RUN_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  message("${out}")
  if(NOT rc EQUAL 0 OR (PASS_OUTPUT AND NOT out MATCHES "${PASS_OUTPUT}"))
    message(FATAL_ERROR "consumer_project: the app failed (${rc}) or its output lacks '${PASS_OUTPUT}'")
  endif()
else()
  run(${WORK_DIR}/build/app)
endif()
