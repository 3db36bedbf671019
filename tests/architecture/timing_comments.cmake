# No comment in src/ or include/ quotes a timing: measurements belong in
# docs/performance.md, with the command and the machine that gave them, where
# they can be rerun and replaced; a comment says why the code is as it is
# (which path wins on which kind of CPU, and why) and names the section.
# A comment (a line's `//` text, whole-line or trailing) quotes a timing when
# it holds, in any case:
#  * a rate: a number followed by GB/s, MB/s, GFLOP/s, TFLOP/s, samples/s,
#    tokens/s and the like;
#  * a speed ratio: "1.5x", "1.2-1.4 times", "about 2 times", "3 times
#    faster/slower/as fast", "20% faster/slower", "5% of a step";
#  * a measured time: a range or a change of times ("45-60 ns", "72 -> 62
#    us"), an approximate or a fractional one ("about 2 ms", "0.3 ms"), or any
#    number with a time unit (ns, us, µs, ms, s, seconds, minutes) on a line
#    that says it was measured ("took", "ran", "measured", "faster", "on Zen
#    4", "on a host core", ...). A setting ("1 ms sleeps", "a 10 s timeout") is
#    not a measurement and passes.
# Usage: cmake -DROOT=<tree with src/ and include/> -P timing_comments.cmake
# Fails (non-zero exit) listing every offending file:line and its comment.
if(NOT ROOT)
  message(FATAL_ERROR "timing_comments.cmake needs -DROOT=<source tree>")
endif()

# Characters that CMake lists would read as structure (';' splits, '[' ']'
# group, '\' escapes) stand in as control bytes while the file is a list of
# lines.
string(ASCII 1 semicolon_mark)
string(ASCII 2 open_mark)
string(ASCII 3 close_mark)
string(ASCII 4 backslash_mark)

# Patterns on the lower-cased comment text. CMake regexes have no \b: `end`
# is what may follow a word.
set(end "([^a-z0-9_]|$)")
set(number "[0-9][0-9.,]*")
set(range "[0-9][0-9.,]* *(-|–|—|to|->|→) *[0-9][0-9.,]*")
set(time_unit "(ns|us|µs|ms|s|sec|secs|seconds?|minutes?|mins?|hours?)")
# Each pattern alone quotes a timing (one list entry each: a CMake regex holds
# at most nine groups).
set(always
    # rates
    "[0-9] *([kmgt]i?b|bytes|[kmgtp]?flops?|samples|tokens|requests|steps|items)/s${end}"
    # speed ratios
    "[0-9]x${end}" "[0-9]×${end}"
    "[0-9] *(times|x|×) +(faster|slower|quicker|as fast|as slow|as long|longer|shorter|the speed|the rate)${end}"
    "${range} *times${end}" "[0-9]% +(faster|slower|quicker|longer|shorter)${end}"
    "[0-9]% of (a|an|the|its|each|every) ([a-z0-9_-]+ )?(step|run|time|product|call|pass)${end}"
    "speed-?up (of )?[0-9]" "(about|around|roughly|nearly|~|≈) *${number} *(times|x|×)${end}"
    # times measured: a range or a change of times, an approximate or a
    # fractional time
    "${range} *${time_unit}${end}" "(about|around|roughly|nearly|~|≈) *${number} *${time_unit}${end}"
    "(^|[^a-z0-9_.])[0-9]*[.][0-9]+ *${time_unit}${end}")
# Any other time is a timing only on a line that says it was measured.
set(any_time "(^|[^a-z0-9_.])${number} *${time_unit}${end}")
set(words measured took ran "runs in" "run in" faster slower quicker benchmark "on zen" "zen [0-9]" sapphire xeon epyc
    "on (this|a|the|one) (host|machine|cpu|vm|core|gpu)" "host core")
list(JOIN words "|" words)
set(measurement_words "(^|[^a-z])(${words})([^a-z]|$)")

file(GLOB_RECURSE sources "${ROOT}/src/*.cpp" "${ROOT}/src/*.hpp" "${ROOT}/src/*.in" "${ROOT}/include/*.cpp"
     "${ROOT}/include/*.hpp" "${ROOT}/include/*.in")
list(SORT sources)

set(hits "")
set(count 0)
foreach(file IN LISTS sources)
  # Most files quote no number in a comment at all: skip them unread.
  file(STRINGS "${file}" candidates REGEX "//.*[0-9]")
  if(candidates STREQUAL "")
    continue()
  endif()
  file(READ "${file}" content)
  string(REPLACE "\r" "" content "${content}")
  string(REPLACE "\\" "${backslash_mark}" content "${content}")
  string(REPLACE ";" "${semicolon_mark}" content "${content}")
  string(REPLACE "[" "${open_mark}" content "${content}")
  string(REPLACE "]" "${close_mark}" content "${content}")
  string(REPLACE "\n" ";" lines "${content}")
  file(RELATIVE_PATH relative "${ROOT}" "${file}")
  set(number_of_line 0)
  foreach(line IN LISTS lines)
    math(EXPR number_of_line "${number_of_line} + 1")
    if(NOT line MATCHES "//")
      continue()
    endif()
    # The comment: a whole line's, or the text after code's first ` //`.
    if(line MATCHES "^[ \t]*//(.*)$")
      set(comment "${CMAKE_MATCH_1}")
    elseif(line MATCHES "[ \t]//(.*)$")
      set(comment "${CMAKE_MATCH_1}")
    else()
      continue()
    endif()
    string(TOLOWER "${comment}" text)
    set(timing FALSE)
    foreach(pattern IN LISTS always)
      if(text MATCHES "${pattern}")
        set(timing TRUE)
        break()
      endif()
    endforeach()
    if(NOT timing AND text MATCHES "${any_time}" AND text MATCHES "${measurement_words}")
      set(timing TRUE)
    endif()
    if(timing)
      math(EXPR count "${count} + 1")
      string(STRIP "${comment}" shown)
      string(REPLACE "${semicolon_mark}" ";" shown "${shown}")
      string(REPLACE "${open_mark}" "[" shown "${shown}")
      string(REPLACE "${close_mark}" "]" shown "${shown}")
      string(REPLACE "${backslash_mark}" "\\" shown "${shown}")
      string(APPEND hits "\n  ${relative}:${number_of_line}: ${shown}")
    endif()
  endforeach()
endforeach()

if(count GREATER 0)
  message(FATAL_ERROR "${count} timing comment(s): a comment says why; the measurement goes into "
                      "docs/performance.md with its command and machine, and the comment names the section:${hits}")
endif()
list(LENGTH sources files)
message(STATUS "timing comments: none of ${files} sources under src/ and include/ quotes a timing in a comment")
