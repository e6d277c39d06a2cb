// Tests of the BN-experiment engine: determinism, outputs, crash counting, evaluation policies.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/gradcheck.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/parallel.h>
#include "../../../tests/skip_support.h"
#include "kit/data.h"
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/clamp.h>
#include "report.h"
#include "kit/run.h"
#include "kit/stats.h"
#include "kit/temp_dir.h"
#include "study.h"

using namespace bnexp;
using namespace studies::kit;
using tapegrad::Tensor;
using tapegrad::models::Norm;
namespace fs = std::filesystem;

namespace {

StudyOptions small_options() {
  StudyOptions o;
  o.epochs = 3;
  o.seeds = 2;
  o.seed = 7;
  return o;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A not yet existing folder `name` inside this test run's private temp folder.
fs::path temp_dir(const std::string& name) {
  static const studies::kit::TempDir root("bn_experiments_test_");
  return root / name;
}

std::vector<double> values(const Tensor& t) { return t.to_vector(); }

RunConfig bn_config(std::vector<EvalPolicy> policies) {
  RunConfig c;
  c.sizes = {50, 16, 8, 1};
  c.norm = Norm::Batch;
  c.epochs = 3;
  c.policies = std::move(policies);
  c.seed = 3;
  return c;
}

}  // namespace

TEST_CASE("chapter data follows y = sin(2 x0) + cos(x1) + 0.1 noise", "[bn_experiments]") {
  const Dataset d = make_chapter_data(0);
  REQUIRE(d.x_train.shape() == tapegrad::Shape{200, 50});
  REQUIRE(d.y_train.shape() == tapegrad::Shape{200, 1});
  REQUIRE(d.x_test.shape() == tapegrad::Shape{100, 50});
  REQUIRE(d.y_test.shape() == tapegrad::Shape{100, 1});
  // The residual of the noiseless target is the 0.1·N(0,1) noise: over 300 samples its
  // sample std lies well inside [0.08, 0.12] and its mean inside ±0.03 (3 standard errors).
  std::vector<double> res;
  const auto add = [&](const Tensor& x, const Tensor& y) {
    const auto xv = values(x), yv = values(y);
    for (std::size_t i = 0; i < yv.size(); ++i)
      res.push_back(yv[i] - std::sin(2.0 * xv[i * 50]) - std::cos(xv[i * 50 + 1]));
  };
  add(d.x_train, d.y_train);
  add(d.x_test, d.y_test);
  const MeanStd m = mean_std(res);
  CHECK(std::abs(m.mean) < 0.03);
  CHECK(m.std > 0.08);
  CHECK(m.std < 0.12);
  // Same seed, same bits; another seed, other data.
  CHECK(values(make_chapter_data(0).x_test) == values(d.x_test));
  CHECK(values(make_chapter_data(1).x_train) != values(d.x_train));
  CHECK_THROWS_WITH(make_chapter_data(0, 200, 100, 1), Catch::Contains("need >= 2 features, got 1"));
}

TEST_CASE("fmt_mean_std prints every study's mean plus-minus std format", "[bn_experiments]") {
  const MeanStd m = mean_std({0.5, 0.75});  // mean 0.625, std 0.1767766952966369
  CHECK(fmt_mean_std(m) == "0.62 ± 0.18");
  CHECK(fmt_mean_std(m, {100, 1}) == "62.5 ± 17.7");
  CHECK(fmt_mean_std(m, {1, 2, Notation::Fixed, true}) == "+0.62 ± 0.18");
  CHECK(fmt_mean_std(m, {1, 1, Notation::Scientific}) == "6.2e-01 ± 1.8e-01");
  CHECK(fmt_mean_std(m, {1, 4, Notation::General}) == fmt4(m.mean) + " ± " + fmt4(m.std));
  CHECK(fmt_mean_std(mean_std({})) == "—");
}

TEST_CASE("TempDir is a private folder removed with its contents", "[bn_experiments]") {
  fs::path kept;
  {
    const studies::kit::TempDir dir("kit_temp_dir_test_");
    kept = dir.path();
    REQUIRE(fs::is_directory(kept));
    CHECK(kept.filename().string().rfind("kit_temp_dir_test_", 0) == 0);
    CHECK(kept.parent_path() == fs::temp_directory_path());
    CHECK((fs::status(kept).permissions() & fs::perms::all) == fs::perms::owner_all);
    std::ofstream(dir / "a.txt") << "x";
    CHECK(fs::exists(dir / "a.txt"));
  }
  CHECK_FALSE(fs::exists(kept));
}

TEST_CASE("summary statistics match numpy", "[bn_experiments]") {
  // np.mean([1,2,3,4]) = 2.5, np.std([1,2,3,4], ddof=1) = 1.2909944487358056
  const MeanStd m = mean_std({1, 2, 3, 4});
  CHECK(m.mean == Approx(2.5));
  CHECK(m.std == Approx(1.2909944487358056));
  CHECK(m.n == 4);
  CHECK(mean_std({3.0}).std == 0.0);
  CHECK(std::isnan(mean_std({}).mean));
  CHECK(epochs_to_reach({1.0, 0.5, 0.09, 0.2}, 0.1) == 3);
  CHECK(epochs_to_reach({1.0, 0.5}, 0.1) == 0);
  CHECK(rise_fraction({1.0, 0.5, 0.6, 0.4, 0.45}) == Approx(0.5));
  CHECK(rise_fraction({1.0, 0.9, 0.8}) == 0.0);
  // A crashed curve (shorter) is left out of the band when asked.
  std::vector<double> a{1, 2, 3}, b{3, 4}, c{100};
  const Band bd = band({&a, &b, &c}, {false, false, true}, true);
  REQUIRE(bd.mean.size() == 3);
  CHECK(bd.mean[0] == Approx(2.0));
  CHECK(bd.std[0] == Approx(std::sqrt(2.0)));
  CHECK(bd.count[2] == 1);
}

TEST_CASE("the Clamp module matches torch.clamp", "[bn_experiments]") {
  // torch.clamp(x, -10, 10) for x = [-12, -10, 3, 10, 11]: y = [-10, -10, 3, 10, 10],
  // and y.backward(ones) gives x.grad = [0, 1, 1, 1, 0] (bounds inclusive).
  tapegrad::layers::Clamp clip(-10, 10);
  Tensor x = Tensor::from_vector({-12, -10, 3, 10, 11}, {5}, tapegrad::Dtype::Float64);
  x.requires_grad_();
  Tensor y = clip(x);
  CHECK(values(y) == std::vector<double>{-10, -10, 3, 10, 10});
  tapegrad::sum(y).backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 1, 1, 1, 0});
  CHECK_THROWS_WITH(tapegrad::layers::Clamp(1, -1), Catch::Contains("expected lo <= hi, got lo=1, hi=-1"));
}

