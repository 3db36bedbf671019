# The example's losses and validation losses are bitwise those of `kpipe run`
# on the equivalent deck: the session API runs the executable's loop.
#   cmake -DEXAMPLE= -DKPIPE= -DMPIEXEC= -DDECK= -DWORK_DIR= -P matches.cmake
function(run_or_fail)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  if(NOT code EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${code}): ${command}\n${out}${err}")
  endif()
  message(STATUS "${out}")
endfunction()

# The array KEY of a JSON file as one line: nlohmann::json writes both files,
# so equal doubles are equal text.
function(json_array file key result)
  file(READ ${file} text)
  string(REGEX MATCH "\"${key}\": \\[[^]]*\\]" array "${text}")
  string(REGEX REPLACE "[ \n]" "" array "${array}")
  set(${result} "${array}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/example ${WORK_DIR}/run)
run_or_fail(${MPIEXEC} -n 2 ${EXAMPLE} ${WORK_DIR}/example)
run_or_fail(${MPIEXEC} -n 2 ${KPIPE} run ${DECK} checkpoint.path=${WORK_DIR}/run --json ${WORK_DIR}/run.json)
foreach(key losses validation)
  json_array(${WORK_DIR}/example/losses.json ${key} example)
  json_array(${WORK_DIR}/run.json ${key} run)
  if(example STREQUAL "" OR NOT example STREQUAL run)
    message(FATAL_ERROR "the example's ${key} are not kpipe run's:\n  example  ${example}\n  kpipe run ${run}")
  endif()
  message(STATUS "${key} bitwise kpipe run's: ${example}")
endforeach()
