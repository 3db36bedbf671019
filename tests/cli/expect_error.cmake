# Runs kpipe with ARGS (a ;-list) and checks the bad-input contract: exit code
# 2 and exactly one line on stderr, "kpipe: error: ...", containing EXPECT.
execute_process(COMMAND ${KPIPE} ${ARGS}
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
string(STRIP "${err}" err)
if(NOT code STREQUAL "2")
  message(FATAL_ERROR "expected exit code 2, got '${code}'\nstderr: ${err}\nstdout: ${out}")
endif()
if(err MATCHES "\n")
  message(FATAL_ERROR "expected one line on stderr, got:\n${err}")
endif()
if(NOT err MATCHES "^kpipe: error: ")
  message(FATAL_ERROR "stderr does not start with 'kpipe: error: ':\n${err}")
endif()
string(FIND "${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "stderr lacks the expected text\n  expected: ${EXPECT}\n  got:      ${err}")
endif()