TEST_CASE("MLP options: norm choice, activation clip, shared Linear init", "[bn_experiments]") {
  using tapegrad::models::MLP;
  using tapegrad::models::MLPOptions;
  auto types = [](MLP& m) {
    std::string s;
    for (std::size_t i = 0; i < m.size(); ++i) s += m[i]->type_name() + " ";
    return s;
  };
  tapegrad::Generator g1(5), g2(5);
  MLPOptions bn;
  bn.norm = Norm::Batch;
  bn.act_clip = 10.0;
  MLP a({4, 8, 1}, bn, g1);
  CHECK(types(a) == "Linear BatchNorm1d ReLU Clamp Linear ");
  MLP b({4, 8, 1}, {}, g2);
  CHECK(types(b) == "Linear ReLU Linear ");
  // The same seed gives both nets the same Linear weights: only the norm differs.
  CHECK(values(a.state_dict().at("0.weight")) == values(b.state_dict().at("0.weight")));
  CHECK(values(a.state_dict().at("4.weight")) == values(b.state_dict().at("2.weight")));
  MLPOptions ln;
  ln.norm = Norm::Layer;
  MLP d({4, 8, 1}, ln);
  CHECK(types(d) == "Linear LayerNorm ReLU Linear ");
  MLPOptions gn;
  gn.norm = Norm::Group;
  MLP e({4, 8, 1}, gn);
  CHECK(types(e) == "Linear GroupNorm ReLU Linear ");
  gn.groups = 3;
  CHECK_THROWS_WITH(MLP({4, 8, 1}, gn), Catch::Contains("width 8 to be divisible by groups=3"));
  MLPOptions bad;
  bad.act_clip = -1.0;
  CHECK_THROWS_WITH(MLP({4, 8, 1}, bad), Catch::Contains("act_clip must be > 0"));
  CHECK_THROWS_WITH(tapegrad::models::parse_norm("batchnorm"), Catch::Contains("expected none, batch, layer or group"));
}

