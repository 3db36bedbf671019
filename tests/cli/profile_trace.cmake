# `kpipe run --profile` on 2 ranks, then `kpipe trace`: the profile is HDF5
# that h5dump reads, marked as a kpipe profile, and the Chrome trace is JSON
# with exactly one complete event per executed action, i.e. steps × the
# actions of one step summed over the ranks (counted by `kpipe plan`). The SVG
# draws the measured step above its simulation. Usage:
#   cmake -DKPIPE=... -DMPIEXEC=... -DH5DUMP=... -DWORK_DIR=... [-DPYTHON=...] -P profile_trace.cmake
set(deck inputs/quickstart.toml)
set(steps 3)
set(shape train.global_batch=64 train.steps=${steps})

function(kpipe)
  cmake_parse_arguments(ARG "" "EXPECT_CODE;OUTPUT" "COMMAND" ${ARGN})
  execute_process(COMMAND ${ARG_COMMAND} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  if(NOT DEFINED ARG_EXPECT_CODE)
    set(ARG_EXPECT_CODE 0)
  endif()
  if(NOT code EQUAL ARG_EXPECT_CODE)
    message(FATAL_ERROR "'${ARG_COMMAND}' exited with ${code}, expected ${ARG_EXPECT_CODE}:\n${out}\n${err}")
  endif()
  if(ARG_OUTPUT)
    set(${ARG_OUTPUT} "${out}${err}" PARENT_SCOPE)
  endif()
endfunction()

function(require text what)
  string(FIND "${text}" "${what}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${what}' in:\n${text}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(profile ${WORK_DIR}/run.h5)
kpipe(COMMAND ${MPIEXEC} -n 2 ${KPIPE} run ${deck} ${shape} --profile ${profile})
kpipe(COMMAND ${KPIPE} plan ${deck} ${shape} --json ${WORK_DIR}/plan.json --no-ascii)
kpipe(COMMAND ${KPIPE} trace ${profile} --json ${WORK_DIR}/trace.json --svg ${WORK_DIR}/trace.svg OUTPUT out)
require("${out}" "step 2 measured: makespan")

# h5dump reads the file; the root attributes say what it is.
kpipe(COMMAND ${H5DUMP} -H ${profile} OUTPUT header)
require("${header}" "GROUP \"measured\"")
require("${header}" "DATASET \"start\"")
kpipe(COMMAND ${H5DUMP} -a /format ${profile} OUTPUT format)
require("${format}" "\"kpipe-profile\"")

# One complete event per executed action, every event of the JSON counted.
file(READ ${WORK_DIR}/plan.json plan_json)
string(JSON actions_per_step GET "${plan_json}" actions)
math(EXPR expected "${steps} * ${actions_per_step}")
file(READ ${WORK_DIR}/trace.json trace_json)
string(JSON events LENGTH "${trace_json}" traceEvents)
string(REGEX MATCHALL "\"ph\":\"X\"" complete "${trace_json}")
string(REGEX MATCHALL "\"ph\":\"M\"" metadata "${trace_json}")
list(LENGTH complete complete_count)
list(LENGTH metadata metadata_count)
math(EXPR parsed_complete "${events} - ${metadata_count}")
message("trace: ${complete_count} complete events (${parsed_complete} parsed), expected ${steps} steps x ${actions_per_step} actions = ${expected}")
if(NOT complete_count EQUAL expected OR NOT parsed_complete EQUAL expected)
  message(FATAL_ERROR "the trace has ${complete_count} complete events (${parsed_complete} parsed); expected ${expected}")
endif()
string(JSON first_name GET "${trace_json}" traceEvents 2 name)
string(JSON first_pid GET "${trace_json}" traceEvents 2 pid)
message("first event: ${first_name} on pid ${first_pid}")
if(NOT first_name MATCHES "^(F|RECV_ACT) mb=0 chunk=0" OR NOT first_pid EQUAL 0)
  message(FATAL_ERROR "the first event of rank 0 is '${first_name}' on pid ${first_pid}")
endif()

file(READ ${WORK_DIR}/trace.svg svg)
require("${svg}" "measured, step 2 of 3: makespan")
require("${svg}" "simulated with the measured per-stage costs: makespan")

# Where Debian's h5py is present, it reads the tables as documented.
if(PYTHON)
  execute_process(COMMAND ${PYTHON} -c "import h5py" RESULT_VARIABLE no_h5py OUTPUT_QUIET ERROR_QUIET)
  if(no_h5py EQUAL 0)
    kpipe(COMMAND ${PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_profile.py ${profile} ${WORK_DIR}/trace.json ${expected}
          OUTPUT checked)
    message("${checked}")
  endif()
endif()

# kpipe infer profiles a forward-only schedule, whose B and W are never measured.
kpipe(COMMAND ${MPIEXEC} -n 2 ${KPIPE} infer inputs/forward.toml train.steps=2 --profile ${WORK_DIR}/infer.h5)
kpipe(COMMAND ${KPIPE} trace ${WORK_DIR}/infer.h5 --svg ${WORK_DIR}/infer.svg OUTPUT out)
require("${out}" "simulated with the measured costs: makespan")

# Bad uses of a good profile: a step it does not hold, an output over the input.
kpipe(COMMAND ${KPIPE} trace ${profile} --step 3 EXPECT_CODE 2 OUTPUT out)
require("${out}" "kpipe: error: --step 3: the profile holds steps 0 to 2")
kpipe(COMMAND ${KPIPE} trace ${profile} --svg ${profile} EXPECT_CODE 2 OUTPUT out)
require("${out}" "it is the input")
