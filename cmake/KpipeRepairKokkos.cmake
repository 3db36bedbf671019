# Debian's libtrilinos-kokkos-dev (Kokkos 3.4.1, built by TriBITS) exports a
# Kokkos::kokkos target whose include directory is <prefix>/include, while the
# headers live in <prefix>/include/trilinos. Point the target at the directory
# that really holds Kokkos_Core.hpp; a correct install is left untouched.
function(kpipe_repair_kokkos_target)
  if(NOT TARGET Kokkos::kokkos)
    message(FATAL_ERROR "find_package(Kokkos) gave no Kokkos::kokkos target; set Kokkos_ROOT to a Kokkos install")
  endif()
  get_target_property(_aliased Kokkos::kokkos ALIASED_TARGET)
  if(_aliased)
    return()
  endif()
  get_target_property(_dirs Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  foreach(_dir IN LISTS _dirs)
    if(EXISTS "${_dir}/Kokkos_Core.hpp")
      return()
    endif()
  endforeach()
  find_path(KPIPE_KOKKOS_INCLUDE_DIR Kokkos_Core.hpp
    HINTS ${_dirs} PATH_SUFFIXES trilinos kokkos NO_CACHE)
  if(NOT KPIPE_KOKKOS_INCLUDE_DIR)
    message(FATAL_ERROR "Kokkos::kokkos names include directories '${_dirs}' without Kokkos_Core.hpp, "
                        "and no Kokkos_Core.hpp was found beside them; reinstall Kokkos or set Kokkos_ROOT")
  endif()
  message(STATUS "kpipe: repaired Kokkos::kokkos include directory -> ${KPIPE_KOKKOS_INCLUDE_DIR}")
  set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${KPIPE_KOKKOS_INCLUDE_DIR}")
  # TriBITS also puts a stray -DKOKKOS_DEPENDENCE into the link line; keep only libraries.
  get_target_property(_libs Kokkos::kokkos INTERFACE_LINK_LIBRARIES)
  list(FILTER _libs EXCLUDE REGEX "^-D")
  set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_LINK_LIBRARIES "${_libs}")
endfunction()
