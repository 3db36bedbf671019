# The project's `swiglu_mlp` model family: its own key is a deck key like
# kpipe's (documented by `deck --doc`, range-checked, split by t), and its
# block read under another family is one line and exit code 2. (Training
# it is custom_model_bitwise: the deck is this family's.)
#   cmake -DEXE= -DDECK= -P family.cmake
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
execute_process(COMMAND ${EXE} deck --doc RESULT_VARIABLE code OUTPUT_VARIABLE doc ERROR_VARIABLE err)
foreach(expected "| `model.swiglu_hidden` | an integer | `128` | >= 1"
                 "swiglu_mlp, a residual MLP of SwiGLU blocks")
  string(FIND "${doc}" "${expected}" at)
  if(NOT code EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "deck --doc (exit ${code}) lacks '${expected}':\n${doc}${err}")
  endif()
endforeach()
expect_input_error("model.swiglu_hidden = 0 is out of range: must be >= 1"
                   ${EXE} deck ${DECK} model.swiglu_hidden=0)
expect_input_error("does not divide model.swiglu_hidden = 127"
                   ${EXE} deck ${DECK} pipeline.tensor_parallel=2 model.swiglu_hidden=127)
expect_input_error("model.swiglu_hidden is not a key of model.kind = \"residual_mlp\""
                   ${EXE} plan ${DECK} model.kind=residual_mlp model.block=swiglu_block)
