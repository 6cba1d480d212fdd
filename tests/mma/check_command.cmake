# Runs COMMAND (a ;-list), then checks its exit status (EXPECT_RC) and that its output matches
# every regular expression in EXPECT (a ;-list). Used for CLI tests that check both.
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
