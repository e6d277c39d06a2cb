// train/evaluate_batches.h: batched evaluation without the tape (batches, drop_last, rank slices,
// modes restored, train mode's running statistics), the classifier's totals against
// hand-computed values, and its errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/train/evaluate_batches.h>

using namespace tapegrad;

namespace {
// Identity that records, for each call, the rows it saw, the grad mode and its own mode.
class Recorder : public layers::Module {
 public:
  struct Call {
    std::vector<double> rows;
    bool grad_enabled, training;
  };
  std::vector<Call> calls;
  Tensor forward(const Tensor& x) override {
    calls.push_back({x.to_vector(), grad_mode_enabled(), is_training()});
    return x;
  }
  std::string type_name() const override { return "Recorder"; }
};

Tensor rows(const std::vector<double>& v, std::int64_t cols) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size()) / cols, cols}, Dtype::Float64);
}
}  // namespace

TEST_CASE("evaluate_batches: consecutive batches, the last partial one unless drop_last", "[train][evaluate]") {
  Recorder r;
  const Tensor X = rows({0, 1, 2, 3, 4, 5, 6}, 1);
  train::BatchEvalOptions o;
  o.batch_size = 3;
  std::vector<std::int64_t> ks, begins, ends;
  train::evaluate_batches(r, X, o, [&](std::int64_t k, std::int64_t b, std::int64_t e, const Tensor& out) {
    ks.push_back(k), begins.push_back(b), ends.push_back(e);
    CHECK(out.size(0) == e - b);
  });
  CHECK(ks == std::vector<std::int64_t>{0, 1, 2});
  CHECK(begins == std::vector<std::int64_t>{0, 3, 6});
  CHECK(ends == std::vector<std::int64_t>{3, 6, 7});
  REQUIRE(r.calls.size() == 3);
  CHECK(r.calls[1].rows == std::vector<double>{3, 4, 5});
  CHECK(r.calls[2].rows == std::vector<double>{6});
  CHECK(train::num_batches(7, o) == 3);

  o.drop_last = true;
  r.calls.clear();
  train::evaluate_batches(r, X, o, [](std::int64_t, std::int64_t, std::int64_t, const Tensor&) {});
  CHECK(r.calls.size() == 2);
  CHECK(train::num_batches(7, o) == 2);

  // batch_size 0: the whole input, the same tensor (no copy)
  o = {};
  Tensor seen;
  train::evaluate_batches(r, X, o, [&](std::int64_t k, std::int64_t b, std::int64_t e, const Tensor& out) {
    CHECK(k == 0);
    CHECK(b == 0);
    CHECK(e == 7);
    seen = out;
  });
  CHECK(seen.shares_storage_with(X));
}

