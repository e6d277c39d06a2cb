// docs/training.md shows a complete program: it must be tests/consumer/train/main.cpp, which
// ctest (consumer_train) compiles against the installed package and runs.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

namespace {
std::string read_text(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("docs/training.md's program is the compiled consumer test", "[train][docs]") {
  const std::string doc = read_text(std::string(TAPEGRAD_SOURCE_DIR) + "/docs/training.md");
  const std::string code = read_text(std::string(TAPEGRAD_SOURCE_DIR) + "/tests/consumer/train/main.cpp");
  const auto begin = doc.find("```cpp\n");
  REQUIRE(begin != std::string::npos);
  const auto end = doc.find("\n```", begin + 7);
  REQUIRE(end != std::string::npos);
  CHECK(doc.substr(begin + 7, end - begin - 7) + "\n" == code);
}
