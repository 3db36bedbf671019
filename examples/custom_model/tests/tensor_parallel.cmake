# The SwiGLU blocks split over t = 2 tensor ranks (4 ranks: p = 2, t = 2)
# train within 1e-5 of t = 1; kpipe plan predicts every rank's bytes per link
# exactly as the run measures them, and each rank's memory estimate is within
# 15% of its measured peak resident memory.
#   cmake -DEXE= -DDECK= -DMPIEXEC= -DCOMPARE= -DWORK_DIR= -P tensor_parallel.cmake
#
# With SGD: t = 2 sums in another order than t = 1, so the gradients differ
# in their last bits, and AdamW's first updates, about lr·sign(g), turn that
# into a step of up to 2·lr wherever a gradient is near zero (a SwiGLU gate's
# bias: 1e-3 relative after 4 steps, where SGD gives 3e-7).
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
set(sgd train.optimizer=sgd train.lr=0.05)
train(2 ${WORK_DIR}/t1 ${sgd})
train(4 ${WORK_DIR}/t2 ${sgd} pipeline.tensor_parallel=2 --json ${WORK_DIR}/run.json)
# The memory of training, without the checkpoint write's HDF5 and MPI-IO buffers (about 6 MiB a rank here).
train(4 ${WORK_DIR}/memory ${sgd} pipeline.tensor_parallel=2 checkpoint.every=0 --json ${WORK_DIR}/memory.json)
compare_weights(${WORK_DIR}/t1/step-4.h5 ${WORK_DIR}/t2/step-4.h5 "t = 2 against t = 1" 1e-5)

run_or_fail(${EXE} plan ${DECK} ${sgd} pipeline.tensor_parallel=2 --no-ascii --json ${WORK_DIR}/plan.json)
file(READ ${WORK_DIR}/plan.json plan)
file(READ ${WORK_DIR}/run.json run)
file(READ ${WORK_DIR}/memory.json memory)
string(JSON ranks LENGTH "${run}" ranks)
math(EXPR last "${ranks} - 1")
foreach(r RANGE ${last})
  string(JSON stage GET "${run}" ranks ${r} stage)
  foreach(link pipeline tensor data)
    string(JSON measured GET "${run}" ranks ${r} bytes_per_step ${link} measured)
    string(REGEX REPLACE "\\.0$" "" measured "${measured}")
    string(JSON predicted GET "${plan}" communication ranks ${stage} ${link} bytes)
    if(NOT measured EQUAL predicted)
      message(FATAL_ERROR "rank ${r} (stage ${stage}): ${measured} ${link} bytes per step measured, "
                          "${predicted} predicted by kpipe plan")
    endif()
  endforeach()
  string(JSON estimate GET "${memory}" ranks ${r} estimated_memory_mib)
  string(JSON measured GET "${memory}" ranks ${r} peak_resident_mib)
  # CMake has no floating point: compare in hundredths of a MiB.
  foreach(value estimate measured)
    string(REGEX MATCH "^([0-9]+)(\\.([0-9]*))?" _ "${${value}}")
    string(SUBSTRING "${CMAKE_MATCH_3}00" 0 2 cents)
    math(EXPR ${value}_cents "${CMAKE_MATCH_1} * 100 + ${cents}")
  endforeach()
  math(EXPR low "${measured_cents} * 85")
  math(EXPR high "${measured_cents} * 115")
  math(EXPR scaled "${estimate_cents} * 100")
  if(scaled LESS low OR scaled GREATER high)
    message(FATAL_ERROR "rank ${r}: the memory estimate ${estimate} MiB is not within 15% of the measured peak "
                        "resident ${measured} MiB")
  endif()
  message(STATUS "rank ${r}: bytes per link as planned; memory ${estimate} MiB estimated, ${measured} MiB peak")
endforeach()
