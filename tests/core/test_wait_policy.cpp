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
#include <vector>

extern char** environ;

#include <tapegrad/core/wait_policy.h>

namespace {

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `tests_core "[.wait_policy_probe]"` with OMP_WAIT_POLICY unset (or set to
// `policy`) and returns what the probe wrote.
std::string run_probe(const char* policy) {
  char out[] = "/tmp/tapegrad_waitpolicy_XXXXXX";
  const int fd = ::mkstemp(out);
  REQUIRE(fd >= 0);
  ::close(fd);
  // Everything the child needs is built before fork (the child only opens, dups and execs).
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("OMP_WAIT_POLICY=", 0) != 0 && std::string(*e).rfind("TAPEGRAD_WAIT_PROBE_OUT=", 0) != 0)
      env_text.emplace_back(*e);
  if (policy) env_text.push_back(std::string("OMP_WAIT_POLICY=") + policy);
  env_text.push_back(std::string("TAPEGRAD_WAIT_PROBE_OUT=") + out);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>("tests_core"), const_cast<char*>("[.wait_policy_probe]"), nullptr};
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::execve("/proc/self/exe", argv, envp.data());
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
  char* argv[] = {const_cast<char*>("tests_core"), const_cast<char*>("[.wait_policy_probe]"), nullptr};
  tapegrad::prefer_passive_wait_policy(argv);
  const int fd = ::open(out, O_WRONLY | O_TRUNC);
  REQUIRE(fd >= 0);
  std::fflush(stderr);
  ::dup2(fd, 2);
  omp_display_env(1);  // libgomp's own view of its settings (verbose: with GOMP_SPINCOUNT)
  std::fflush(stderr);
  ::close(fd);
}

TEST_CASE("OpenMP threads sleep instead of spinning unless the user chose otherwise", "[parallel][wait_policy]") {
  const std::string unset = run_probe(nullptr);
  INFO(unset);
  // libgomp prints 'PASSIVE' for an unset policy too; the spin count tells them apart
  // (0 when passive, 300000 when unset)
  CHECK(unset.find("OMP_WAIT_POLICY = 'PASSIVE'") != std::string::npos);
  CHECK(unset.find("GOMP_SPINCOUNT = '0'") != std::string::npos);
  const std::string active = run_probe("active");  // the user's choice wins
  INFO(active);
  CHECK(active.find("OMP_WAIT_POLICY = 'ACTIVE'") != std::string::npos);
}
