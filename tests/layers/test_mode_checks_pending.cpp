// bn_train_no_backward's edges (core/mode_checks.h): a backward that throws disarms the check
// on its graph, and under Throw an error still pending when the program ends fails the
// process with status kPendingExitStatus and the message (the test runs itself as the child).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/layers/batch_norm.h>
#include "mode_checks_support.h"
#include "test_support.h"

extern char** environ;

using namespace tapegrad;
using namespace tapegrad::layers;

namespace {

Tensor batch(std::int64_t n, std::int64_t c, std::uint64_t seed) { return test::rand64({n, c}, seed).to(Dtype::Float32); }

// A loss over bn's output whose backward throws under anomaly mode before it reaches bn:
// sqrt'(0) = inf, times the upstream 0 of the zeroed output, is NaN.
Tensor loss_whose_backward_throws(BatchNorm1d& bn, const Tensor& x) {
  return sum(pow(sum(square(bn(x) * 0.0), {1}), 0.5));
}

}  // namespace

TEST_CASE("bn_train_no_backward: a backward that throws disarms the check on its graph", "[mode_checks][batchnorm]") {
  ModeChecksCapture c(ModeChecks::Throw);
  BatchNorm1d bn(5);
  const Tensor x = batch(6, 5, 11);
  {
    AnomalyModeGuard anomaly;
    Tensor loss = loss_whose_backward_throws(bn, x);
    CHECK_THROWS_AS(loss.backward(), std::runtime_error);
  }  // the graph is freed here, after the failed backward
  CHECK_NOTHROW(throw_pending_mode_issue());
  CHECK(mode_issue_count("bn_train_no_backward") == 0);
  {
    Tensor loss = loss_whose_backward_throws(bn, x);  // the same graph, no backward: reported
  }
  CHECK(mode_issue_count("bn_train_no_backward") == 1);
  CHECK_THROWS_WITH(throw_pending_mode_issue(), Catch::Contains("BatchNorm1d(5) ran forward in train mode"));
  CHECK(c.got.empty());
}

// The child: a train-mode forward whose graph is freed unreached, then the program ends.
TEST_CASE("mode checks child: ends with a pending bn_train_no_backward error", "[.mode_checks_pending_child]") {
  set_mode_checks(ModeChecks::Throw);
  BatchNorm1d bn(3);
  { const Tensor y = bn(batch(4, 3, 12)); }
  std::exit(0);  // the exit handler turns the pending error into status 3
}

TEST_CASE("bn_train_no_backward: under Throw, an error pending when the program ends is exit status 3",
          "[mode_checks][batchnorm]") {
  char tmpl[] = "/tmp/tapegrad_pending_XXXXXX";
  const int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  close(fd);
  const std::string err_path = tmpl;
  std::string self = "/proc/self/exe";
  std::string filter = "[.mode_checks_pending_child]";
  std::vector<char*> argv{self.data(), filter.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  std::stringstream err;
  err << std::ifstream(err_path).rdbuf();
  std::remove(err_path.c_str());
  INFO("child stderr: " << err.str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == kPendingExitStatus);
  CHECK_THAT(err.str(), Catch::Contains("pending when the program ended") &&
                            Catch::Contains("BatchNorm1d(3) ran forward in train mode with gradients on"));
}
