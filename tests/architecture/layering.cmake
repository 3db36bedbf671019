# The module rules of DESIGN.md §2 that a compiler cannot see:
#  * the module table: a module includes kpipe headers only of the modules it
#    may use (docs/architecture.md "Modules" gives each edge and, where it
#    departs from DESIGN.md's table, the reason);
#  * model, schedule, kernels and runtime take typed config structs: none of
#    their headers or sources includes the deck header or names config::Deck;
#  * HDF5 lives in io: no <hdf5.h> or H5 call outside src/io and include/kpipe/io;
#  * MPI lives in comm: no MPI_ identifier or <mpi.h> outside src/comm and
#    include/kpipe/comm, and io (src/io, include/kpipe/io): parallel HDF5 opens
#    a file with the MPI communicator itself (H5Pset_fapl_mpio), so io must
#    hold one, and names nothing else of MPI's (MPI_Comm, MPI_COMM_NULL,
#    MPI_INFO_NULL): what the ranks of a shared file agree on goes through
#    io::SharedFileRanks, comm's collectives under the watchdog;
#  * a layer kind owns what is particular to it (layer_kind.hpp): nothing
#    outside its registry (src/model/kinds, src/model/layer_kind.cpp) and the
#    model builders that choose kinds (src/model/spec.cpp) tests a layer's
#    kind by name or looks one up, so adding a kind touches no switch;
#  * a model family owns what is particular to it (model_family.hpp): nothing
#    outside its registry (src/config/model_family.cpp, src/config/families)
#    compares model.kind with a family's name or looks one up by name; the
#    rest asks the family (token_sequences, layers, split_widths) or a
#    registry keyed by it (runtime/interop/hf_format.hpp);
#  * halls have rooms: no folder of src/ or include/kpipe holds more than
#    MAX_FOLDER_FILES (20) files at its top level; one that grows past it
#    is split into sub-folders by job (docs/architecture.md, "Rooms").
# Usage: cmake -DROOT=<tree with src/ and include/> [-DMAX_FOLDER_FILES=n] -P layering.cmake
# Fails (non-zero exit) listing every offending file:line.
cmake_policy(SET CMP0057 NEW)  # if(... IN_LIST ...)
if(NOT ROOT)
  message(FATAL_ERROR "layering.cmake needs -DROOT=<source tree>")
endif()

set(violations "")
set(count 0)

# Source lines may hold ';', which CMake lists would split: one string, one line per hit.
function(scan files regex rule)
  foreach(file IN LISTS files)
    file(STRINGS "${file}" lines REGEX "${regex}")
    list(LENGTH lines hits)
    if(hits GREATER 0)
      file(RELATIVE_PATH relative "${ROOT}" "${file}")
      math(EXPR count "${count} + ${hits}")
      string(APPEND violations "\n  ${relative}: ${rule} (${hits} line(s))")
    endif()
  endforeach()
  set(violations "${violations}" PARENT_SCOPE)
  set(count "${count}" PARENT_SCOPE)
endfunction()

# Each module and the modules whose headers it may include (itself aside).
set(may_use_core "")
set(may_use_config core schedule)
set(may_use_schedule core config)
set(may_use_tensor core)
set(may_use_kernels core tensor)
set(may_use_model core config tensor kernels)
set(may_use_comm core tensor)
set(may_use_io core tensor)
set(may_use_runtime core config schedule tensor kernels model comm io)
set(may_use_app core config runtime schedule comm)
set(modules core config schedule tensor kernels model comm io runtime app)
foreach(module IN LISTS modules)
  file(GLOB_RECURSE files "${ROOT}/src/${module}/*.hpp" "${ROOT}/src/${module}/*.cpp"
       "${ROOT}/include/kpipe/${module}/*.hpp")
  foreach(file IN LISTS files)
    file(STRINGS "${file}" includes REGEX "^#include [\"<]kpipe/[a-z_]+/")
    set(broken "")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include [\"<]kpipe/([a-z_]+)/.*" "\\1" used "${line}")
      if(NOT used STREQUAL module AND NOT used IN_LIST may_use_${module} AND NOT used IN_LIST broken)
        list(APPEND broken ${used})
      endif()
    endforeach()
    foreach(used IN LISTS broken)
      file(RELATIVE_PATH relative "${ROOT}" "${file}")
      math(EXPR count "${count} + 1")
      string(APPEND violations "\n  ${relative}: ${module} may not use ${used} (the module table)")
    endforeach()
  endforeach()
endforeach()

