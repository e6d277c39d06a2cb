// The one home of the running-statistics step (functional::RunningStats) and the public entry
// point SyncBatchNorm runs through (functional::batch_norm_with_stats): the factor, the
// update, the checks, and batch_norm_with_stats against batch_norm itself (bit for bit when
// given x's own statistics), its backward hook and its refusals (worked examples, float64).
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/core.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/batch_renorm.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/functional/running_stats.h>
#include <tapegrad/layers/instance_norm.h>
#include "test_errors_support.h"

using namespace tapegrad;
using layers::functional::BatchStats;
using layers::functional::RunningStats;
using layers::functional::batch_norm;
using layers::functional::batch_norm_with_stats;
using Catch::Contains;
using test::thrown;

namespace {
Tensor f64(std::vector<double> v, Shape s) { return Tensor::from_vector(v, s, Dtype::Float64); }
RunningStats fresh(std::int64_t C, std::optional<double> momentum = 0.1, bool unbiased = true) {
  return {Tensor::zeros({C}, Dtype::Float64), Tensor::ones({C}, Dtype::Float64), Tensor::zeros({}, Dtype::Int64),
          momentum, unbiased};
}
}  // namespace

TEST_CASE("RunningStats: the factor, the update and num_batches_tracked", "[norms][batchnorm]") {
  RunningStats rs = fresh(2);
  CHECK(rs.factor() == 0.1);
  // mean (4, -2), biased var (5, 0.5) over m = 4: unbiased 20/3 and 2/3
  const double mean[] = {4, -2}, var[] = {5, 0.5};
  rs.update(mean, var, 4);
  CHECK(rs.running_mean.to_vector() == std::vector<double>{0.9 * 0 + 0.1 * 4, 0.1 * -2.0});
  CHECK(rs.running_var.to_vector() == std::vector<double>{0.9 + 0.1 * 5 * (4.0 / 3.0), 0.9 + 0.1 * 0.5 * (4.0 / 3.0)});
  CHECK(rs.num_batches_tracked.data<std::int64_t>()[0] == 1);
  // momentum unset: the cumulative average, f = 1/(num_batches_tracked + 1)
  RunningStats cum = fresh(2, std::nullopt, false);
  CHECK(cum.factor() == 1.0);
  cum.update(mean, var, 4);
  CHECK(cum.running_mean.to_vector() == std::vector<double>{4, -2});
  CHECK(cum.running_var.to_vector() == std::vector<double>{5, 0.5});  // biased
  CHECK(cum.factor() == 0.5);
  const double mean2[] = {0, 0}, var2[] = {1, 1.5};
  cum.update(mean2, var2, 4);
  CHECK(cum.running_mean.to_vector() == std::vector<double>{2, -1});
  CHECK(cum.running_var.to_vector() == std::vector<double>{3, 1});
  CHECK(cum.num_batches_tracked.data<std::int64_t>()[0] == 2);
  // no running statistics: nothing to update; undefined num_batches_tracked counts as 0
  RunningStats none{{}, {}, {}, std::nullopt, true};
  CHECK(none.factor() == 1.0);
  CHECK_NOTHROW(none.update(mean, var, 4));
}

TEST_CASE("RunningStats::check and check_values_per_channel name what is wrong", "[norms][errors]") {
  const Tensor x = Tensor::zeros({4, 2}, Dtype::Float64);
  RunningStats rs = fresh(2, 1.5);
  CHECK_THAT(thrown<std::invalid_argument>([&] { rs.check("BatchNorm1d", x); }),
             Contains("BatchNorm1d: momentum must be in [0, 1]") && Contains("1.5"));
  rs = fresh(3);
  CHECK_THAT(thrown<std::invalid_argument>([&] { rs.check("bn", x); }),
             Contains("expected running_mean of shape [2]") && Contains("[3]"));
  rs = fresh(2);
  rs.running_var = Tensor();
  CHECK_THAT(thrown<std::invalid_argument>([&] { rs.check("bn", x); }), Contains("both be given or both be omitted"));
  rs = fresh(2);
  rs.running_var = Tensor::ones({2}, Dtype::Float32);
  CHECK_THAT(thrown<std::invalid_argument>([&] { rs.check("bn", x); }), Contains("running_var has dtype float32"));
  CHECK_NOTHROW(layers::functional::check_values_per_channel("bn", 2, "value per channel", "x", true));
  CHECK_THAT(thrown<std::invalid_argument>(
                 [] { layers::functional::check_values_per_channel("bn", 1, "value per channel", "input of shape [1, 2]", true); }),
             Contains("bn: expected more than 1 value per channel when training, got input of shape [1, 2]") &&
                 Contains("call eval()"));
}

