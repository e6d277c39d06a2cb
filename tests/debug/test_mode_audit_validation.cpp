// ModeAudit's detectors for the two silent forms of the mode bug:
//  - validation in train mode with gradients enabled (the commonest form in PyTorch code):
//    a train-mode BatchNorm forward whose graph is freed without reaching backward();
//  - eval-mode inference on running statistics that were never updated (a weights-only
//    file loaded non-strictly);
// and where the warnings go (stderr by default, a handler, an spdlog sink; counted).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/random.h>
#include <tapegrad/debug/mode_audit.h>
#include <tapegrad/debug/warnings.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/sgd.h>
#include "debug/debug_test_support.h"

using namespace tapegrad;
using namespace tapegrad::debug;
using Catch::Matchers::Contains;
using debug_test::small_bn_net;

namespace {

Tensor randn(const Shape& s, std::uint64_t seed) {
  Generator g(seed);
  return tapegrad::randn(s, Dtype::Float32, g);
}

void train_step(layers::Module& net, optim::SGD& opt, const Tensor& x, const Tensor& y) {
  opt.zero_grad();
  Tensor loss = layers::mse_loss(net(x), y);
  loss.backward();
  opt.step();
}

// Collects the warnings given to it.
struct Collector {
  std::mutex mu;
  std::vector<Warning> got;
  WarningHandler handler() {
    return [this](const Warning& w) {
      std::lock_guard<std::mutex> l(mu);
      got.push_back(w);
    };
  }
};

}  // namespace

TEST_CASE("validation in train mode with gradients enabled is reported (bn_train_no_backward)",
          "[debug][mode_audit][reliability]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  auto net = small_bn_net();
  optim::SGD opt(net->parameters(), {.lr = 0.01});
  Collector warnings;
  ModeAuditOptions o;
  o.warning_handler = warnings.handler();
  ModeAudit audit(*net, o);
  const Tensor x = randn({8, 4}, 2), y = randn({8, 1}, 3);
  train_step(*net, opt, x, y);
  CHECK(audit.count(Issue::BnTrainNoBackward) == 0);  // its graph reached backward()

  // The bug: no eval(), no NoGradGuard; the loss is computed and printed, never backpropagated.
  const auto tracked = dynamic_cast<layers::BatchNorm1d&>(*(*net)[1]).batches_tracked();
  for (int i = 0; i < 3; ++i) {
    Tensor val_loss = layers::mse_loss((*net)(randn({8, 4}, 10 + i)), randn({8, 1}, 20 + i));
    (void)val_loss.item();
  }  // the graphs are freed here
  CHECK(dynamic_cast<layers::BatchNorm1d&>(*(*net)[1]).batches_tracked() == tracked + 3);  // the leak
  CHECK(audit.count(Issue::BnTrainNoBackward) == 3);
  REQUIRE_FALSE(audit.findings().empty());
  const ModeFinding f = audit.findings().back();
  CHECK(f.issue == Issue::BnTrainNoBackward);
  CHECK(f.module == "1");
  CHECK_THAT(f.message, Contains("'1' (BatchNorm1d)") && Contains("without backward()") && Contains("eval()"));
  REQUIRE(warnings.got.size() == 3);
  CHECK(warnings.got[0].kind == "bn_train_no_backward");
  CHECK(warnings.got[0].source == "mode_audit");

  // No false alarm: more training steps, then a correct evaluation.
  train_step(*net, opt, x, y);
  net->eval();
  {
    NoGradGuard ng;
    (void)(*net)(x);
  }
  net->train();
  train_step(*net, opt, x, y);
  CHECK(audit.count(Issue::BnTrainNoBackward) == 3);
  CHECK(audit.count(Issue::BnTrainNoGrad) == 0);
}

TEST_CASE("with throw_on_issue, a train-mode validation pass throws at the next forward", "[debug][mode_audit]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  auto net = small_bn_net();
  ModeAuditOptions o;
  o.log_limit = 0;
  o.throw_on_issue = true;
  ModeAudit audit(*net, o);
  { Tensor out = (*net)(randn({8, 4}, 4)); }  // freed without backward: recorded, cannot throw here
  CHECK(audit.count(Issue::BnTrainNoBackward) == 1);
  try {
    (void)(*net)(randn({8, 4}, 5));
    FAIL("no exception");
  } catch (const std::logic_error& e) {
    CHECK_THAT(std::string(e.what()), Contains("bn_train_no_backward"));
  }
}