set(typed_modules model schedule kernels runtime)
foreach(module IN LISTS typed_modules)
  file(GLOB_RECURSE files "${ROOT}/src/${module}/*.hpp" "${ROOT}/src/${module}/*.cpp"
       "${ROOT}/include/kpipe/${module}/*.hpp")
  scan("${files}" "kpipe/config/deck\\.hpp|config::Deck" "${module} must take typed config structs, not the deck")
endforeach()

file(GLOB_RECURSE sources "${ROOT}/src/*.hpp" "${ROOT}/src/*.cpp" "${ROOT}/src/*.in" "${ROOT}/include/*.hpp"
     "${ROOT}/include/*.in")
list(FILTER sources EXCLUDE REGEX "^${ROOT}/(src/comm|include/kpipe/comm|src/io|include/kpipe/io)/")
scan("${sources}" "MPI_[A-Za-z]|<mpi\\.h>" "MPI belongs in comm")

file(GLOB_RECURSE sources "${ROOT}/src/io/*.hpp" "${ROOT}/src/io/*.cpp" "${ROOT}/include/kpipe/io/*.hpp")
foreach(file IN LISTS sources)
  file(STRINGS "${file}" lines REGEX "MPI_[A-Za-z]")
  set(hits 0)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "MPI_(Comm|COMM_NULL|INFO_NULL)([^A-Za-z0-9_]|$)" "\\2" rest "${line}")
    if(rest MATCHES "MPI_[A-Za-z]")
      math(EXPR hits "${hits} + 1")
    endif()
  endforeach()
  if(hits GREATER 0)
    file(RELATIVE_PATH relative "${ROOT}" "${file}")
    math(EXPR count "${count} + ${hits}")
    string(APPEND violations "\n  ${relative}: io holds a communicator only to open a shared file; its agreements go "
                             "through io::SharedFileRanks (${hits} line(s))")
  endif()
endforeach()

file(GLOB_RECURSE sources "${ROOT}/src/*.hpp" "${ROOT}/src/*.cpp" "${ROOT}/include/*.hpp")
list(FILTER sources EXCLUDE REGEX "^${ROOT}/(src/io|include/kpipe/io)/")
scan("${sources}" "<hdf5\\.h>|[^A-Za-z_]H5[A-Z][A-Za-z_]*\\(" "HDF5 belongs in io")

file(GLOB_RECURSE sources "${ROOT}/src/*.hpp" "${ROOT}/src/*.cpp" "${ROOT}/include/*.hpp")
list(FILTER sources EXCLUDE REGEX "^${ROOT}/src/model/(kinds/|layer_kind\\.cpp$|spec\\.cpp$)")
scan("${sources}" "kind(->|\\.)name *[!=]=|layer_kind\\(\"|LayerKind::[a-z]"
     "a per-kind test belongs in the layer kind's own file (layer_kind.hpp)")

file(GLOB_RECURSE sources "${ROOT}/src/*.hpp" "${ROOT}/src/*.cpp" "${ROOT}/include/*.hpp")
list(FILTER sources EXCLUDE REGEX "^${ROOT}/src/config/(families/|model_family\\.cpp$)")
scan("${sources}" "kind *[!=]= *\"|family(\\(\\))?(->|\\.)name *[!=]=|model_family\\(\""
     "a per-family test belongs in the model family's own file (model_family.hpp)")

if(NOT MAX_FOLDER_FILES)
  set(MAX_FOLDER_FILES 20)
endif()
file(GLOB_RECURSE entries LIST_DIRECTORIES true "${ROOT}/src/*" "${ROOT}/include/kpipe/*")
set(folders "${ROOT}/src" "${ROOT}/include/kpipe")
foreach(entry IN LISTS entries)
  if(IS_DIRECTORY "${entry}")
    list(APPEND folders "${entry}")
  endif()
endforeach()
foreach(folder IN LISTS folders)
  file(GLOB files LIST_DIRECTORIES false "${folder}/*")
  list(LENGTH files n)
  if(n GREATER MAX_FOLDER_FILES)
    file(RELATIVE_PATH relative "${ROOT}" "${folder}")
    math(EXPR count "${count} + 1")
    string(APPEND violations "\n  ${relative}/: ${n} files at its top level, more than ${MAX_FOLDER_FILES}: split it into "
                             "rooms by job (docs/architecture.md, \"Rooms\")")
  endif()
endforeach()

if(count GREATER 0)
  message(FATAL_ERROR "${count} layering violation(s):${violations}")
endif()
message(STATUS "layering: every module uses only the modules the table allows; model, schedule, kernels and "
               "runtime never see the deck; MPI stays in comm and io (a communicator only), HDF5 in io; "
               "no per-kind test of layers or model families outside their registries; no folder holds more than "
               "${MAX_FOLDER_FILES} files")
