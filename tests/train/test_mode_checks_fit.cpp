// The mode checks (core/mode_checks.h) through fit() and evaluate(): FitResult::mode_issues
// counts a user's validation loop without eval(), FitOptions / EvalOptions::mode_checks pause
// or force them for the call, and fit's own validation (eval mode) raises nothing.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/warnings.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/train/fit.h>
#include "mode_checks_support.h"
#include "train/train_test_support.h"

using namespace tapegrad;
using namespace tapegrad::train;

namespace {

using Capture = ModeChecksCapture;

// The user's own validation at each epoch's end: under NoGradGuard, but eval() forgotten.
struct TrainModeValidation : Callback {
  const data::Dataset* val;
  explicit TrainModeValidation(const data::Dataset* v) : val(v) {}
  std::string name() const override { return "train_mode_validation"; }
  void on_epoch_end(TrainState& st) override {
    NoGradGuard ng;
    (*st.model)(val->X);
  }
};

struct Setup : train_test::BlobsSetup {
  Setup() : BlobsSetup(120, 60, 30) {}
  FitResult fit(const FitOptions& o, bool mistake) {
    std::vector<CallbackPtr> cbs;
    if (mistake) cbs.push_back(std::make_shared<TrainModeValidation>(&val_ds));
    return train::fit(*model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o, cbs);
  }
  // `epochs` epochs with fit's own validation on val_ds, and the user's mistake or not.
  FitResult fit_validated(int epochs, bool mistake) {
    FitOptions o;
    o.epochs = epochs;
    o.validation = &val_ds;
    return fit(o, mistake);
  }
};

}  // namespace

TEST_CASE("fit reports the mode issues of a validation loop without eval()", "[train][mode_checks]") {
  Capture c(ModeChecks::Warn);
  Setup s;
  const FitResult r = s.fit_validated(3, true);
  REQUIRE(r.mode_issues.size() == 1);
  CHECK(r.mode_issues.at("bn_train_no_grad") == 3);
  REQUIRE(c.got.size() == 1);
  CHECK(c.got[0].message.find("BatchNorm1d(16) ran forward in train mode under NoGradGuard") != std::string::npos);
}

TEST_CASE("fit without mistakes reports no mode issue", "[train][mode_checks]") {
  Capture c(ModeChecks::Throw);
  Setup s;
  const FitResult r = s.fit_validated(2, false);
  CHECK(r.mode_issues.empty());
  CHECK(c.got.empty());
}

TEST_CASE("FitOptions mode_checks false pauses and true forces the checks for the call", "[train][mode_checks]") {
  Capture c(ModeChecks::Throw);
  Setup s;
  FitOptions o;
  o.epochs = 2;
  o.mode_checks = false;
  CHECK(s.fit(o, true).mode_issues.empty());
  set_mode_checks(ModeChecks::Off);
  o.mode_checks = true;
  const FitResult r = s.fit(o, true);
  CHECK(r.mode_issues.at("bn_train_no_grad") == 2);
  CHECK(c.got.size() == 1);
}

TEST_CASE("evaluate reports never-updated statistics unless its option pauses the checks", "[train][mode_checks]") {
  Capture c(ModeChecks::Warn);
  Setup s;  // never trained: its BatchNorm has initial statistics
  EvalOptions eo;
  eo.mode_checks = false;
  evaluate(*s.model, s.val_ds, eo);
  CHECK(mode_issue_count("never_updated_stats") == 0);
  evaluate(*s.model, s.val_ds);
  CHECK(mode_issue_count("never_updated_stats") == 1);
  REQUIRE(c.got.size() == 1);
  CHECK(c.got[0].kind == "never_updated_stats");
  CHECK(c.got[0].message.find("BatchNorm1d(16) ran forward in eval mode") != std::string::npos);
}
