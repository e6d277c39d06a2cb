// norm_study's option checks and summaries against impossible input:
// every option is checked before any data is read and named in the error; a norm whose runs
// all crashed says so instead of printing "mean from 1e+09 to -1e+09".
#include <catch2/catch.hpp>

#include <cmath>

#include "batch_size.h"
#include "gap.h"
#include "mode_bug_study.h"

using namespace normstudy;
using Catch::Matchers::Contains;

namespace {

template <class F>
std::string invalid_argument_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("WRONG TYPE: ") + e.what();
  }
  return "NO EXCEPTION";
}

}  // namespace

TEST_CASE("batch-size options are checked up front, naming the option", "[norm_study][reliability]") {
  BatchSizeOptions o;
  auto bad = [&](auto change) {
    BatchSizeOptions x = o;
    change(x);
    return invalid_argument_of([&] { check_batch_size_options(x); });
  };
  CHECK(invalid_argument_of([&] { check_batch_size_options(o); }) == "NO EXCEPTION");
  // --ref-batch 0 made the lr infinite; -8 made it negative and the optimizer complained
  CHECK_THAT(bad([](auto& x) { x.ref_batch = 0; }), Contains("--ref-batch") && Contains("got 0"));
  CHECK_THAT(bad([](auto& x) { x.ref_batch = -8; }), Contains("--ref-batch") && Contains("-8"));
  CHECK(bad([](auto& x) { x.ref_batch = -8; }).find("SGD") == std::string::npos);
  // --test-size -1 and 1000000 silently used the 10,000 images
  CHECK_THAT(bad([](auto& x) { x.test_size = -1; }), Contains("--test-size") && Contains("-1"));
  CHECK_THAT(bad([](auto& x) { x.test_size = 1000000; }), Contains("--test-size") && Contains("1000000"));
  CHECK_THAT(bad([](auto& x) { x.train_size = 0; }), Contains("--train-size"));
  CHECK_THAT(bad([](auto& x) { x.base_lr = -0.1; }), Contains("--base-lr"));
  CHECK_THAT(bad([](auto& x) { x.base_lr = std::nan(""); }), Contains("--base-lr"));
  CHECK_THAT(bad([](auto& x) { x.bn_momentum = 1.5; }), Contains("--bn-momentum"));
  CHECK_THAT(bad([](auto& x) { x.ms = {4, 1}; }), Contains("--ms") && Contains("got 1"));
  CHECK_THAT(bad([](auto& x) { x.groups = 0; }), Contains("--groups"));
  // a --groups that does not divide a width was refused only when GroupNorm was built, after
  // the other norms' runs; --ms past --train-size only once the data was read, naming neither
  CHECK(bad([](auto& x) { x.groups = 7; }) ==
        "--groups: expected a divisor of every GroupNorm width (mlp hidden 256,128), got 7 (width 256)");
  CHECK(bad([](auto& x) { x.groups = 7; x.kinds = {NormKind::Batch}; }) == "NO EXCEPTION");
  CHECK(bad([](auto& x) { x.model = "cnn"; x.groups = 4; x.head = 6; }) ==
        "--groups: expected a divisor of every GroupNorm width (--channels 8,16 --head 6), got 4 (width 6)");
  CHECK(bad([](auto& x) { x.ms = {2, 100000}; }) ==
        "--ms/--replicas: global batch 4·100000 exceeds --train-size 20000");
  CHECK_THAT(bad([](auto& x) { x.head = -2; }), Contains("--head"));
  CHECK_THAT(bad([](auto& x) { x.channels = {8, 0}; }), Contains("--channels"));
  CHECK_THAT(bad([](auto& x) { x.threads = 0; }), Contains("--threads"));
}

TEST_CASE("train-eval-gap and mode-bugs options are checked, naming the option", "[norm_study][reliability]") {
  GapOptions g;
  CHECK(invalid_argument_of([&] { check_gap_options(g); }) == "NO EXCEPTION");
  g.epochs = 0;
  CHECK_THAT(invalid_argument_of([&] { check_gap_options(g); }), Contains("--epochs") && Contains("got 0"));
  g = {};
  g.lr = 0;
  CHECK_THAT(invalid_argument_of([&] { check_gap_options(g); }), Contains("--lr"));
  g = {};
  g.drop_epoch = -1;
  CHECK_THAT(invalid_argument_of([&] { check_gap_options(g); }), Contains("--drop-epoch"));
  // a drop at or after the last epoch never happened, while the summary said it did
  g = {};
  g.epochs = 3;
  g.drop_epoch = 50;
  CHECK(invalid_argument_of([&] { check_gap_options(g); }) == "--drop-epoch: expected 0 (never) or less than --epochs 3, got 50");
  g.drop_epoch = 3;
  CHECK_THAT(invalid_argument_of([&] { check_gap_options(g); }), Contains("got 3"));
  g.drop_epoch = 0;
  CHECK(invalid_argument_of([&] { check_gap_options(g); }) == "NO EXCEPTION");
  g.drop_epoch = 2;
  CHECK(invalid_argument_of([&] { check_gap_options(g); }) == "NO EXCEPTION");
  g = {};
  g.test_size = -1;
  CHECK_THAT(invalid_argument_of([&] { check_gap_options(g); }), Contains("--test-size"));

  BugOptions b;
  CHECK(invalid_argument_of([&] { check_bug_options(b); }) == "NO EXCEPTION");
  b.train_size = -5;
  CHECK_THAT(invalid_argument_of([&] { check_bug_options(b); }), Contains("--train-size") && Contains("-5"));
}

TEST_CASE("a norm whose runs all crashed is reported as such in the summary", "[norm_study][reliability]") {
  BatchSizeResult r;
  r.options.kinds = {NormKind::Layer, NormKind::None};
  r.options.ms = {2, 8};
  r.options.seeds = 1;
  for (NormKind k : r.options.kinds)
    for (auto m : r.options.ms) {
      BatchSizeRun run;
      run.kind = k;
      run.m = m;
      run.crashed = k == NormKind::None;  // every 'none' run diverged
      run.test_accuracy = run.crashed ? std::nan("") : 0.8;
      r.runs.push_back(run);
    }
  const std::string md = batch_size_summary(r);
  CHECK_THAT(md, Contains("- none: all runs crashed"));
  CHECK(md.find("1e+09") == std::string::npos);
  CHECK_THAT(md, Contains("- layer: mean from 80"));
}
