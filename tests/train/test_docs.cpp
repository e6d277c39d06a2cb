// docs/training.md shows a complete program: it must be tests/consumer/train/main.cpp, which
// ctest (consumer_train) compiles against the installed package and runs.
#include <catch2/catch.hpp>

#include <string>

#include "file_text_support.h"

using tapegrad::test::first_cpp_block;
using tapegrad::test::read_existing_file;

TEST_CASE("docs/training.md's program is the compiled consumer test", "[train][docs]") {
  const std::string doc = read_existing_file(std::string(TAPEGRAD_SOURCE_DIR) + "/docs/training.md");
  const std::string code = read_existing_file(std::string(TAPEGRAD_SOURCE_DIR) + "/tests/consumer/train/main.cpp");
  CHECK(first_cpp_block(doc) == code);
}