TEST_CASE("same seed gives a byte-identical CSV, whatever the thread count", "[bn_experiments]") {
  StudyOptions o = small_options();
  o.policies = std::vector<EvalPolicy>{EvalPolicy::Eval, EvalPolicy::Train};
  const std::string one = csv_text(run_study({"convergence", "learning-rate"}, o));
  o.threads = 2;
  const StudyResult s2 = run_study({"convergence", "learning-rate"}, o);
  CHECK(csv_text(s2) == one);
  const fs::path d1 = temp_dir("det1"), d2 = temp_dir("det2");
  write_outputs(s2, d1.string());
  write_outputs(s2, d2.string());
  CHECK(slurp(d1 / "results.csv") == one);
  CHECK(slurp(d1 / "summary.md") == slurp(d2 / "summary.md"));
  // A different seed changes the numbers.
  o.seed = 8;
  CHECK(csv_text(run_study({"convergence"}, o)) != csv_text(run_study({"convergence"}, small_options())));
}

TEST_CASE("a short run of every experiment writes every CSV column and figure", "[bn_experiments]") {
  StudyOptions o = small_options();
  o.epochs = 2;
  o.policies = std::vector<EvalPolicy>{EvalPolicy::Eval, EvalPolicy::Train};
  const StudyResult s = run_study(experiment_names(), o);
  // 2 nets x 1 lr + 2 nets x 4 lrs + 2 nets x 3 depths, 2 seeds each.
  REQUIRE(s.jobs.size() == (2 + 8 + 6) * 2u);
  const fs::path dir = temp_dir("short");
  const auto pngs = write_outputs(s, dir.string());

  std::istringstream csv(slurp(dir / "results.csv"));
  std::string line;
  std::getline(csv, line);
  CHECK(line == kCsvHeader);
  std::size_t rows = 0;
  std::set<std::string> experiments, policies, splits, depths;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string cell; std::getline(ls, cell, ',');) f.push_back(cell);
    REQUIRE(f.size() == 11);
    experiments.insert(f[0]);
    depths.insert(f[4]);
    CHECK(f[5] == "clean");
    policies.insert(f[6]);
    splits.insert(f[9]);
    CHECK(std::isfinite(std::stod(f[10])));
    ++rows;
  }
  // jobs x 2 policies x 2 epochs x 2 splits
  CHECK(rows == s.jobs.size() * 2 * 2 * 2);
  CHECK(experiments == std::set<std::string>{"convergence", "learning-rate", "depth"});
  CHECK(policies == std::set<std::string>{"eval", "train"});
  CHECK(splits == std::set<std::string>{"train", "test"});
  CHECK(depths == std::set<std::string>{"4", "5", "10", "15"});

  const std::string md = slurp(dir / "summary.md");
  CHECK(md.find("## depth — evaluation policy: train") != std::string::npos);
  CHECK(md.find("| batch_lr0.1_d4 | batch | 0.1 | 4 |") != std::string::npos);

  if (!gnuplot_available()) {
    CHECK(pngs.empty());
    TAPEGRAD_MISSING("gnuplot is not installed (gnuplot-nox, scripts/setup.sh): the figures are not checked");
  }
  for (const char* f : {"convergence_eval.png", "convergence_train.png", "learning-rate_eval.png",
                        "learning-rate_train.png", "depth_eval.png", "depth_train.png"}) {
    INFO(f);
    REQUIRE(fs::exists(dir / f));
    CHECK(fs::file_size(dir / f) > 1000);
    CHECK(slurp(dir / f).substr(1, 3) == "PNG");
  }
  CHECK(pngs.size() == 6);
}

