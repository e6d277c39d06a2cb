// The README's quick start is examples/quickstart/main.cpp, whole: every variable it uses
// is defined, and ctest builds and runs it. Checked here so the two cannot drift apart.
#include <catch2/catch.hpp>

#include <string>

#include "file_text_support.h"

using tapegrad::test::first_cpp_block;
using tapegrad::test::read_existing_file;

TEST_CASE("the README's quick start is examples/quickstart/main.cpp", "[readme]") {
  const std::string readme = read_existing_file(std::string(TAPEGRAD_SOURCE_DIR) + "/README.md");
  const std::string source = read_existing_file(std::string(TAPEGRAD_SOURCE_DIR) + "/examples/quickstart/main.cpp");
  const auto section = readme.find("## Quick start");
  REQUIRE(section != std::string::npos);
  CHECK(first_cpp_block(readme, section) == source);
  // The legacy switch is gone from the README's examples.
  CHECK(readme.find("use_batchnorm") == std::string::npos);
}
