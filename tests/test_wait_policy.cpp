// prefer_passive_wait_policy: without OMP_WAIT_POLICY the program re-executes itself with
// OMP_WAIT_POLICY=passive, so libgomp's threads sleep instead of spinning. Checked in a
// child process that runs this binary's hidden probe case, which reports what libgomp itself
// shows (omp_display_env, OpenMP 5.1).
#include <catch2/catch.hpp>

#include <omp.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/wait_policy.h"

namespace {

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `tapegrad_tests "[.wait_policy_probe]"` with OMP_WAIT_POLICY unset (or set to
// `policy`) and returns what the probe wrote.
std::string run_probe(const char* policy) {
  char out[] = "/tmp/tapegrad_waitpolicy_XXXXXX";
  const int fd = ::mkstemp(out);
  REQUIRE(fd >= 0);
  ::close(fd);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (policy) ::setenv("OMP_WAIT_POLICY", policy, 1);
    else ::unsetenv("OMP_WAIT_POLICY");
    ::setenv("TAPEGRAD_WAIT_PROBE_OUT", out, 1);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    char* argv[] = {const_cast<char*>("tapegrad_tests"), const_cast<char*>("[.wait_policy_probe]"), nullptr};
    ::execv("/proc/self/exe", argv);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string text = slurp(out);
  ::unlink(out);
  return text;
}

}  // namespace

TEST_CASE("wait policy probe (run by the test below in a child process)", "[.wait_policy_probe]") {
  const char* out = std::getenv("TAPEGRAD_WAIT_PROBE_OUT");
  REQUIRE(out != nullptr);
  // What main() does first: re-executes this probe with OMP_WAIT_POLICY=passive if unset.
  char* argv[] = {const_cast<char*>("tapegrad_tests"), const_cast<char*>("[.wait_policy_probe]"), nullptr};
  tapegrad::prefer_passive_wait_policy(argv);
  const int fd = ::open(out, O_WRONLY | O_TRUNC);
  REQUIRE(fd >= 0);
  std::fflush(stderr);
  ::dup2(fd, 2);
  omp_display_env(0);  // libgomp's own view of its settings
  std::fflush(stderr);
  ::close(fd);
}

TEST_CASE("OpenMP threads sleep instead of spinning unless the user chose otherwise", "[parallel][wait_policy]") {
  const std::string unset = run_probe(nullptr);
  INFO(unset);
  CHECK(unset.find("OMP_WAIT_POLICY = 'PASSIVE'") != std::string::npos);
  const std::string active = run_probe("active");  // the user's choice wins
  INFO(active);
  CHECK(active.find("OMP_WAIT_POLICY = 'ACTIVE'") != std::string::npos);
}