TEST_CASE("batch_norm_with_stats given x's own statistics is batch_norm, bit for bit", "[norms][batchnorm]") {
  for (const Shape& shape : {Shape{6, 3}, Shape{3, 3, 5}, Shape{2, 3, 2, 3}}) {
    INFO(shape_str(shape));
    const std::int64_t n = numel_of(shape);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = std::sin(1.3 * static_cast<double>(i)) + 0.1 * static_cast<double>(i % 3);
    Tensor xa = f64(v, shape), xb = f64(v, shape);
    xa.requires_grad_();
    xb.requires_grad_();
    Tensor wa = f64({1.5, -0.5, 2}, {3}), wb = f64({1.5, -0.5, 2}, {3}), ba = f64({0.1, 0.2, 0.3}, {3}),
           bb = f64({0.1, 0.2, 0.3}, {3});
    for (Tensor* t : {&wa, &wb, &ba, &bb}) t->requires_grad_();
    RunningStats ra = fresh(3), rb = fresh(3);
    const Tensor ya = batch_norm(xa, wa, ba, ra, true, 1e-5, "bn");
    Tensor mean, var;
    layers::functional::batch_moments(xb, mean, var);
    int hook_calls = 0;
    BatchStats st{mean, var, n / 3, "", [&](double* sums, std::int64_t k) {
                    ++hook_calls;
                    CHECK(k == 6);
                    CHECK(std::isfinite(sums[0]));
                  }};
    const Tensor yb = batch_norm_with_stats(xb, st, wb, bb, rb, 1e-5, "bn");
    CHECK(yb.to_vector() == ya.to_vector());
    CHECK(rb.running_mean.to_vector() == ra.running_mean.to_vector());
    CHECK(rb.running_var.to_vector() == ra.running_var.to_vector());
    CHECK(rb.num_batches_tracked.data<std::int64_t>()[0] == 1);
    const Tensor g = f64(std::vector<double>(static_cast<std::size_t>(n), 0.0), shape);
    std::vector<double> gv(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) gv[static_cast<std::size_t>(i)] = std::cos(0.7 * static_cast<double>(i));
    sum(mul(ya, f64(gv, shape))).backward();
    sum(mul(yb, f64(gv, shape))).backward();
    CHECK(hook_calls == 1);
    CHECK(xb.grad().to_vector() == xa.grad().to_vector());
    CHECK(wb.grad().to_vector() == wa.grad().to_vector());
    CHECK(bb.grad().to_vector() == ba.grad().to_vector());
  }
}

TEST_CASE("batch_norm_with_stats: the backward uses the given count and the reduced sums", "[norms][batchnorm]") {
  // Two halves of one batch, each normalised with the whole batch's statistics, with a hook
  // that adds the other half's sums (what SyncBatchNorm's allreduce does across ranks): the
  // input gradient is that of batch_norm on the whole batch.
  const std::vector<double> all = {1, 4, 2, -1, 7, 0, 3, 5, 9, -2, 4, 1};  // (6, 2)
  const std::vector<double> gall = {0.5, -1, 2, 0.25, -0.5, 1, 1.5, 0.75, -2, 0.5, 1, -1};
  Tensor x = f64(all, {6, 2});
  x.requires_grad_();
  sum(mul(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true), f64(gall, {6, 2}))).backward();
  const std::vector<double> want = x.grad().to_vector();
  Tensor mean, var;
  layers::functional::batch_moments(f64(all, {6, 2}), mean, var);
  // Σdy and Σdy·(x - μ) of each half, to hand to the other
  const std::vector<double> mu = mean.to_vector();
  std::vector<double> half_sums[2] = {std::vector<double>(4, 0.0), std::vector<double>(4, 0.0)};
  for (int h = 0; h < 2; ++h)
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 2; ++c) {
        const std::size_t i = static_cast<std::size_t>((3 * h + r) * 2 + c);
        half_sums[h][static_cast<std::size_t>(c)] += gall[i];
        half_sums[h][static_cast<std::size_t>(2 + c)] += gall[i] * (all[i] - mu[static_cast<std::size_t>(c)]);
      }
  std::vector<double> got;
  for (int h = 0; h < 2; ++h) {
    Tensor xh = f64(std::vector<double>(all.begin() + 6 * h, all.begin() + 6 * h + 6), {3, 2});
    xh.requires_grad_();
    BatchStats st{mean, var, 6, "over both halves", [&, h](double* sums, std::int64_t k) {
                    for (std::int64_t i = 0; i < k; ++i) sums[i] += half_sums[1 - h][static_cast<std::size_t>(i)];
                  }};
    const Tensor y = batch_norm_with_stats(xh, st, Tensor(), Tensor(), RunningStats{{}, {}, {}, 0.1, true}, 1e-5);
    sum(mul(y, f64(std::vector<double>(gall.begin() + 6 * h, gall.begin() + 6 * h + 6), {3, 2}))).backward();
    for (double v : xh.grad().to_vector()) got.push_back(v);
  }
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12));
}

