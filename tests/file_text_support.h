#pragma once
// Reading a whole file in a test, and the C++ block of a Markdown page that a test compares
// with the file it shows. Catch2 and the standard library only.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

namespace tapegrad::test {

/// The bytes of the file at `path`; "" when it cannot be opened.
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The bytes of the file at `path`, REQUIRing that it opens.
inline std::string read_existing_file(const std::string& path) {
  REQUIRE(std::ifstream(path, std::ios::binary).good());
  return read_file(path);
}

/// The lines of the first ```cpp block of `page` at or after offset `from`, each with its
/// newline; REQUIREs the block and its closing fence.
inline std::string first_cpp_block(const std::string& page, std::size_t from = 0) {
  const auto open = page.find("```cpp\n", from);
  REQUIRE(open != std::string::npos);
  const auto begin = open + 7;
  const auto end = page.find("\n```", begin);
  REQUIRE(end != std::string::npos);
  return page.substr(begin, end + 1 - begin);
}

}  // namespace tapegrad::test
