// claims: the variance-shift formula on Dropout -> BatchNorm with synthetic inputs, the ICS
// and landscape probes leave training unchanged, CSVs byte-identical across thread counts.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "../../../tests/skip_support.h"
#include "bn_moments.h"
#include "deep_linear.h"
#include "kit/gnuplot.h"
#include "kit/temp_dir.h"
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/sequential.h>

using namespace tapegrad;

namespace {
// Dropout(p) -> BatchNorm1d (cumulative average) trained on x ~ N(mu, 1): running_var / real_var.
double shift_ratio(double p, double mu) {
  Generator g(11), dg(12);
  auto net = std::make_shared<layers::Sequential>();
  net->push_back(std::make_shared<layers::Dropout>(p, &dg));
  layers::BatchNormOptions bo;
  bo.momentum = std::nullopt;
  auto bn = std::make_shared<layers::BatchNorm1d>(8, bo);
  net->push_back(bn);
  const Tensor x = randn({20000, 8}, Dtype::Float32, g) + mu;
  net->train();
  {
    NoGradGuard ng;
    ModeChecksPause pause;  // train-mode forwards under no-grad: the running_var they leave is measured
    for (std::int64_t b = 0; b < 20000; b += 500) (*net)(narrow(x, 0, b, 500));
  }
  const auto real = claims::eval_input_moments(*net, {bn.get()}, x);
  const auto rv = bn->running_var.to_vector();
  double s = 0;
  for (std::size_t c = 0; c < 8; ++c) s += rv[c] / real[0].var[c];
  return s / 8;
}
}  // namespace

TEST_CASE("Dropout before BN inflates running_var by 1/q + (mu^2/sigma^2)(1/q - 1)", "[claims][variance_shift]") {
  CHECK(shift_ratio(0.5, 0.0) == Approx(2.0).epsilon(0.03));
  CHECK(shift_ratio(0.3, 0.0) == Approx(1.0 / 0.7).epsilon(0.03));
  // mean 1, variance 1: (1 + 1)/0.5 - 1 = 3
  CHECK(shift_ratio(0.5, 1.0) == Approx(3.0).epsilon(0.03));
}

TEST_CASE("eval_input_moments restores modes and refuses a BN it never reaches", "[claims]") {
  Generator g(1);
  auto net = std::make_shared<layers::Sequential>();
  auto bn = std::make_shared<layers::BatchNorm1d>(3);
  net->push_back(bn);
  auto other = std::make_shared<layers::BatchNorm1d>(3);
  net->train();
  const Tensor x = randn({10, 3}, Dtype::Float32, g);
  const auto m = claims::eval_input_moments(*net, {bn.get()}, x, 4);
  CHECK(net->is_training());
  REQUIRE(m[0].n == 10);
  CHECK_THROWS_WITH(claims::eval_input_moments(*net, {other.get()}, x), Catch::Contains("saw 0 values per channel"));
}

namespace {
// A small deep linear network: `depth` layers, `samples` samples, `steps` GD steps at lr 1e-4
// probed every 5, `seeds` seeds, one thread.
claims::LinearOptions small_linear(int depth, std::int64_t samples, int steps, int seeds) {
  claims::LinearOptions o;
  o.depth = depth;
  o.samples = samples;
  o.steps = steps;
  o.every = 5;
  o.seeds = seeds;
  o.lr = 1e-4;
  o.threads = 1;
  return o;
}
}  // namespace

TEST_CASE("deep linear probes change nothing and the CSV does not depend on threads", "[claims][deep_linear]") {
  claims::LinearOptions o = small_linear(6, 64, 20, 2);
  o.grid = 3;
  const auto bare = claims::run_deep_linear(o, false, false);
  const auto probed = claims::run_deep_linear(o, true, true);
  REQUIRE(bare.runs.size() == 4);
  for (std::size_t k = 0; k < bare.runs.size(); ++k) {
    REQUIRE(bare.runs[k].loss.size() == 5);
    CHECK(bare.runs[k].loss == probed.runs[k].loss);  // bit-identical: the probes restore everything
    REQUIRE(probed.runs[k].ics.size() == 5);
    CHECK(probed.runs[k].ics[0].l2.size() == 5);  // layers 2..6
    for (double c : probed.runs[k].ics[2].cos) CHECK(c <= 1.0 + 1e-12);
    CHECK(bare.runs[k].loss.back().second < bare.runs[k].loss.front().second);  // it trains
  }
  o.threads = 2;
  const auto two = claims::run_deep_linear(o, true, true);
  CHECK(claims::ics_csv(two) == claims::ics_csv(probed));
  CHECK(claims::landscape_csv(two) == claims::landscape_csv(probed));
}

TEST_CASE("figure scripts name files relative to the output folder: any folder name works", "[claims][paths]") {
  namespace fs = std::filesystem;
  const auto r = claims::run_deep_linear(small_linear(4, 32, 10, 1), true, false);
  const studies::kit::TempDir tmp("claims_paths_test_");
  const fs::path base = tmp.path();
  // Each name once stopped the writer after the CSV (a newline) or could have run a command.
  for (const std::string name : {"new\nline", "it's $(touch PWNED) `touch PWNED`", "-dash_{x}^y"}) {
    INFO(name);
    const fs::path dir = base / name;
    const auto pngs = claims::write_ics(r, dir.string());
    CHECK(fs::exists(dir / "results.csv"));
    std::ifstream f(dir / "plots" / "ics.gp");
    REQUIRE(f.good());
    std::stringstream gp;
    gp << f.rdbuf();
    CHECK_THAT(gp.str(), Catch::Contains("set output 'ics.png'") && Catch::Contains("'plots/ics_0_plain.dat' using"));
    CHECK_THAT(gp.str(), !Catch::Contains(base.string()));  // no path of the folder in the script
    CHECK_THAT(gp.str(), Catch::Contains("set ylabel '||G - G''||\u2082'"));  // a Unicode subscript, not markup
    if (!studies::kit::gnuplot_available())
      TAPEGRAD_MISSING("gnuplot is not installed (gnuplot-nox, scripts/setup.sh): the figure is not checked");
    REQUIRE(pngs.size() == 1);
    CHECK(fs::file_size(dir / "ics.png") > 0);
  }
  for (const auto& e : fs::recursive_directory_iterator(base)) CHECK(e.path().filename() != "PWNED");
  CHECK_FALSE(fs::exists("PWNED"));
}
