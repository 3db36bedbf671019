# The module rules of DESIGN.md §2 that a compiler cannot see:
#  * model, schedule, kernels and runtime take typed config structs: none of
#    their headers or sources includes the deck header or names config::Deck;
#  * MPI lives in comm: no MPI_ identifier or <mpi.h> outside src/comm and
#    include/kpipe/comm, and io (src/io, include/kpipe/io): parallel HDF5 opens
#    a file with the MPI communicator itself (H5Pset_fapl_mpio), so io must
#    hold one; it uses MPI only to agree on what goes into a shared file;
#  * a layer kind owns what is particular to it (layer_kind.hpp): nothing
#    outside its registry (src/model/kinds, src/model/layer_kind.cpp) and the
#    model builders that choose kinds (src/model/spec.cpp) tests a layer's
#    kind by name or looks one up, so adding a kind touches no switch.
# Usage: cmake -DROOT=<tree with src/ and include/> -P layering.cmake
# Fails (non-zero exit) listing every offending file:line.
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

file(GLOB_RECURSE sources "${ROOT}/src/*.hpp" "${ROOT}/src/*.cpp" "${ROOT}/include/*.hpp")
list(FILTER sources EXCLUDE REGEX "^${ROOT}/src/model/(kinds/|layer_kind\\.cpp$|spec\\.cpp$)")
scan("${sources}" "kind(->|\\.)name *[!=]=|layer_kind\\(\"|LayerKind::[a-z]"
     "a per-kind test belongs in the layer kind's own file (layer_kind.hpp)")

if(count GREATER 0)
  message(FATAL_ERROR "${count} layering violation(s):${violations}")
endif()
message(STATUS "layering: model, schedule, kernels and runtime never see the deck; MPI stays in comm and io; "
               "no per-kind test of layers outside their registry")
