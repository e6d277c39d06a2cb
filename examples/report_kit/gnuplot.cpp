#include "gnuplot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

extern char** environ;

namespace report_kit {

std::string gnuplot_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\0')
      throw std::invalid_argument("gnuplot_quote: a gnuplot string cannot hold a newline or NUL, got '" + text + "'");
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

namespace {
// Spawns argv[0] from PATH with stdin and stdout on /dev/null and stderr on `err_path`
// (/dev/null when empty); returns the exit status or -1.
int spawn_wait(const std::vector<std::string>& args, const std::string& err_path) {
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa) != 0) return -1;
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.empty() ? "/dev/null" : err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
}  // namespace

bool gnuplot_available() {
  static const bool ok = spawn_wait({"gnuplot", "-e", "set terminal pngcairo"}, "") == 0;
  return ok;
}

int run_gnuplot(const std::vector<std::string>& scripts, const std::string& log_path) {
  std::vector<std::string> args{"gnuplot"};
  args.insert(args.end(), scripts.begin(), scripts.end());
  return spawn_wait(args, log_path);
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << text;
  if (!f) throw std::runtime_error("error while writing " + path);
}

}  // namespace report_kit
