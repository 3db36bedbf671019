# The project's `csv` data source: 2 ranks with 1F1B and ZB-H1 train bitwise
# the weights of one stage on it; a misspelled source name, a missing
# data.path and a malformed line are each one line and exit code 2.
#   cmake -DEXE= -DDECK= -DMPIEXEC= -DCOMPARE= -DWORK_DIR= -DDATA= -P csv.cmake
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
train(1 ${WORK_DIR}/one-stage data.path=${DATA} pipeline.stages=1)
foreach(schedule 1f1b zb-h1)
  train(2 ${WORK_DIR}/${schedule} data.path=${DATA} pipeline.schedule=${schedule})
  compare_weights(${WORK_DIR}/one-stage/step-6.h5 ${WORK_DIR}/${schedule}/step-6.h5 "${schedule} on 2 ranks")
endforeach()

expect_input_error("did you mean \"csv\"" ${EXE} deck ${DECK} data.source=cvs)
expect_input_error("reads its samples from data.path, which is empty; set data.path to the CSV file"
                   ${EXE} deck ${DECK} data.path=)
expect_input_error("bad.csv:3: column 4 is not a number"
                   ${EXE} run ${DECK} data.path=${CMAKE_CURRENT_LIST_DIR}/bad.csv pipeline.stages=1
                   checkpoint.every=0)
