// debug::recalibrate_batch_norm against a hand computation: after it, every BatchNorm's
// running_mean / running_var are the float64 mean and unbiased variance of the input it sees
// in eval mode (Dropout off, earlier BatchNorms recalibrated), whatever the batch size;
// modes, momentum and every other buffer are kept.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/debug/recalibrate.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>

using namespace tapegrad;
using tapegrad::layers::BatchNorm1d;

namespace {

struct Net {
  std::shared_ptr<layers::Sequential> seq;
  std::shared_ptr<layers::Linear> fc1, fc2;
  std::shared_ptr<layers::Dropout> drop;
  std::shared_ptr<BatchNorm1d> bn1, bn2;
};

// Linear(3, 4) -> Dropout(0.5) -> BN(4, momentum 0.1) -> ReLU -> Linear(4, 3) -> BN(3, cumulative)
Net make_net(Generator& g, Generator& drop_gen) {
  Net n;
  n.seq = std::make_shared<layers::Sequential>();
  n.fc1 = std::make_shared<layers::Linear>(3, 4, true, Dtype::Float32, g);
  n.drop = std::make_shared<layers::Dropout>(0.5, &drop_gen);
  n.bn1 = std::make_shared<BatchNorm1d>(4);
  layers::BatchNormOptions cum;
  cum.momentum = std::nullopt;
  n.bn2 = std::make_shared<BatchNorm1d>(3, cum);
  n.fc2 = std::make_shared<layers::Linear>(4, 3, true, Dtype::Float32, g);
  n.seq->push_back(n.fc1);
  n.seq->push_back(n.drop);
  n.seq->push_back(n.bn1);
  n.seq->push_back(std::make_shared<layers::ReLU>());
  n.seq->push_back(n.fc2);
  n.seq->push_back(n.bn2);
  return n;
}

// rows (N, K) of a row-major vector: a (N, out) = rows · W^T + b, in double.
std::vector<double> affine(const std::vector<double>& rows, std::int64_t N, std::int64_t K, const Tensor& W,
                           const Tensor& b) {
  const auto w = W.to_vector(), bb = b.to_vector();
  const std::int64_t out = W.size(0);
  std::vector<double> r(static_cast<std::size_t>(N * out));
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t o = 0; o < out; ++o) {
      double s = bb[static_cast<std::size_t>(o)];
      for (std::int64_t k = 0; k < K; ++k)
        s += rows[static_cast<std::size_t>(i * K + k)] * w[static_cast<std::size_t>(o * K + k)];
      r[static_cast<std::size_t>(i * out + o)] = s;
    }
  return r;
}

void moments(const std::vector<double>& h, std::int64_t N, std::int64_t C, std::vector<double>& mean,
             std::vector<double>& var) {
  mean.assign(static_cast<std::size_t>(C), 0.0);
  var.assign(static_cast<std::size_t>(C), 0.0);
  for (std::int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (std::int64_t i = 0; i < N; ++i) s += h[static_cast<std::size_t>(i * C + c)];
    const double m = s / static_cast<double>(N);
    double q = 0;
    for (std::int64_t i = 0; i < N; ++i) q += (h[static_cast<std::size_t>(i * C + c)] - m) * (h[static_cast<std::size_t>(i * C + c)] - m);
    mean[static_cast<std::size_t>(c)] = m;
    var[static_cast<std::size_t>(c)] = q / static_cast<double>(N - 1);  // unbiased
  }
}

void require_close(const Tensor& t, const std::vector<double>& want, double rel) {
  const auto got = t.to_vector();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(rel).margin(1e-6));
}

}  // namespace

