# Output files never clobber what kpipe did not create (issue 9): an existing
# "<name>.tmp" file or directory survives a write of <name>, no temporary is
# left behind, and an existing output is replaced whole.
#   cmake -DKPIPE=<kpipe> -DWORK_DIR=<dir> -P output_files.cmake  (from the repository root)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/plan.json.tmp)
file(WRITE ${WORK_DIR}/trace.json.tmp "someone else's file\n")
file(WRITE ${WORK_DIR}/plan.json "an older plan\n")

foreach(round 1 2)
  execute_process(COMMAND ${KPIPE} plan inputs/quickstart.toml --no-ascii --json ${WORK_DIR}/plan.json
                          --trace ${WORK_DIR}/trace.json
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "kpipe plan failed (${code}): ${err}")
  endif()
endforeach()

if(NOT IS_DIRECTORY ${WORK_DIR}/plan.json.tmp)
  message(FATAL_ERROR "the directory plan.json.tmp, not kpipe's, was removed")
endif()
file(READ ${WORK_DIR}/trace.json.tmp kept)
if(NOT kept STREQUAL "someone else's file\n")
  message(FATAL_ERROR "trace.json.tmp, not kpipe's, was overwritten: ${kept}")
endif()
file(READ ${WORK_DIR}/plan.json plan)
if(NOT plan MATCHES "^{.*\"makespan\"")
  message(FATAL_ERROR "plan.json does not hold the plan summary: ${plan}")
endif()
file(GLOB leftovers ${WORK_DIR}/.*)
if(leftovers)
  message(FATAL_ERROR "temporary files left behind: ${leftovers}")
endif()
