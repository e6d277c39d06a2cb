#include "kit/temp_dir.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include <stdlib.h>  // mkdtemp

namespace studies::kit {

TempDir::TempDir(const std::string& prefix) {
  const std::filesystem::path tmp = std::filesystem::temp_directory_path();
  std::string tmpl = (tmp / (prefix + "XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("cannot create a temp folder in " + tmp.string() + ": " + std::strerror(errno));
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace studies::kit
