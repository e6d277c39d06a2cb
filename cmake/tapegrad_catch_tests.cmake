# Registering Catch2 test executables with ctest (docs/internals.md, "Testing").
#
# tapegrad_catch_discover_tests(<target> [WORKING_DIRECTORY dir] [LABELS label...])
#   One ctest test per test case of <target>, named as the case, found after each link by
#   cmake/tapegrad_catch_add_tests.cmake: every name is passed to Catch2 whole (any character),
#   and an entry whose filter matches no test case fails (--warn NoTests). Each runs with
#   TAPEGRAD_MODE_CHECKS=throw (a deliberate train-mode forward goes in a ModeChecksPause). Hidden test cases
#   ([.] tags) are not registered; give them their own add_test.
# tapegrad_catch_executable(<target>)
#   Declares a Catch2 executable whose ctest tests are written by hand (add_test with tag
#   filters, mpirun): pass --warn NoTests before the filters in each of them.
#
# Both put <target> on the list that the test catch_registration checks (after every
# directory is configured): each test case that <target> lists is run by exactly one ctest
# entry of its own (discovered executables) or by some entry (hand-written ones), and every
# entry runs at least one (cmake/check_catch_registration.py). Label ctest.
set(TAPEGRAD_CATCH_ADD_TESTS_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/tapegrad_catch_add_tests.cmake)
set(TAPEGRAD_CATCH_CHECK_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/check_catch_registration.py)

function(tapegrad_catch_executable target)
  get_property(_seen GLOBAL PROPERTY TAPEGRAD_CATCH_EXECUTABLES)
  if(NOT _seen)
    # the check is added once, when the top directory has been configured whole
    cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _tapegrad_catch_registration_check)
  endif()
  set_property(GLOBAL APPEND PROPERTY TAPEGRAD_CATCH_EXECUTABLES ${target})
endfunction()

function(tapegrad_catch_discover_tests target)
  cmake_parse_arguments(_arg "" "WORKING_DIRECTORY" "LABELS" ${ARGN})
  if(NOT _arg_WORKING_DIRECTORY)
    set(_arg_WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  set(_base ${CMAKE_CURRENT_BINARY_DIR}/${target})
  file(GENERATE OUTPUT ${_base}_catch_params.cmake CONTENT
"set(TEST_EXECUTABLE [==[$<TARGET_FILE:${target}>]==])
set(TEST_WORKING_DIR [==[${_arg_WORKING_DIRECTORY}]==])
set(TEST_LABELS [==[${_arg_LABELS}]==])
set(CTEST_FILE [==[${_base}_catch_tests.cmake]==])
")
  add_custom_command(TARGET ${target} POST_BUILD BYPRODUCTS ${_base}_catch_tests.cmake
                     COMMAND ${CMAKE_COMMAND} -DPARAMS=${_base}_catch_params.cmake -P ${TAPEGRAD_CATCH_ADD_TESTS_SCRIPT}
                     VERBATIM)
  # a changed discovery script relinks the executable, so its tests are discovered anew
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${TAPEGRAD_CATCH_ADD_TESTS_SCRIPT})
  file(WRITE ${_base}_catch_include.cmake
"if(EXISTS [==[${_base}_catch_tests.cmake]==])
  include([==[${_base}_catch_tests.cmake]==])
else()
  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_base}_catch_include.cmake)
  tapegrad_catch_executable(${target})
endfunction()

function(_tapegrad_catch_registration_check)
  get_property(_targets GLOBAL PROPERTY TAPEGRAD_CATCH_EXECUTABLES)
  set(_files "")
  foreach(t ${_targets})
    string(APPEND _files "$<TARGET_FILE:${t}>\n")
  endforeach()
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/catch_executables.txt CONTENT "${_files}")
  find_package(Python3 COMPONENTS Interpreter)
  if(NOT Python3_Interpreter_FOUND)
    message(WARNING "tapegrad: no python3, so the ctest entry catch_registration is not added")
    return()
  endif()
  add_test(NAME catch_registration
           COMMAND ${Python3_EXECUTABLE} ${TAPEGRAD_CATCH_CHECK_SCRIPT} ${CMAKE_CTEST_COMMAND}
                   ${PROJECT_BINARY_DIR} ${PROJECT_BINARY_DIR}/catch_executables.txt)
  set_tests_properties(catch_registration PROPERTIES LABELS ctest TIMEOUT 600)
endfunction()
