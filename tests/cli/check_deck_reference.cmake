# Fails when docs/deck.md differs from what `kpipe deck --doc` prints now.
execute_process(COMMAND ${KPIPE} deck --doc RESULT_VARIABLE code OUTPUT_VARIABLE generated)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "kpipe deck --doc failed with exit code ${code}")
endif()
file(READ ${REFERENCE} committed)
if(NOT generated STREQUAL committed)
  message(FATAL_ERROR "docs/deck.md is stale; regenerate it with: kpipe deck --doc > docs/deck.md")
endif()
