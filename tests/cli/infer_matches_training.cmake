# `kpipe run` for one step and `kpipe infer` over the same batch must report
# the same loss: both run the initial weights forward on the data of step 0.
function(run_kpipe command json)
  execute_process(COMMAND ${MPIEXEC} -n 2 ${KPIPE} ${command} ${DECK} train.steps=1 --json ${json}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "kpipe ${command} failed (${code}):\n${out}\n${err}")
  endif()
endfunction()

file(MAKE_DIRECTORY ${WORK_DIR})
run_kpipe(run ${WORK_DIR}/run.json)
run_kpipe(infer ${WORK_DIR}/infer.json)
file(READ ${WORK_DIR}/run.json run_json)
file(READ ${WORK_DIR}/infer.json infer_json)
string(JSON training_loss GET "${run_json}" losses 0)
string(JSON inference_loss GET "${infer_json}" mean_loss)
message("training step 0 loss ${training_loss}, inference loss ${inference_loss}")
if(NOT training_loss STREQUAL inference_loss)
  message(FATAL_ERROR "kpipe infer reports loss ${inference_loss}, training step 0 computed ${training_loss}")
endif()
