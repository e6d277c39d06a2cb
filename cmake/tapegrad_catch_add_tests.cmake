# Run after a Catch2 test executable is linked (cmake -DPARAMS=<file> -P this file): lists its
# test cases (--list-test-names-only) and writes the ctest file registering one test per case.
# PARAMS sets TEST_EXECUTABLE, TEST_WORKING_DIR, TEST_LABELS and CTEST_FILE.
#
# A name is never put in a CMake list (a `;` in it would split it) and reaches Catch2 whole:
# the filter is the name in double quotes, with `\`, `"` and `,` escaped by a backslash and a
# leading blank (Catch2's TestSpecParser reads a quoted name literally up to the closing quote,
# except for the backslash escape and the `,` filter separator; the blank, which Catch2 trims
# before comparing, keeps a name starting with "exclude:" from being read as an exclusion).
# --warn NoTests makes an entry whose filter matches no test case exit non-zero. Every entry
# runs with TAPEGRAD_MODE_CHECKS=throw (core/mode_checks.h): a mode check that fires on a
# test's deliberate use fails the test, so no check gives a false positive on the tests.
cmake_minimum_required(VERSION 3.20)  # policies of script mode (while() conditions)
include(${PARAMS})

# out = value as a CMake bracket argument whose closing bracket does not occur in value
function(_tapegrad_bracket out value)
  set(eq "=")
  while(TRUE)
    string(FIND "${value}" "]${eq}]" hit)
    if(hit EQUAL -1)
      break()
    endif()
    string(APPEND eq "=")
  endwhile()
  set(${out} "[${eq}[${value}]${eq}]" PARENT_SCOPE)
endfunction()

if(NOT EXISTS "${TEST_EXECUTABLE}")
  message(FATAL_ERROR "catch test discovery: '${TEST_EXECUTABLE}' does not exist")
endif()
execute_process(COMMAND "${TEST_EXECUTABLE}" --list-test-names-only
                OUTPUT_VARIABLE output RESULT_VARIABLE result WORKING_DIRECTORY "${TEST_WORKING_DIR}")
# Catch2 exits with the number of test cases listed (at most 255); a crash gives a text
if(NOT result MATCHES "^[0-9]+$")
  message(FATAL_ERROR "catch test discovery: '${TEST_EXECUTABLE} --list-test-names-only' failed (${result}):\n"
                      "${output}")
endif()

_tapegrad_bracket(exe_arg "${TEST_EXECUTABLE}")
_tapegrad_bracket(dir_arg "${TEST_WORKING_DIR}")
_tapegrad_bracket(labels_arg "${TEST_LABELS}")
set(script "")
set(count 0)
while(NOT output STREQUAL "")
  string(FIND "${output}" "\n" eol)
  if(eol EQUAL -1)
    set(name "${output}")
    set(output "")
  else()
    string(SUBSTRING "${output}" 0 ${eol} name)
    math(EXPR eol "${eol} + 1")
    string(SUBSTRING "${output}" ${eol} -1 output)
  endif()
  if(name STREQUAL "")
    continue()
  endif()
  # Catch2 prints a name that starts with '#' in double quotes
  if(name MATCHES "^\"#.*\"$")
    string(LENGTH "${name}" len)
    math(EXPR len "${len} - 2")
    string(SUBSTRING "${name}" 1 ${len} name)
  endif()
  string(REPLACE "\\" "\\\\" spec "${name}")
  string(REPLACE "\"" "\\\"" spec "${spec}")
  string(REPLACE "," "\\," spec "${spec}")
  _tapegrad_bracket(name_arg "${name}")
  _tapegrad_bracket(spec_arg "\" ${spec}\"")
  string(APPEND script "add_test(${name_arg} ${exe_arg} ${spec_arg} --warn NoTests)\n"
                       "set_tests_properties(${name_arg} PROPERTIES WORKING_DIRECTORY ${dir_arg} LABELS ${labels_arg}"
                       " ENVIRONMENT TAPEGRAD_MODE_CHECKS=throw)\n")
  math(EXPR count "${count} + 1")
endwhile()
if(count EQUAL 0)
  message(FATAL_ERROR "catch test discovery: '${TEST_EXECUTABLE}' lists no test case")
endif()
file(WRITE "${CTEST_FILE}" "${script}")
