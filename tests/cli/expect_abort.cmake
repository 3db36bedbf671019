# Runs COMMAND (a ;-list) and checks that it fails within its timeout with a
# non-zero exit code and EXPECT on stderr: a job that must end, not hang.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(code EQUAL 0 OR code MATCHES "timeout")
  message(FATAL_ERROR "expected the job to fail, got '${code}'\nstderr: ${err}\nstdout: ${out}")
endif()
string(FIND "${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "stderr lacks the expected text\n  expected: ${EXPECT}\n  got: ${err}")
endif()
message("exit code ${code}; stderr: ${err}")
