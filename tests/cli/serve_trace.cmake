# kpipe serve on 2 ranks: a trace whose third line is malformed serves and
# reports (--json) the two requests before it, each with exactly its
# max_new_tokens tokens, then exits with code 2 and the line's error; a text
# prompt is encoded with the deck's vocabulary and served.
# Usage: cmake -DKPIPE=... -DMPIEXEC=... -DWORK_DIR=... -P serve_trace.cmake (from the source root)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# Serves tests/data/serve/TRACE.jsonl on the Genesis deck into WORK_DIR/TRACE.json,
# expecting exit code CODE; sets `err` (stderr) and `json` (the --json file).
function(serve trace code)
  execute_process(COMMAND ${MPIEXEC} -n 2 ${KPIPE} serve tests/data/lm/genesis.toml
                          requests=tests/data/serve/${trace}.jsonl --json ${WORK_DIR}/${trace}.json
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  if(NOT result STREQUAL code)
    message(FATAL_ERROR "serving ${trace}.jsonl: expected exit code ${code}, got '${result}'\n${out}\n${err}")
  endif()
  file(READ ${WORK_DIR}/${trace}.json json)
  set(err "${err}" PARENT_SCOPE)
  set(json "${json}" PARENT_SCOPE)
endfunction()

serve(malformed 2)
if(NOT err MATCHES "kpipe: error: tests/data/serve/malformed.jsonl:3: is not valid JSON")
  message(FATAL_ERROR "the error does not name line 3:\n${err}")
endif()
string(JSON served LENGTH "${json}" requests)
if(NOT served EQUAL 2)
  message(FATAL_ERROR "expected the 2 requests before the bad line in --json, got ${served}")
endif()
foreach(index expected IN ZIP_LISTS "0;1" "4;3")
  string(JSON generated LENGTH "${json}" requests ${index} generated)
  if(NOT generated EQUAL expected)
    message(FATAL_ERROR "request ${index}: ${generated} tokens, expected ${expected}")
  endif()
endforeach()

serve(text 0)
string(JSON prompt GET "${json}" requests 0 prompt_tokens)
string(JSON text GET "${json}" requests 0 text)
string(LENGTH "${text}" characters)
if(NOT prompt EQUAL 6 OR NOT characters EQUAL 4)
  message(FATAL_ERROR "expected a 6-token prompt and 4 new characters, got ${prompt} and '${text}'")
endif()
