# What the example's checks share: run a command or fail with its output.
function(run_or_fail)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  if(NOT code EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${code}): ${command}\n${out}${err}")
  endif()
endfunction()

# Trains DECK with OVERRIDES on RANKS ranks; the weights land in DIR/step-<steps>.h5.
function(train ranks dir)
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir})
  run_or_fail(${MPIEXEC} -n ${ranks} ${EXE} run ${DECK} checkpoint.path=${dir} ${ARGN})
endfunction()

# Fails unless the weights of two checkpoints agree: bitwise, or within an
# relative tolerance when one is given (compare_weights).
function(compare_weights a b what)
  execute_process(COMMAND ${COMPARE} ${a} ${b} ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${what}: the weights differ: ${out}${err}")
  endif()
  message(STATUS "${what}: ${out}")
endfunction()

# Runs ARGN and fails unless it exits with 2 printing `expected`.
function(expect_input_error expected)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(FIND "${out}${err}" "${expected}" at)
  if(NOT code EQUAL 2 OR at EQUAL -1)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "${command}: exit ${code}, expected 2 and '${expected}':\n${out}${err}")
  endif()
endfunction()
