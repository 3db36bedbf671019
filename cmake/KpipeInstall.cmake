# Install the modules, the umbrella target kpipe::kpipe, the headers, the kpipe
# executable and a package config so that find_package(kpipe) works.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_property(_modules GLOBAL PROPERTY KPIPE_MODULES)
install(TARGETS ${_modules} kpipe_all EXPORT kpipeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS kpipe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# detail/ holds a module's internals, which its own sources include: not installed.
install(DIRECTORY include/kpipe DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN detail EXCLUDE)
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/kpipe DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT kpipeTargets NAMESPACE kpipe:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kpipe)

# The package config pins the Kokkos found at configure time (KokkosConfig.cmake's directory).
set(KPIPE_KOKKOS_DIR "${Kokkos_DIR}")
configure_package_config_file(cmake/kpipeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kpipeConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kpipe)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kpipeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kpipeConfig.cmake ${PROJECT_BINARY_DIR}/kpipeConfigVersion.cmake
              cmake/KpipeRepairKokkos.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kpipe)
