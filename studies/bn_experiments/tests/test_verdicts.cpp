// Tests of the verdicts: each rule on loss curves made by hand, and the constant predictor
// against a sum written out from the chapter's data.
#include <catch2/catch.hpp>

#include <cmath>

#include "kit/data.h"
#include "report.h"
#include "study.h"
#include "verdicts.h"

using namespace bnexp;
using tapegrad::models::Norm;

namespace {

// A curve of `epochs` train losses that first reaches `target` (0.1) at `reach` (never when
// 0); `rises` of its epoch-to-epoch changes go up, at the end.
std::vector<double> curve(int epochs, int reach, int rises = 0) {
  std::vector<double> c;
  for (int e = 1; e <= epochs; ++e) {
    const double v = reach > 0 && e >= reach ? 0.05 / e : 1.0 / e + 0.2;
    c.push_back(v);
  }
  for (int k = 0; k < rises; ++k) c[static_cast<std::size_t>(epochs - 1 - 2 * k)] *= 3;
  return c;
}

// A study of `experiment` with hand-made results: `make(job)` gives each job's train curve
// (the test curve is the same), or marks it crashed when it returns an empty curve.
template <class F>
StudyResult study_of(const std::string& experiment, F make) {
  StudyResult s;
  s.options.epochs = 10;
  s.options.seeds = 3;
  s.resolved = resolve(s.options);
  s.jobs = make_jobs(experiment, s.options);
  for (const auto& j : s.jobs) {
    RunResult r;
    auto c = make(j);
    r.crashed = c.empty();
    r.loss.push_back({c, c});
    s.results.push_back(r);
  }
  return s;
}

const Verdict& find(const std::vector<Verdict>& v, const std::string& starts) {
  for (const auto& x : v)
    if (x.claim.rfind(starts, 0) == 0) return x;
  FAIL("no verdict starts with " << starts);
  return v.front();
}

}  // namespace

TEST_CASE("convergence verdict: faster in every seed pair holds, the reverse does not hold", "[bn_experiments][verdicts]") {
  auto bn_first = study_of("convergence", [](const Job& j) { return curve(10, j.run.norm == Norm::Batch ? 3 : 7); });
  const auto v1 = judge_claims(bn_first);
  CHECK(find(v1, "BN converges").verdict == "holds");
  CHECK_THAT(find(v1, "BN converges").evidence, Catch::Contains("faster in 3 of 3 seed pairs, by 4 ± 0 epochs"));
  auto plain_first = study_of("convergence", [](const Job& j) { return curve(10, j.run.norm == Norm::Batch ? 8 : 2); });
  CHECK(find(judge_claims(plain_first), "BN converges").verdict == "does not hold");
  // one pair each way and one tie: mixed, so not supported
  auto mixed = study_of("convergence", [](const Job& j) {
    const int k = static_cast<int>(j.run.seed);
    const int bn = k == 0 ? 3 : k == 1 ? 6 : 4, plain = k == 0 ? 5 : k == 1 ? 2 : 4;
    return curve(10, j.run.norm == Norm::Batch ? bn : plain);
  });
  CHECK(find(judge_claims(mixed), "BN converges").verdict == "not supported");
  // a net that never reaches the target is slower than one that does
  auto never = study_of("convergence", [](const Job& j) { return curve(10, j.run.norm == Norm::Batch ? 9 : 0); });
  CHECK(find(judge_claims(never), "BN converges").verdict == "holds");
  // other experiments are not in the study: their claims are not measured
  CHECK(find(v1, "BN keeps deep").verdict == "not measured");
  CHECK(find(v1, "BN tolerates").verdict == "not measured");
}

TEST_CASE("smoothness verdict counts the epochs whose loss rose, seed by seed", "[bn_experiments][verdicts]") {
  auto s = study_of("convergence", [](const Job& j) { return curve(10, 3, j.run.norm == Norm::Batch ? 3 : 0); });
  const auto all = judge_claims(s);
  const Verdict& v = find(all, "BN's loss");
  CHECK(v.verdict == "does not hold");
  CHECK_THAT(v.evidence, Catch::Contains("smoother in 0 of 3 seed pairs"));
}

