# tapegrad_add_folder_library(<folder> [DEPENDS <target>...] [PRIVATE_DEPENDS <target>...])
#
# One library per source folder: target tapegrad_<folder> (alias tapegrad::tapegrad_<folder>),
# built from every .cpp below <folder>/ (globbed, so a new file there is picked up on the next
# build), headers installed under include/tapegrad/<folder>/.
#
# Layering is enforced by the include path: the target's include root is a directory in the
# build tree that holds a single link, <folder> -> the source folder. A target therefore sees
# its own folder plus the folders of the targets it links (DEPENDS), and nothing above it:
# `#include "optim/sgd.h"` inside layers/ fails to compile.
#
# Called from <folder>/CMakeLists.txt. Every folder library is part of tapegrad::tapegrad.
function(tapegrad_add_folder_library folder)
  cmake_parse_arguments(ARG "" "" "DEPENDS;PRIVATE_DEPENDS" ${ARGN})
  set(target tapegrad_${folder})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/*.cpp)
  add_library(${target} ${sources})
  add_library(tapegrad::${target} ALIAS ${target})

  set(root ${PROJECT_BINARY_DIR}/include_roots/${folder})
  file(MAKE_DIRECTORY ${root})
  if(NOT EXISTS ${root}/${folder})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${root}/${folder} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${root}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/tapegrad>)
  target_link_libraries(${target} PUBLIC ${ARG_DEPENDS} PRIVATE ${ARG_PRIVATE_DEPENDS})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-maybe-uninitialized -Wno-psabi)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)

  install(TARGETS ${target} EXPORT tapegradTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tapegrad/${folder}
          FILES_MATCHING PATTERN "*.h")
  set_property(GLOBAL APPEND PROPERTY TAPEGRAD_FOLDER_LIBRARIES ${target})
endfunction()

# tapegrad_add_config_dependency(<line>): a line the installed tapegradConfig.cmake runs before
# it loads the targets, e.g. "find_dependency(MPI COMPONENTS CXX)" for an optional folder.
function(tapegrad_add_config_dependency line)
  set_property(GLOBAL APPEND_STRING PROPERTY TAPEGRAD_CONFIG_DEPENDENCIES "${line}\n")
endfunction()
