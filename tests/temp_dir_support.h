#pragma once
// A private temporary folder for the tests that write files: made fresh (mkdtemp under the
// system's temp folder, so unique across tests and processes), removed with its contents at
// scope exit. Catch2 (which every test already includes), standard and POSIX headers only.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace tapegrad::test {

class TempDir {
 public:
  /// The folder is named `<prefix>_XXXXXX` (mkdtemp's letters); REQUIREs that it was made, so
  /// construct it inside a test case.
  explicit TempDir(const std::string& prefix = "tapegrad_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// `name` inside the folder, as a string.
  std::string file(const std::string& name) const { return (path / name).string(); }

  std::filesystem::path path;
};

}  // namespace tapegrad::test
