# Compile options shared by every kpipe target: warnings on our code only, and
# the optional sanitizer instrumentation.

function(kpipe_target_options target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>)
  endif()
  # kpipe uses MPI's C API; the deprecated C++ bindings only add warnings.
  target_compile_definitions(${target} PRIVATE OMPI_SKIP_MPICXX MPICH_SKIP_MPICXX)
  if(KPIPE_ARCH_NATIVE AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
  endif()
  if(KPIPE_ENABLE_FUZZING)
    # Coverage for libFuzzer in every kpipe library; the harnesses add the driver.
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
  if(KPIPE_ENABLE_SANITIZERS OR KPIPE_ENABLE_FUZZING)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()

# One static library per module of DESIGN.md §2: kpipe_<name>, alias kpipe::<name>.
function(kpipe_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(kpipe_${name} STATIC ${ARG_SOURCES})
  add_library(kpipe::${name} ALIAS kpipe_${name})
  target_include_directories(kpipe_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(kpipe_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(kpipe_${name} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  kpipe_target_options(kpipe_${name})
  set_property(GLOBAL APPEND PROPERTY KPIPE_MODULES kpipe_${name})
endfunction()
