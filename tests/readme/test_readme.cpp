// The README's quick start is examples/quickstart/main.cpp, whole: every variable it uses
// is defined, and ctest builds and runs it. Checked here so the two cannot drift apart.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

namespace {
std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("the README's quick start is examples/quickstart/main.cpp", "[readme]") {
  const std::string readme = slurp(std::string(TAPEGRAD_SOURCE_DIR) + "/README.md");
  const std::string source = slurp(std::string(TAPEGRAD_SOURCE_DIR) + "/examples/quickstart/main.cpp");
  const auto section = readme.find("## Quick start");
  REQUIRE(section != std::string::npos);
  const auto open = readme.find("```cpp\n", section);
  REQUIRE(open != std::string::npos);
  const auto begin = open + 7;
  const auto end = readme.find("```\n", begin);
  REQUIRE(end != std::string::npos);
  CHECK(readme.substr(begin, end - begin) == source);
  // The legacy switch is gone from the README's examples.
  CHECK(readme.find("use_batchnorm") == std::string::npos);
}