TEST_CASE("batch_norm_with_stats refuses one value over the whole batch and bad statistics, buffers untouched",
          "[norms][errors]") {
  RunningStats rs = fresh(2);
  const Tensor x = f64({1, 2}, {1, 2});
  const Tensor mean = f64({1, 2}, {2}), var = f64({0, 0}, {2});
  CHECK_THAT(thrown<std::invalid_argument>([&] { batch_norm_with_stats(x, {mean, var, 1, "over all 3 ranks", {}}, {}, {}, rs, 1e-5, "SyncBatchNorm"); }),
             Contains("SyncBatchNorm: expected more than 1 value per channel over all 3 ranks when training, got 1") &&
                 Contains("[1, 2]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { batch_norm_with_stats(x, {mean.to(Dtype::Float32), var, 4, "", {}}, {}, {}, rs, 1e-5); }),
             Contains("expected the batch mean as float64 of shape [2]") && Contains("float32"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { batch_norm_with_stats(x, {mean, f64({1}, {1}), 4, "", {}}, {}, {}, rs, 1e-5); }),
             Contains("expected the batch var as float64 of shape [2]"));
  CHECK(rs.running_mean.to_vector() == std::vector<double>{0, 0});
  CHECK(rs.running_var.to_vector() == std::vector<double>{1, 1});
  CHECK(rs.num_batches_tracked.data<std::int64_t>()[0] == 0);
  // a rank with no rows still takes part: empty output, and the backward calls the hook
  Tensor empty = Tensor::zeros({0, 2}, Dtype::Float64);
  empty.requires_grad_();
  int calls = 0;
  const Tensor y = batch_norm_with_stats(empty, {mean, f64({1, 1}, {2}), 4, "", [&](double*, std::int64_t) { ++calls; }},
                                         {}, {}, rs, 1e-5);
  CHECK(y.shape() == Shape{0, 2});
  CHECK(rs.num_batches_tracked.data<std::int64_t>()[0] == 1);
  sum(y).backward();
  CHECK(calls == 1);
  CHECK(empty.grad().shape() == Shape{0, 2});
}

TEST_CASE("every norm module runs its running statistics through the one step", "[norms][batchnorm]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  layers::BatchNormOptions o;
  o.dtype = Dtype::Float64;
  o.momentum = std::nullopt;  // cumulative average
  const Tensor x1 = f64({1, 0, 3, 0, 5, 0, 7, 0}, {4, 2}), x2 = f64({2, 1, 2, 3, 2, 5, 2, 7}, {4, 2});
  layers::BatchNorm1d bn(2, o);
  layers::BatchRenorm1d brn(2, o, 1.0, 0.0);  // rmax 1, dmax 0: BatchNorm
  RunningStats ref = fresh(2, std::nullopt);
  for (const Tensor& x : {x1, x2}) {
    bn(x);
    brn(x);
    Tensor mean, var;
    layers::functional::batch_moments(x, mean, var);
    ref.update(mean.data<double>(), var.data<double>(), 4);
  }
  CHECK(bn.running_mean.to_vector() == ref.running_mean.to_vector());
  CHECK(bn.running_var.to_vector() == ref.running_var.to_vector());
  CHECK(brn.running_mean.to_vector() == ref.running_mean.to_vector());
  CHECK(brn.running_var.to_vector() == ref.running_var.to_vector());
  CHECK(bn.batches_tracked() == 2);
  CHECK(brn.batches_tracked() == 2);
  // column 0: batches (1, 3, 5, 7) and (2, 2, 2, 2): cumulative mean (4 + 2)/2
  CHECK(bn.running_mean.to_vector()[0] == 3.0);
  // InstanceNorm: the batch averages of the per-instance statistics, num_batches_tracked stays 0
  layers::InstanceNormOptions io;
  io.dtype = Dtype::Float64;
  io.track_running_stats = true;
  layers::InstanceNorm1d in(1, io);
  in(f64({1, 3, 5, 7, 0, 0, 2, 2}, {2, 1, 4}));  // instance means 4 and 1, biased vars 5 and 1
  CHECK(in.running_mean.to_vector()[0] == Approx(0.1 * 2.5).epsilon(1e-15));
  CHECK(in.running_var.to_vector()[0] == Approx(0.9 + 0.1 * 3.0 * 4.0 / 3.0).epsilon(1e-15));
  CHECK(in.num_batches_tracked.data<std::int64_t>()[0] == 0);
}