TEST_CASE("a diverging run is counted as crashed and marked in the summary", "[bn_experiments]") {
  StudyOptions o = small_options();
  o.lrs = std::vector<double>{5.0};  // plain SGD at lr 5 overflows within the first epoch
  const StudyResult s = run_study({"learning-rate"}, o);
  for (const auto& r : s.results) {
    CHECK(r.crashed);
    CHECK(r.crash_epoch == 1);
    CHECK(r.epochs_done() == 1);  // training stopped at the crash
    CHECK(r.crash_reason.find("at epoch 1") != std::string::npos);
  }
  const auto sums = summarize(s);
  REQUIRE(sums.size() == 2);
  for (const auto& c : sums) {
    CHECK(c.runs == 2);
    CHECK(c.crashed == 2);
    CHECK(c.final_test.n == 0);  // crashed runs stay out of mean ± std
  }
  const std::string md = summary_markdown(s);
  CHECK(md.find("**2/2 CRASHED**") != std::string::npos);
  // A healthy lr crashes nothing.
  o.lrs = std::vector<double>{0.01};
  for (const auto& c : summarize(run_study({"learning-rate"}, o))) CHECK(c.crashed == 0);
  CHECK(is_crash_loss(std::nan("")));
  CHECK(is_crash_loss(INFINITY));
  CHECK(is_crash_loss(2e10));
  CHECK_FALSE(is_crash_loss(9e9));
}

TEST_CASE("train-policy evaluation changes BN running stats, eval-policy does not", "[bn_experiments]") {
  const Dataset d = make_chapter_data(3);
  RunResult r = train_run(bn_config({EvalPolicy::Eval}), d);
  auto& model = *r.model;
  auto* bn = dynamic_cast<tapegrad::layers::BatchNorm1d*>(model[1].get());
  REQUIRE(bn);
  // 3 epochs x 6 steps updated the statistics; eval-policy evaluation added nothing.
  CHECK(bn->batches_tracked() == 18);
  const auto mean0 = values(bn->running_mean), var0 = values(bn->running_var);

  const double le = evaluate(model, d.x_test, d.y_test, EvalPolicy::Eval);
  CHECK(values(bn->running_mean) == mean0);
  CHECK(values(bn->running_var) == var0);
  CHECK(bn->batches_tracked() == 18);
  CHECK(le == r.loss[0][1].back());

  const double lt = evaluate(model, d.x_test, d.y_test, EvalPolicy::Train);
  CHECK(bn->batches_tracked() == 19);
  CHECK(values(bn->running_mean) != mean0);
  CHECK(lt != le);
  CHECK(model.is_training());  // evaluate restores the mode it found

  // The chapter's run: its evaluations moved the running stats (2 per epoch), but the
  // parameters follow the same trajectory, because train-mode forwards use batch stats.
  RunResult rt = train_run(bn_config({EvalPolicy::Train}), d);
  auto* bnt = dynamic_cast<tapegrad::layers::BatchNorm1d*>((*rt.model)[1].get());
  CHECK(bnt->batches_tracked() == 18 + 3 * 2);
  CHECK(values(bnt->running_mean) != mean0);
  CHECK(values(rt.model->state_dict().at("0.weight")) == values(r.model->state_dict().at("0.weight")));
  CHECK(values(bnt->weight) == values(bn->weight));

  // Both policies in one run reproduce each single-policy run exactly.
  RunResult both = train_run(bn_config({EvalPolicy::Eval, EvalPolicy::Train}), d);
  for (int s = 0; s < 2; ++s) {
    CHECK(both.loss[0][s] == r.loss[0][s]);
    CHECK(both.loss[1][s] == rt.loss[0][s]);
  }
  CHECK(both.loss[0][1] != both.loss[1][1]);

  // Without BN the two policies agree.
  RunConfig plain = bn_config({EvalPolicy::Eval, EvalPolicy::Train});
  plain.norm = Norm::None;
  RunResult p = train_run(plain, d);
  CHECK(p.loss[0][0] == p.loss[1][0]);
  CHECK(p.loss[0][1] == p.loss[1][1]);
}