TEST_CASE("evaluate_batches: a rank's slice of the batches keeps the global indices", "[train][evaluate]") {
  Recorder r;
  const Tensor X = rows({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 1);
  train::BatchEvalOptions o;
  o.batch_size = 2;  // 5 batches
  o.first_batch = 1;
  o.batch_step = 3;  // rank 1 of 3: batches 1 and 4
  std::vector<std::int64_t> ks;
  train::evaluate_batches(r, X, o, [&](std::int64_t k, std::int64_t, std::int64_t, const Tensor&) { ks.push_back(k); });
  CHECK(ks == std::vector<std::int64_t>{1, 4});
  REQUIRE(r.calls.size() == 2);
  CHECK(r.calls[0].rows == std::vector<double>{2, 3});
  CHECK(r.calls[1].rows == std::vector<double>{8, 9});
}

TEST_CASE("evaluate_batches: no tape, the requested mode, every module's mode restored", "[train][evaluate]") {
  auto inner = std::make_shared<Recorder>();
  auto outer = std::make_shared<layers::Sequential>();
  outer->push_back(inner);
  outer->train();
  inner->eval();  // a mixed state, as after freezing one part
  const Tensor X = rows({1, 2}, 1);
  for (bool train_mode : {false, true}) {
    inner->calls.clear();
    train::BatchEvalOptions o;
    o.train_mode = train_mode;
    train::evaluate_batches(*outer, X, o, [](std::int64_t, std::int64_t, std::int64_t, const Tensor&) {});
    REQUIRE(inner->calls.size() == 1);
    CHECK_FALSE(inner->calls[0].grad_enabled);
    CHECK(inner->calls[0].training == train_mode);
    CHECK(outer->is_training());
    CHECK_FALSE(inner->is_training());
  }
  CHECK(grad_mode_enabled());
  // also when the callback throws
  CHECK_THROWS_AS(train::evaluate_batches(*outer, X, {},
                                           [](std::int64_t, std::int64_t, std::int64_t, const Tensor&) {
                                             throw std::runtime_error("stop");
                                           }),
                  std::runtime_error);
  CHECK(outer->is_training());
  CHECK_FALSE(inner->is_training());
  CHECK(grad_mode_enabled());
  CHECK(autograd::tape_size() == 0);
}

TEST_CASE("evaluate_classifier: counts, confusion and cross-entropy sums by hand", "[train][evaluate]") {
  Recorder r;  // the logits are the input rows
  // 3 classes, 5 rows; argmax takes the first maximum (row 3: tie between 0 and 2 -> 0)
  const Tensor X = rows({2, 0, 0,  //
                         0, 1, 0,  //
                         0, 0, 3,  //
                         1, 0, 1,  //
                         0, 2, 0},
                        3);
  const Tensor y = Tensor::from_vector({0, 2, 2, 2, 1}, {5}, Dtype::Int64);
  train::ClassifierEvalOptions o;
  o.batch_size = 2;
  o.loss_dtype = Dtype::Float64;
  const auto e = train::evaluate_classifier(r, X, y, o);
  // cross-entropy of a row with logits l and label t: logsumexp(l) - l[t]
  auto ce = [](std::vector<double> l, int t) {
    double s = 0;
    for (double v : l) s += std::exp(v);
    return std::log(s) - l[static_cast<std::size_t>(t)];
  };
  const double b0 = ce({2, 0, 0}, 0) + ce({0, 1, 0}, 2);
  const double b1 = ce({0, 0, 3}, 2) + ce({1, 0, 1}, 2);
  const double b2 = ce({0, 2, 0}, 1);
  CHECK(e.count == 5);
  CHECK(e.correct == 3);  // rows 0, 2 and 4
  CHECK(e.batch_correct == std::vector<std::int64_t>{1, 1, 1});
  REQUIRE(e.batch_loss.size() == 3);
  CHECK(e.batch_loss[0] == Approx(b0).epsilon(1e-14));
  CHECK(e.batch_loss[1] == Approx(b1).epsilon(1e-14));
  CHECK(e.batch_loss[2] == Approx(b2).epsilon(1e-14));
  CHECK(e.loss_sum == Approx(b0 + b1 + b2).epsilon(1e-14));
  CHECK(e.accuracy() == Approx(0.6));
  CHECK(e.mean_loss() == Approx((b0 + b1 + b2) / 5).epsilon(1e-14));
  CHECK(e.classes == 3);
  // [true][predicted]: (0,0), (2,1), (2,2), (2,0), (1,1)
  CHECK(e.confusion == std::vector<std::int64_t>{1, 0, 0, 0, 1, 0, 1, 1, 1});

  // a rank's slice: only its batches are scored, the others stay 0
  o.first_batch = 1;
  o.batch_step = 2;
  const auto part = train::evaluate_classifier(r, X, y, o);
  CHECK(part.count == 2);
  CHECK(part.batch_correct == std::vector<std::int64_t>{0, 1, 0});
  CHECK(part.batch_loss[0] == 0.0);
  CHECK(part.batch_loss[1] == Approx(b1).epsilon(1e-14));

  // no row evaluated: NaN accuracy and loss
  o.first_batch = 5;
  const auto none = train::evaluate_classifier(r, X, y, o);
  CHECK(none.count == 0);
  CHECK(std::isnan(none.accuracy()));
  CHECK(none.confusion.empty());
}

TEST_CASE("evaluate_classifier: train mode uses batch statistics and moves the running statistics",
          "[train][evaluate]") {
  tapegrad::ModeChecksPause pause;  // fresh statistics evaluated on purpose
  layers::BatchNormOptions bo;
  bo.dtype = Dtype::Float64;
  auto bn = std::make_shared<layers::BatchNorm1d>(2, bo);
  const Tensor X = rows({1, 0, 3, 0, 5, 1, 7, 1}, 2);
  const Tensor y = Tensor::from_vector({0, 0, 1, 1}, {4}, Dtype::Int64);
  train::ClassifierEvalOptions o;
  o.batch_size = 2;
  o.loss_dtype = Dtype::Float64;
  bn->eval();
  train::evaluate_classifier(*bn, X, y, o);
  CHECK(bn->running_mean.to_vector() == std::vector<double>{0, 0});  // eval mode: untouched
  CHECK_FALSE(bn->is_training());
  o.train_mode = true;
  const auto e = train::evaluate_classifier(*bn, X, y, o);
  // batch statistics: each batch's rows normalise to (-1, +1) in column 0, column 1 is
  // constant in each batch (0 then 1) -> 0: a row predicts 0 where column 0 is +1, else 1
  CHECK(e.correct == 2);  // rows 1 (predicts 0) and 2 (predicts 1); rows 0 and 3 are wrong
  // running_mean: 0.9·(0.9·0 + 0.1·2) + 0.1·6 = 0.78 in column 0; 0.1 in column 1
  const auto rm = bn->running_mean.to_vector();
  CHECK(rm[0] == Approx(0.78).epsilon(1e-12));
  CHECK(rm[1] == Approx(0.1).epsilon(1e-12));
  CHECK_FALSE(bn->is_training());
}

TEST_CASE("evaluate_classifier: errors name the value", "[train][evaluate][errors]") {
  Recorder r;
  const Tensor X = rows({0, 1, 1, 0}, 2);
  train::ClassifierEvalOptions o;
  o.batch_size = -1;
  CHECK_THROWS_WITH(train::evaluate_classifier(r, X, Tensor::from_vector({0, 1}, {2}, Dtype::Int64), o),
                    Catch::Contains("batch_size >= 0") && Catch::Contains("-1"));
  o.batch_size = 1;
  o.batch_step = 0;
  CHECK_THROWS_WITH(train::evaluate_classifier(r, X, Tensor::from_vector({0, 1}, {2}, Dtype::Int64), o),
                    Catch::Contains("batch_step >= 1"));
  o.batch_step = 1;
  CHECK_THROWS_WITH(train::evaluate_classifier(r, X, Tensor::from_vector({0, 1, 1}, {3}, Dtype::Int64), o),
                    Catch::Contains("[2]") && Catch::Contains("3 rows"));
  CHECK_THROWS_WITH(train::evaluate_classifier(r, X, Tensor::from_vector({0, 2}, {2}, Dtype::Int64), o),
                    Catch::Contains("label 2 of row 1 outside [0, 2)"));
  CHECK_THROWS_WITH(train::evaluate_batches(r, Tensor::from_vector({1.0}, {}, Dtype::Float64), {},
                                             [](std::int64_t, std::int64_t, std::int64_t, const Tensor&) {}),
                    Catch::Contains("0-d"));
}