TEST_CASE("eval-mode inference on never-updated running statistics is reported once per layer",
          "[debug][mode_audit][reliability]") {
  tapegrad::ModeChecksPause pause;  // the audit's detectors are tested on deliberate mode bugs
  // A weights-only state (no buffers) loaded non-strictly into a fresh net: running_mean 0,
  // running_var 1, num_batches_tracked 0.
  auto trained = small_bn_net(7);
  {
    optim::SGD opt(trained->parameters(), {.lr = 0.01});
    for (int i = 0; i < 3; ++i) train_step(*trained, opt, randn({8, 4}, 30 + i), randn({8, 1}, 40 + i));
  }
  layers::StateDict weights_only;
  for (const auto& [k, v] : trained->named_parameters()) weights_only.insert(k, v);
  auto loaded = small_bn_net(8);
  const layers::LoadResult r = loaded->load_state_dict(weights_only, false);
  CHECK(r.missing_keys.size() == 3);

  Collector warnings;
  ModeAuditOptions o;
  o.warning_handler = warnings.handler();
  ModeAudit audit(*loaded, o);
  loaded->eval();
  NoGradGuard ng;
  (void)(*loaded)(randn({5, 4}, 50));
  (void)(*loaded)(randn({5, 4}, 51));
  CHECK(audit.count(Issue::NeverUpdatedStats) == 1);  // once, at the first eval forward
  REQUIRE(warnings.got.size() == 1);
  CHECK(warnings.got[0].kind == "never_updated_stats");
  CHECK_THAT(warnings.got[0].message, Contains("'1' (BatchNorm1d)") && Contains("num_batches_tracked 0") &&
                                          Contains("non-strictly"));

  // The trained net, evaluated the same way: quiet.
  ModeAudit audit2(*trained, o);
  trained->eval();
  (void)(*trained)(randn({5, 4}, 52));
  CHECK(audit2.count(Issue::NeverUpdatedStats) == 0);
}

TEST_CASE("warnings go to stderr by default, never stdout, and can be routed and counted",
          "[debug][mode_audit][warnings]") {
  tapegrad::ModeChecksPause pause;  // the audit's own warnings are counted here
  auto net = small_bn_net();
  net->eval();
  const std::int64_t count0 = warning_count();

  // Default route: the "tapegrad" logger on stderr. Capture fds 1 and 2.
  std::FILE* out_file = std::tmpfile();
  std::FILE* err_file = std::tmpfile();
  REQUIRE(out_file);
  REQUIRE(err_file);
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = ::dup(1), saved_err = ::dup(2);
  ::dup2(::fileno(out_file), 1);
  ::dup2(::fileno(err_file), 2);
  {
    ModeAudit audit(*net);
    NoGradGuard ng;
    (void)(*net)(randn({3, 4}, 60));  // never-updated statistics
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  ::close(saved_out);
  ::close(saved_err);
  auto read_all = [](std::FILE* f) {
    std::rewind(f);
    std::string s;
    for (int c; (c = std::fgetc(f)) != EOF;) s.push_back(static_cast<char>(c));
    std::fclose(f);
    return s;
  };
  const std::string out = read_all(out_file), err = read_all(err_file);
  CHECK(out.empty());
  CHECK_THAT(err, Contains("[tapegrad] [warning] mode audit [never_updated_stats]"));
  CHECK(warning_count() == count0 + 1);

  // A process-wide handler.
  Collector c;
  set_warning_handler(c.handler());
  {
    ModeAudit audit(*net);
    NoGradGuard ng;
    (void)(*net)(randn({3, 4}, 61));
    CHECK(audit.counts().warnings == 1);
  }
  set_warning_handler({});
  CHECK(c.got.size() == 1);
  CHECK(warning_count() == count0 + 2);

  // An spdlog sink on the logger of the default route.
  std::ostringstream os;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(os);
  auto logger = warning_logger();
  const auto old_sinks = logger->sinks();
  logger->sinks() = {sink};
  {
    ModeAudit audit(*net);
    NoGradGuard ng;
    (void)(*net)(randn({3, 4}, 62));
  }
  logger->sinks() = old_sinks;
  CHECK_THAT(os.str(), Contains("never_updated_stats"));
  CHECK(warning_count() == count0 + 3);
}