TEST_CASE("presets resolve to the chapter's and the clean settings", "[bn_experiments]") {
  StudyOptions o;
  o.preset = "chapter";
  Resolved r = resolve(o);
  CHECK(r.lrs == std::vector<double>{0.001, 0.01, 0.05});
  CHECK(r.grad_clip == 5.0);
  CHECK(r.act_clip == 10.0);
  CHECK(r.policies == std::vector<EvalPolicy>{EvalPolicy::Train});
  // The chapter's plain depth nets run without gradient clipping; every other net clips.
  for (const auto& j : make_jobs("depth", o)) CHECK(j.run.grad_clip.has_value() == (j.run.norm == Norm::Batch));
  for (const auto& j : make_jobs("convergence", o)) CHECK(j.run.grad_clip == 5.0);
  CHECK(tapegrad::layers::momentum_from_decay(0.99) == Approx(o.bn_momentum));
  o.preset = "clean";
  r = resolve(o);
  CHECK(r.lrs == std::vector<double>{0.001, 0.01, 0.05, 0.1});
  CHECK_FALSE(r.grad_clip);
  CHECK_FALSE(r.act_clip);
  CHECK(r.policies == std::vector<EvalPolicy>{EvalPolicy::Eval});
  o.grad_clip = 2.0;
  for (const auto& j : make_jobs("depth", o)) CHECK(j.run.grad_clip == 2.0);
  o.preset = "textbook";
  CHECK_THROWS_WITH(resolve(o), Catch::Contains("expected chapter or clean"));
  // the CLI's names, not the engine's: a batch beyond the 200 training samples, a loss target
  // no MSE can reach
  StudyOptions big = small_options();
  big.batch = 99999999999;
  CHECK_THROWS_WITH(resolve(big), Catch::Contains("--batch: expected 2 to 200 (the chapter's 200 training samples), got 99999999999"));
  for (double t : {-1.0, 0.0, std::numeric_limits<double>::infinity()}) {
    StudyOptions bad = small_options();
    bad.target_loss = t;
    CHECK_THROWS_WITH(resolve(bad), Catch::Contains("--target-loss: expected a finite number > 0"));
  }
  CHECK_THROWS_WITH(make_jobs("width", small_options()), Catch::Contains("unknown experiment 'width'"));
}

TEST_CASE("a saved net reloads and reproduces its eval loss", "[bn_experiments]") {
  StudyOptions o = small_options();
  o.seeds = 1;
  const StudyResult s = run_study({"convergence"}, o);
  const fs::path dir = temp_dir("save");
  const auto paths = save_models(s, dir.string());
  REQUIRE(paths.size() == 2);
  const Dataset d = make_chapter_data(s.jobs[0].run.seed);
  // Runs are single-threaded (run_study); evaluate the same way to compare bits.
  const int before = tapegrad::get_num_threads();
  tapegrad::set_num_threads(1);
  for (std::size_t i = 0; i < s.jobs.size(); ++i) {
    const RunConfig& c = s.jobs[i].run;
    CHECK(fs::path(paths[i]).filename().string() == "convergence_" + s.jobs[i].config + "_seed7.safetensors");
    tapegrad::Generator other(12345);  // different initial weights: only the file restores the net
    tapegrad::models::MLP fresh(c.sizes, mlp_options(c), other);
    tapegrad::layers::load(fresh, paths[i]);
    CHECK(evaluate(fresh, d.x_test, d.y_test, EvalPolicy::Eval) == s.results[i].loss[0][1].back());
    CHECK(evaluate(fresh, d.x_train, d.y_train, EvalPolicy::Eval) == s.results[i].loss[0][0].back());
  }
  tapegrad::set_num_threads(before);
}

