#pragma once
// A temporary folder of images made from copies of the image fixtures (tests/fixtures/images),
// for the tests that read image folders.
#include <filesystem>
#include <string>

#include "temp_dir_support.h"

namespace tapegrad::test {

/// tests/fixtures/images: the small PNG and JPEG files the image tests read.
inline std::filesystem::path image_fixtures() {
  return std::filesystem::path(TAPEGRAD_TESTS_DIR) / "fixtures" / "images";
}

struct ImageDir : TempDir {
  ImageDir() : TempDir("tapegrad_images") {}
  /// Copies fixture file `fixture` to <folder>/<rel>, making the folders on the way.
  void put(const std::string& rel, const std::string& fixture) const {
    std::filesystem::create_directories((path / rel).parent_path());
    std::filesystem::copy_file(image_fixtures() / fixture, path / rel,
                               std::filesystem::copy_options::overwrite_existing);
  }
  /// The folder, as a string.
  std::string str() const { return path.string(); }
};

}  // namespace tapegrad::test