TEST_CASE("recalibrate_batch_norm sets running statistics to the eval-mode full-data statistics", "[debug][recalibrate]") {
  tapegrad::ModeChecksPause pause;  // the stale statistics are made without gradients on purpose
  Generator g(3), dg(4), xg(5);
  Net n = make_net(g, dg);
  const std::int64_t N = 50;
  Tensor x = randn({N, 3}, Dtype::Float32, xg) * 2.0 + 1.0;
  // Some training steps in train mode: Dropout before bn1 inflates its running variance.
  n.seq->train();
  {
    NoGradGuard ng;
    for (int s = 0; s < 5; ++s) n.seq->forward(x);
  }
  const auto stale_var = n.bn1->running_var.to_vector();
  const std::int64_t tracked1 = n.bn1->batches_tracked(), tracked2 = n.bn2->batches_tracked();

  const auto report = debug::recalibrate_batch_norm(*n.seq, x, 16);  // batches of 16, 16, 16, 2

  // Hand computation of the eval-mode inputs, in float64.
  std::vector<double> h1 = affine(x.to_vector(), N, 3, n.fc1->weight, n.fc1->bias);  // Dropout off
  std::vector<double> m1, v1, m2, v2;
  moments(h1, N, 4, m1, v1);
  require_close(n.bn1->running_mean, m1, 1e-5);
  require_close(n.bn1->running_var, v1, 1e-5);
  const auto gamma = n.bn1->weight.to_vector(), beta = n.bn1->bias.to_vector();
  std::vector<double> a(h1.size());
  for (std::int64_t i = 0; i < N; ++i)
    for (std::size_t c = 0; c < 4; ++c) {
      const double z = (h1[static_cast<std::size_t>(i) * 4 + c] - m1[c]) / std::sqrt(v1[c] + 1e-5) * gamma[c] + beta[c];
      a[static_cast<std::size_t>(i) * 4 + c] = z > 0 ? z : 0.0;
    }
  std::vector<double> h2 = affine(a, N, 4, n.fc2->weight, n.fc2->bias);
  moments(h2, N, 3, m2, v2);
  require_close(n.bn2->running_mean, m2, 1e-4);
  require_close(n.bn2->running_var, v2, 1e-4);

  // The stale variance was inflated by Dropout(0.5) in training (its input mean is not 0,
  // so by more than the 1/p of zero-mean inputs on some channel, by less on others).
  double ratio_sum = 0;
  for (std::size_t c = 0; c < 4; ++c) ratio_sum += stale_var[c] / v1[c];
  CHECK(ratio_sum / 4 > 1.3);

  // Modes, momentum and counters.
  CHECK(n.seq->is_training());
  CHECK(n.drop->is_training());
  CHECK(n.bn1->is_training());
  REQUIRE(n.bn1->options.momentum.has_value());
  CHECK(*n.bn1->options.momentum == 0.1);
  CHECK_FALSE(n.bn2->options.momentum.has_value());
  CHECK(n.bn1->batches_tracked() == tracked1 + 4);
  CHECK(n.bn2->batches_tracked() == tracked2 + 4);
  REQUIRE(report.batches == 4);
  REQUIRE(report.layers.size() == 2);
  CHECK(report.layers[0].module == "2");
  CHECK(report.layers[1].module == "5");
  CHECK(report.layers[0].values == N);
  CHECK(report.layers[0].max_var_log_change > 0.3);
  CHECK_FALSE(report.to_string().empty());
}

TEST_CASE("recalibrate_batch_norm does not depend on the batch size and is idempotent", "[debug][recalibrate]") {
  Generator g(7), dg(8), xg(9);
  Net n = make_net(g, dg);
  Tensor x = randn({40, 3}, Dtype::Float32, xg);
  debug::recalibrate_batch_norm(*n.seq, x, 40);
  const auto mean_one = n.bn2->running_mean.to_vector(), var_one = n.bn2->running_var.to_vector();
  const auto report = debug::recalibrate_batch_norm(*n.seq, x, 3);
  require_close(n.bn2->running_mean, mean_one, 1e-5);
  require_close(n.bn2->running_var, var_one, 1e-5);
  for (const auto& l : report.layers) CHECK(l.max_var_log_change < 1e-5);
}

TEST_CASE("recalibrate_batch_norm refuses too little data", "[debug][recalibrate]") {
  Generator g(1), dg(2);
  Net n = make_net(g, dg);
  Generator xg(3);
  Tensor one = randn({1, 3}, Dtype::Float32, xg);
  CHECK_THROWS_WITH(debug::recalibrate_batch_norm(*n.seq, one, 8),
                    Catch::Contains("expected inputs (N, C, ...) with N >= 2, got [1, 3]"));
  CHECK_THROWS_WITH(debug::recalibrate_batch_norm(*n.seq, randn({4, 3}, Dtype::Float32, xg), 0),
                    Catch::Contains("expected batch >= 1, got 0"));
  auto before = n.bn1->running_var.to_vector();
  CHECK_THROWS_WITH(debug::recalibrate_batch_norm(*n.seq, debug::BatchSource([](const auto&) {})),
                    Catch::Contains("'2' is never reached by the data (0 batches)"));
  CHECK(n.bn1->running_var.to_vector() == before);
  const Tensor row = randn({1, 3}, Dtype::Float32, xg);
  CHECK_THROWS_WITH(debug::recalibrate_batch_norm(*n.seq, debug::BatchSource([&](const auto& visit) { visit(row); })),
                    Catch::Contains("BatchNorm '2' needs >= 2 values per channel for an unbiased variance, got 1"));
  CHECK(n.bn1->running_var.to_vector() == before);
  CHECK(n.seq->is_training());
}

TEST_CASE("recalibrate_batch_norm takes a DataLoader (shuffled: same result as the tensor overload)", "[debug][recalibrate]") {
  Generator g(21), dg(22), xg(23), sg(24);
  Net n = make_net(g, dg);
  const Tensor x = randn({30, 3}, Dtype::Float32, xg);
  debug::recalibrate_batch_norm(*n.seq, x, 30);
  const auto mean = n.bn2->running_mean.to_vector(), var = n.bn2->running_var.to_vector();
  data::DataLoaderOptions lo;
  lo.batch_size = 7;
  lo.shuffle = true;
  data::DataLoader loader(data::Dataset::make(x, Tensor::from_int64(std::vector<std::int64_t>(30, 0), {30})), lo, sg);
  const auto report = debug::recalibrate_batch_norm(*n.seq, loader);
  CHECK(report.batches == 5);
  require_close(n.bn2->running_mean, mean, 1e-5);
  require_close(n.bn2->running_var, var, 1e-5);
}
