# Every shell script parses (bash -n) and passes shellcheck (Debian's, from
# scripts/install-deps.sh). The scripts are found when the test runs, so a new
# one is covered without touching CMake: every *.sh, and every file whose first
# line is a sh/bash shebang (Slurm *.sbatch jobs, .ci/run), under examples/,
# scripts/ and .ci/, and every *.sh under tests/.
# Usage: cmake -DROOT=<source tree> [-DSHELLCHECK=<executable>] -P check_scripts.cmake
# Run from ROOT: shellcheck -x follows `source scripts/...` from there.
# Fails naming each script that fails; without shellcheck, only bash -n runs
# and the output says "shellcheck skipped" (the test is then reported skipped).
if(NOT ROOT)
  message(FATAL_ERROR "check_scripts.cmake needs -DROOT=<source tree>")
endif()

file(GLOB_RECURSE candidates LIST_DIRECTORIES false
     "${ROOT}/examples/*" "${ROOT}/scripts/*" "${ROOT}/.ci/*" "${ROOT}/tests/*.sh")
set(scripts "")
foreach(file IN LISTS candidates)
  if(file MATCHES "/tests/cli/script_violations/" AND NOT ROOT MATCHES "/tests/cli/script_violations$")
    continue()  # planted failures, checked by their own test
  endif()
  if(file MATCHES "\\.sh$")
    list(APPEND scripts "${file}")
  else()
    file(STRINGS "${file}" first LIMIT_COUNT 1 LIMIT_INPUT 200)
    if(first MATCHES "^#! */(usr/)?bin/(env +)?(ba)?sh( |$)")
      list(APPEND scripts "${file}")
    endif()
  endif()
endforeach()
list(SORT scripts)
list(LENGTH scripts count)
if(count EQUAL 0)
  message(FATAL_ERROR "no shell scripts found under ${ROOT}")
endif()

find_program(BASH bash REQUIRED)
if(NOT SHELLCHECK)
  find_program(SHELLCHECK shellcheck)
endif()

set(failed "")
set(report "")
foreach(script IN LISTS scripts)
  file(RELATIVE_PATH name "${ROOT}" "${script}")
  execute_process(COMMAND ${BASH} -n "${script}" RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT code EQUAL 0)
    list(APPEND failed "${name}")
    string(APPEND report "\n${name}: bash -n fails:\n${out}")
    continue()
  endif()
  if(SHELLCHECK)
    execute_process(COMMAND ${SHELLCHECK} -x --format=gcc "${name}" WORKING_DIRECTORY "${ROOT}"
                    RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT code EQUAL 0)
      list(APPEND failed "${name}")
      string(APPEND report "\n${name}: shellcheck fails:\n${out}")
    endif()
  endif()
endforeach()

if(failed)
  # Indented lines are printed as they are (CMake wraps the others).
  list(LENGTH failed failures)
  list(JOIN failed "\n  " listing)
  string(STRIP "${report}" report)
  string(REPLACE "\n" "\n    " report "${report}")
  message(FATAL_ERROR "${failures} of ${count} shell script(s) fail:\n  ${listing}\n    ${report}")
endif()
if(SHELLCHECK)
  message(STATUS "scripts: ${count} shell scripts pass bash -n and shellcheck")
else()
  message(STATUS "scripts: ${count} shell scripts pass bash -n; shellcheck skipped: not found "
                 "(scripts/install-deps.sh installs it)")
endif()
