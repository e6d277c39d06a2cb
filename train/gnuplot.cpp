#include <tapegrad/train/gnuplot.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <string_view>

extern char** environ;

namespace tapegrad::train {

std::string gnuplot_quote(const std::string& text) {
  std::string q = "'";
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\0')
      throw std::invalid_argument("gnuplot_quote: a gnuplot string cannot hold a newline, carriage return or NUL");
    if (c == '\'') q += '\'';
    q += c;
  }
  return q + "'";
}

std::string gnuplot_text(const std::string& text) {
  std::string q = "'";
  for (char c : text) {
    if (c == '\r' || c == '\0')
      throw std::invalid_argument("gnuplot_text: a figure text cannot hold a carriage return or NUL");
    if (c == '\n') {
      q += "'.\"\\n\".'";  // a line break: 'a'."\n".'b'
      continue;
    }
    if (c == '\'') q += '\'';
    else if (std::string_view("\\^_@&~{}").find(c) != std::string_view::npos) q += '\\';
    q += c;
  }
  return q + "'";
}

namespace {

// argv[0] from PATH, in `cwd` (null: here), stdin/stdout on /dev/null, stderr appended to
// `log` (null: /dev/null). Returns the pid or -1.
pid_t spawn(const char* cwd, std::vector<std::string> args, const char* log) {
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa) != 0) return -1;
  bool ok = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) == 0 &&
            posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0) == 0 &&
            posix_spawn_file_actions_addopen(&fa, 2, log ? log : "/dev/null",
                                             log ? O_WRONLY | O_CREAT | O_APPEND : O_WRONLY, 0644) == 0;
  if (ok && cwd) ok = posix_spawn_file_actions_addchdir_np(&fa, cwd) == 0;
  pid_t pid = -1;
  if (ok) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  }
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

}  // namespace

pid_t spawn_gnuplot(const std::string& cwd, const std::vector<std::string>& scripts, const std::string& log) {
  std::vector<std::string> args{"gnuplot"};
  for (const auto& s : scripts) args.push_back(!s.empty() && s[0] == '-' ? "./" + s : s);  // not an option
  return spawn(cwd.empty() ? nullptr : cwd.c_str(), std::move(args), log.empty() ? nullptr : log.c_str());
}

bool wait_ok(pid_t pid) {
  if (pid <= 0) return false;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool gnuplot_available() {
  static const bool ok = wait_ok(spawn(nullptr, {"gnuplot", "-e", "set terminal pngcairo"}, nullptr));
  return ok;
}

int run_gnuplot(const std::vector<std::string>& scripts, const std::string& log_path) {
  return wait_ok(spawn_gnuplot("", scripts, log_path)) ? 0 : -1;
}

}  // namespace tapegrad::train
