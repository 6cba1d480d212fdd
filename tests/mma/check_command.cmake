# Runs COMMAND (a ;-list), then checks its exit status (EXPECT_RC), that its output matches
# every regular expression in EXPECT (a ;-list) and, with EXPECT_FILE, that its standard output
# is that file's text (a committed canonical output). Used for CLI tests.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT rc EQUAL EXPECT_RC)
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT_RC}; output:\n${all}")
endif()
foreach(pattern IN LISTS EXPECT)
  if(NOT all MATCHES "${pattern}")
    message(FATAL_ERROR "output does not match '${pattern}':\n${all}")
  endif()
endforeach()
if(DEFINED EXPECT_FILE)
  file(READ "${EXPECT_FILE}" expected)
  if(NOT out STREQUAL expected)
    get_filename_component(name "${EXPECT_FILE}" NAME)
    set(actual "${CMAKE_CURRENT_BINARY_DIR}/${name}.actual")  # the test's working directory (the build tree)
    file(WRITE "${actual}" "${out}")
    message(FATAL_ERROR "standard output differs from ${EXPECT_FILE} (written to ${actual}; diff them, and "
                        "regenerate the file only when the change is meant)")
  endif()
endif()
