# Pipelined training of the SwiGLU model on 2 ranks, with kpipe's 1F1B and
# ZB-H1 and the project's 1f1b-reserve, gives bitwise the weights of the same
# model trained on one stage (the sequential order of accumulation).
#   cmake -DEXE= -DDECK= -DMPIEXEC= -DCOMPARE= -DWORK_DIR= -P bitwise.cmake
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
train(1 ${WORK_DIR}/one-stage pipeline.stages=1 pipeline.schedule=1f1b)
foreach(schedule 1f1b zb-h1 1f1b-reserve)
  train(2 ${WORK_DIR}/${schedule} pipeline.schedule=${schedule})
  compare_weights(${WORK_DIR}/one-stage/step-4.h5 ${WORK_DIR}/${schedule}/step-4.h5 "${schedule} on 2 ranks")
endforeach()
