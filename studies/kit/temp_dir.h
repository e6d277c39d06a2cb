#pragma once
// A private temporary folder for the studies and their tests: created with mkdtemp (mode
// 0700, a fresh random name; a predictable name in the shared temp folder could be a symlink
// planted by another user, and saves follow symlinks) and removed with its contents when the
// object goes out of scope.
#include <filesystem>
#include <string>

namespace studies::kit {

class TempDir {
 public:
  /// Creates TMPDIR/<prefix>XXXXXX. Throws std::runtime_error naming the temp folder and
  /// the reason when it cannot.
  explicit TempDir(const std::string& prefix = "tapegrad_study_");
  /// Removes the folder and everything in it (errors ignored).
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// path() / name.
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace studies::kit
