# tapegrad_add_folder_library(<folder> [DEPENDS <target>...] [PRIVATE_DEPENDS <target>...])
#
# One library per source folder: target tapegrad_<folder> (alias tapegrad::tapegrad_<folder>),
# built from every .cpp below <folder>/ (globbed, so a new file there is picked up on the next
# build), headers installed under include/tapegrad/<folder>/.
#
# Layering is enforced by the include path: the target's include root is a directory in the
# build tree that holds a single link, <folder> -> the source folder. A target therefore sees
# its own folder plus the folders of the targets it links (DEPENDS), and nothing above it:
# `#include <tapegrad/optim/sgd.h>` inside layers/ fails to compile.
#
# Called from <folder>/CMakeLists.txt. Every folder library is part of tapegrad::tapegrad.
function(tapegrad_add_folder_library folder)
  cmake_parse_arguments(ARG "" "" "DEPENDS;PRIVATE_DEPENDS" ${ARGN})
  set(target tapegrad_${folder})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/*.cpp)
  add_library(${target} ${sources})
  add_library(tapegrad::${target} ALIAS ${target})

  set(root ${PROJECT_BINARY_DIR}/include_roots/${folder})
  file(MAKE_DIRECTORY ${root}/tapegrad)
  if(NOT EXISTS ${root}/tapegrad/${folder})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${root}/tapegrad/${folder} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${root}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PUBLIC ${ARG_DEPENDS} PRIVATE ${ARG_PRIVATE_DEPENDS})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-maybe-uninitialized -Wno-psabi)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)

  # One export set per folder: the package's component <folder> (cmake/tapegradConfig.cmake.in).
  install(TARGETS ${target} EXPORT ${target}Targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tapegrad/${folder}
          FILES_MATCHING PATTERN "*.h" PATTERN "kernels" EXCLUDE)
  # The umbrella header <tapegrad/tapegrad.h> includes every installed header of every folder.
  file(GLOB_RECURSE headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/*.h)
  list(FILTER headers EXCLUDE REGEX "/kernels/")
  list(SORT headers)
  set_property(GLOBAL APPEND PROPERTY TAPEGRAD_PUBLIC_HEADERS ${headers})
  install(EXPORT ${target}Targets NAMESPACE tapegrad:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tapegrad)
  set_property(GLOBAL APPEND PROPERTY TAPEGRAD_FOLDER_LIBRARIES ${target})
  set_property(GLOBAL APPEND PROPERTY TAPEGRAD_COMPONENTS ${folder})
  # the components this one needs (the folders of its DEPENDS targets)
  set(needs "")
  foreach(dep ${ARG_DEPENDS})
    if(dep MATCHES "^tapegrad_(.+)$")
      list(APPEND needs ${CMAKE_MATCH_1})
    endif()
  endforeach()
  set_property(GLOBAL APPEND_STRING PROPERTY TAPEGRAD_COMPONENT_TABLE "set(_tapegrad_needs_${folder} ${needs})\n")
endfunction()

# tapegrad_add_component_dependency(<folder> <line>): a line the installed tapegradConfig.cmake
# runs before it loads component <folder>, e.g. "find_dependency(MPI COMPONENTS CXX)".
function(tapegrad_add_component_dependency folder line)
  set_property(GLOBAL APPEND_STRING PROPERTY TAPEGRAD_COMPONENT_TABLE
               "list(APPEND _tapegrad_deps_${folder} \"${line}\")\n")
endfunction()

