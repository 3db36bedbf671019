# Every C++ source is formatted as .clang-format says (clang-format from
# Debian 12, installed by scripts/install-deps.sh).
# Usage: cmake -DROOT=<source tree> -DCLANG_FORMAT=<executable> -P format.cmake
file(GLOB_RECURSE sources
     "${ROOT}/src/*.cpp" "${ROOT}/src/*.hpp" "${ROOT}/include/*.hpp" "${ROOT}/tests/*.cpp" "${ROOT}/tests/*.hpp"
     "${ROOT}/benchmarks/*.cpp" "${ROOT}/examples/*.cpp")
list(FILTER sources EXCLUDE REGEX "/tests/support/catch\\.hpp$|/tests/architecture/violations/")
execute_process(COMMAND ${CLANG_FORMAT} --dry-run --Werror ${sources} RESULT_VARIABLE code ERROR_VARIABLE err)
if(NOT code EQUAL 0)
  string(REGEX MATCHALL "[^\n]*: error: [^\n]*" problems "${err}")
  list(LENGTH problems count)
  list(SUBLIST problems 0 10 first)
  string(REPLACE ";" "\n  " listing "${first}")
  message(FATAL_ERROR "${count} formatting difference(s); run clang-format -i on them:\n  ${listing}")
endif()
list(LENGTH sources count)
message(STATUS "format: ${count} files as .clang-format says")
