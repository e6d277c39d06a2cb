# What the consumer projects share: C++20, the installed tapegrad found as a user's project finds
# it (find_package(tapegrad CONFIG REQUIRED <ARGN>), e.g. COMPONENTS train), and the program
# `app` built from the project's main.cpp and linked to <target>. A macro, so that the package's
# variables (tapegrad_ISA_VARIANTS, ...) reach the project.
macro(tapegrad_consumer_app target)
  set(CMAKE_CXX_STANDARD 20)
  set(CMAKE_CXX_STANDARD_REQUIRED ON)
  find_package(tapegrad CONFIG REQUIRED ${ARGN})
  add_executable(app main.cpp)
  target_link_libraries(app PRIVATE ${target})
endmacro()
