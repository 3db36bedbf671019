# Packed documents end to end: the Genesis deck with each line a document
# (data.document_separator = 0, the newline, its lowest code point) trains
# and validates on 1 and on 2 pipeline ranks with bitwise the same training
# and validation losses — every rank draws its microbatches' documents — and
# with other losses than the same run without packing.
function(run_kpipe ranks json)
  execute_process(COMMAND ${MPIEXEC} -n ${ranks} ${KPIPE} run tests/data/lm/genesis.toml pipeline.stages=${ranks}
                          ${ARGN} --json ${json}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "kpipe run on ${ranks} ranks ${ARGN} failed (${code}):\n${out}\n${err}")
  endif()
endfunction()

function(losses_of json out)
  file(READ ${json} text)
  string(JSON training GET "${text}" losses)
  string(JSON validation GET "${text}" validation)
  set(${out} "training ${training}, validation ${validation}" PARENT_SCOPE)
endfunction()

file(MAKE_DIRECTORY ${WORK_DIR})
set(packed data.pack_documents=true data.document_separator=0)
run_kpipe(1 ${WORK_DIR}/one.json ${packed})
run_kpipe(2 ${WORK_DIR}/two.json ${packed})
run_kpipe(1 ${WORK_DIR}/unpacked.json)
losses_of(${WORK_DIR}/one.json one)
losses_of(${WORK_DIR}/two.json two)
losses_of(${WORK_DIR}/unpacked.json unpacked)
message("packed, 1 rank: ${one}\npacked, 2 ranks: ${two}\nunpacked: ${unpacked}")
if(NOT one STREQUAL two)
  message(FATAL_ERROR "packed documents train differently on 2 pipeline ranks than on 1")
endif()
if(one STREQUAL unpacked)
  message(FATAL_ERROR "packing the documents changed no loss")
endif()