TEST_CASE("gradient and activation clipping act only when they bind", "[bn_experiments]") {
  const Dataset d = make_chapter_data(4);
  RunConfig c = bn_config({EvalPolicy::Eval});
  const RunResult base = train_run(c, d);
  RunConfig loose = c;
  loose.grad_clip = 1e9;
  loose.act_clip = 1e9;
  const RunResult same = train_run(loose, d);
  CHECK(same.loss[0][0] == base.loss[0][0]);
  CHECK(same.loss[0][1] == base.loss[0][1]);
  RunConfig tight_grad = c;
  tight_grad.grad_clip = 1e-4;
  CHECK(train_run(tight_grad, d).loss[0][0] != base.loss[0][0]);
  RunConfig tight_act = c;
  tight_act.act_clip = 0.05;
  CHECK(train_run(tight_act, d).loss[0][0] != base.loss[0][0]);
}

TEST_CASE("gnuplot strings are single-quoted with quotes doubled; newlines refused", "[bn_experiments][paths]") {
  CHECK(gnuplot_quote("plots/a.dat") == "'plots/a.dat'");
  CHECK(gnuplot_quote("it's") == "'it''s'");
  CHECK(gnuplot_quote("x'; touch P; echo '") == "'x''; touch P; echo '''");
  CHECK(gnuplot_quote("`touch Q` $(touch R) @m \"q\"") == "'`touch Q` $(touch R) @m \"q\"'");
  CHECK_THROWS_WITH(gnuplot_quote("a\nb"), Catch::Contains("newline"));
}

TEST_CASE("hostile output folders: figures are written and nothing is executed", "[bn_experiments][paths]") {
  if (!gnuplot_available()) TAPEGRAD_MISSING("gnuplot is not installed (gnuplot-nox, scripts/setup.sh): the figures are not checked");
  StudyOptions o = small_options();
  o.epochs = 2;
  o.seeds = 1;
  o.policies = std::vector<EvalPolicy>{EvalPolicy::Eval};
  const StudyResult s = run_study({"convergence"}, o);
  const fs::path base = fs::absolute(temp_dir("hostile"));
  fs::create_directories(base);
  // Each name once ran a command or lost the figures when it was pasted into `sh -c`.
  const std::vector<std::string> names = {
      "x'; touch PWNED_sq; echo '", "it's", "line\nbreak", "dq\"x\"", "`touch PWNED_bq`",
      "$(touch PWNED_dollar)", "-dash", "semi;touch PWNED_semi", "back\\slash @macro",
  };
  for (const auto& name : names) {
    INFO(name);
    const fs::path dir = base / name;
    const auto pngs = write_outputs(s, dir.string());
    REQUIRE(pngs.size() == 1);
    REQUIRE(fs::exists(dir / "convergence_eval.png"));
    CHECK(slurp(dir / "convergence_eval.png").substr(1, 3) == "PNG");
    CHECK(fs::exists(dir / "results.csv"));
  }
  // Relative to the test's folder too (the shell ran in the current folder).
  const fs::path rel = fs::path("x'; touch PWNED_rel; echo '");
  fs::remove_all(rel);
  CHECK(write_outputs(s, rel.string()).size() == 1);
  fs::remove_all(rel);
  for (const char* marker : {"PWNED_sq", "PWNED_bq", "PWNED_dollar", "PWNED_semi", "PWNED_rel", "P"}) {
    INFO(marker);
    CHECK_FALSE(fs::exists(base / marker));
    CHECK_FALSE(fs::exists(fs::current_path() / marker));
    CHECK_FALSE(fs::exists(fs::current_path() / "plots" / marker));
  }
  for (const auto& e : fs::recursive_directory_iterator(base))
    CHECK(e.path().filename().string().rfind("PWNED", 0) != 0);
  fs::remove_all(base);
}
