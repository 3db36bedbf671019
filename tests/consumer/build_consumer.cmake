# Script behind the consumer tests: install kpipe into a scratch prefix, build
# PROJECT_DIR against it with find_package(kpipe), then run its `consumer`
# executable, or with -DRUN_CTEST=ON its own tests.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "command failed (${code}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

if(NOT KOKKOS_DIR)
  message(FATAL_ERROR "build_consumer.cmake needs -DKOKKOS_DIR=<the Kokkos_DIR kpipe was built with>")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${KPIPE_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
# The installed headers are the public API: a module's detail/ stays home.
file(GLOB_RECURSE installed_details LIST_DIRECTORIES true ${WORK_DIR}/prefix/include/kpipe/*)
list(FILTER installed_details INCLUDE REGEX "/detail(/|$)")
if(installed_details)
  message(FATAL_ERROR "internal headers were installed: ${installed_details}")
endif()
run(${CMAKE_COMMAND} -S ${PROJECT_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
# The consumer found the Kokkos kpipe was built with (its package config pins it).
file(STRINGS ${WORK_DIR}/build/CMakeCache.txt consumer_kokkos REGEX "^Kokkos_DIR:")
string(REGEX REPLACE "^Kokkos_DIR:[A-Z]*=" "" consumer_kokkos "${consumer_kokkos}")
get_filename_component(consumer_kokkos "${consumer_kokkos}" REALPATH)
get_filename_component(kpipe_kokkos "${KOKKOS_DIR}" REALPATH)
if(NOT consumer_kokkos STREQUAL kpipe_kokkos)
  message(FATAL_ERROR "the consumer found the Kokkos in '${consumer_kokkos}', kpipe was built with '${kpipe_kokkos}'")
endif()
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
if(RUN_CTEST)
  run(${CMAKE_CTEST_COMMAND} --test-dir ${WORK_DIR}/build --output-on-failure -V)
else()
  run(${WORK_DIR}/build/consumer)
endif()
message("${last_output}")
