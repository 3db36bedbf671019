# A kpipe run resolves its deck once (issue 22): it reads the deck file once,
# looks its schedule up once and partitions its model once, as the counters of
# its --json report show; with train.microbatch_size = "auto", which builds a
# pipeline for every size it measures, it still reads the deck file once.
#   cmake -DLOCAL_SH=<examples/jobs/local.sh> -DWORK_DIR=<dir> -P resolution.cmake   (from the repository root)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(resolution_of out)
  execute_process(COMMAND ${LOCAL_SH} run inputs/quickstart.toml train.steps=2 ${ARGN} --json ${WORK_DIR}/run.json
                  RESULT_VARIABLE code OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr TIMEOUT 240)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "kpipe run ${ARGN} failed (${code}): ${stdout}${stderr}")
  endif()
  file(READ ${WORK_DIR}/run.json run)
  string(JSON resolution GET "${run}" resolution)
  set(${out} "${resolution}" PARENT_SCOPE)
endfunction()

resolution_of(fixed)
foreach(count deck_files_read schedule_lookups partitions_computed)
  string(JSON n GET "${fixed}" ${count})
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "a kpipe run reported ${count} = ${n}; it resolves its deck once: ${fixed}")
  endif()
endforeach()

resolution_of(auto train.microbatch_size=auto)
string(JSON n GET "${auto}" deck_files_read)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "with train.microbatch_size = \"auto\" the deck file was read ${n} times: ${auto}")
endif()
message(STATUS "resolved once: ${fixed}; auto: ${auto}")