TEST_CASE("learning-rate verdict compares the largest crash-free rate of each net", "[bn_experiments][verdicts]") {
  // the clean sweep is 0.001, 0.01, 0.05, 0.1: plain crashes from 0.05, BN never
  auto s = study_of("learning-rate", [](const Job& j) {
    return j.run.norm == Norm::None && j.run.lr >= 0.05 ? std::vector<double>{} : curve(10, 4);
  });
  const auto all = judge_claims(s);
  const Verdict& v = find(all, "BN tolerates");
  CHECK(v.verdict == "holds");
  CHECK_THAT(v.evidence, Catch::Contains("largest crash-free lr: BN 0.1, plain 0.01"));
  CHECK_THAT(v.evidence, Catch::Contains("crashed runs 0/12 (BN) vs 6/12 (plain)"));
  auto none = study_of("learning-rate", [](const Job&) { return curve(10, 4); });
  CHECK(find(judge_claims(none), "BN tolerates").verdict == "not supported");
  auto bn_crashes = study_of("learning-rate", [](const Job& j) {
    return j.run.norm == Norm::Batch && j.run.lr >= 0.1 ? std::vector<double>{} : curve(10, 4);
  });
  CHECK(find(judge_claims(bn_crashes), "BN tolerates").verdict == "does not hold");
}

TEST_CASE("depth verdicts: trainable per depth, and whether plain nets crash", "[bn_experiments][verdicts]") {
  auto s = study_of("depth", [](const Job& j) {
    if (j.run.norm == Norm::Batch) return curve(10, 5);
    return j.run.depth() == 5 ? curve(10, 6) : curve(10, 0);
  });
  const auto v = judge_claims(s);
  CHECK(find(v, "BN keeps deep").verdict == "holds");
  CHECK_THAT(find(v, "BN keeps deep").evidence, Catch::Contains("10 layers: 3/3 vs 0/3"));
  CHECK(find(v, "plain deep").verdict == "does not hold");
  auto crash = study_of("depth", [](const Job& j) {
    return j.run.norm == Norm::None && j.run.depth() == 15 && j.run.seed == 1 ? std::vector<double>{} : curve(10, 5);
  });
  const auto vc = judge_claims(crash);
  CHECK(find(vc, "plain deep").verdict == "holds");
  CHECK_THAT(find(vc, "plain deep").evidence, Catch::Contains("1 of 9 plain runs crash"));
  CHECK(find(vc, "BN keeps deep").verdict == "not supported");
}

TEST_CASE("constant predictor: the train mean of y scored on both splits", "[bn_experiments][verdicts]") {
  StudyOptions o;
  o.seed = 3;
  o.seeds = 2;
  const Baseline b = constant_predictor(o);
  std::vector<double> tr, te;
  for (std::uint64_t seed : {3u, 4u}) {
    const auto d = studies::kit::make_chapter_data(seed);
    const auto y = d.y_train.to_vector(), yt = d.y_test.to_vector();
    double m = 0;
    for (double v : y) m += v;
    m /= 200;
    double a = 0, c = 0;
    for (double v : y) a += (v - m) * (v - m);
    for (double v : yt) c += (v - m) * (v - m);
    tr.push_back(a / 200);
    te.push_back(c / 100);
  }
  CHECK(b.train.n == 2);
  CHECK(b.train.mean == Approx((tr[0] + tr[1]) / 2).epsilon(1e-12));
  CHECK(b.test.mean == Approx((te[0] + te[1]) / 2).epsilon(1e-12));
  CHECK(b.test.std == Approx(std::abs(te[0] - te[1]) / std::sqrt(2.0)).epsilon(1e-9));
  // the chapter's targets have variance about 0.7 (sin(2x) and cos(x) of N(0, 1) draws)
  CHECK(b.train.mean > 0.5);
  CHECK(b.train.mean < 0.9);
}

TEST_CASE("the summary opens with the verdicts and lists the constant predictor in every table", "[bn_experiments][verdicts]") {
  auto s = study_of("convergence", [](const Job& j) { return curve(10, j.run.norm == Norm::Batch ? 3 : 7); });
  const std::string md = summary_markdown(s);
  const auto verdicts_at = md.find("## Verdicts");
  REQUIRE(verdicts_at != std::string::npos);
  CHECK(verdicts_at < md.find("## convergence"));
  CHECK_THAT(md, Catch::Contains("| BN converges faster | **holds** |"));
  CHECK_THAT(md, Catch::Contains("| constant predictor | — | — | — |"));
  CHECK_THAT(verdicts_text(judge_claims(s)), Catch::Contains("BN converges faster: holds ("));
}
