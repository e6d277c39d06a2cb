// Second derivatives of Dropout, the losses (every reduction) and Linear: gradgradcheck, float64.
#include "test_ops_support.h"

#include <tapegrad/layers/functional/dropout.h>
#include <tapegrad/layers/losses.h>

using namespace ops_test;
using tapegrad::layers::Reduction;
namespace L = tapegrad::layers;

namespace {
const Reduction kReductions[] = {Reduction::None, Reduction::Mean, Reduction::Sum};
}  // namespace

TEST_CASE("gradgradcheck: dropout with a fixed mask", "[layers][double_backward]") {
  Tensor x = rand_leaf({3, 5}, 1);
  require_gradgradcheck(
      [](const std::vector<Tensor>& v) {
        Generator gen(7);  // the same mask in every call
        return mul(L::functional::dropout(v[0], 0.4, true, gen), v[0]);
      },
      {x});
}

TEST_CASE("gradgradcheck: mse_loss, every reduction, input and target", "[layers][double_backward]") {
  for (Reduction r : kReductions) {
    Tensor x = rand_leaf({2, 3}, 2), t = rand_leaf({2, 3}, 3);
    require_gradgradcheck([r](const std::vector<Tensor>& v) { return L::mse_loss(v[0], v[1], r); }, {x, t});
  }
}

TEST_CASE("gradgradcheck: cross_entropy, every reduction, with an ignored row", "[layers][double_backward]") {
  for (Reduction r : kReductions) {
    Tensor x = rand_leaf({4, 3}, 4, -2.0, 2.0);
    const Tensor t = Tensor::from_int64({2, -100, 0, 1}, {4});
    require_gradgradcheck([r, t](const std::vector<Tensor>& v) { return L::cross_entropy(v[0], t, r); }, {x});
    // unbatched (C) logits
    Tensor xu = rand_leaf({5}, 5);
    const Tensor tu = Tensor::from_int64({3}, {});
    require_gradgradcheck([r, tu](const std::vector<Tensor>& v) { return L::cross_entropy(v[0], tu, r); }, {xu});
  }
}

TEST_CASE("cross_entropy: second derivative equals the softmax Hessian", "[layers][double_backward]") {
  // sum-reduced CE of one row: H = diag(p) - p pᵀ, p = softmax(x); H·v checked against it
  Tensor x = leaf({0.5, -1.0, 2.0}, {1, 3});
  const Tensor t = Tensor::from_int64({1}, {1});
  const Tensor v = Tensor::from_vector({1.0, 2.0, -1.0}, {1, 3}, Dtype::Float64);
  auto hv = autograd::hessian_vector_product(L::cross_entropy(x, t, Reduction::Sum), {x}, {v});
  const double e[3] = {std::exp(0.5), std::exp(-1.0), std::exp(2.0)};
  const double z = e[0] + e[1] + e[2];
  const double p[3] = {e[0] / z, e[1] / z, e[2] / z}, vv[3] = {1.0, 2.0, -1.0};
  const double pv = p[0] * vv[0] + p[1] * vv[1] + p[2] * vv[2];
  require_close(hv.at(0), {p[0] * (vv[0] - pv), p[1] * (vv[1] - pv), p[2] * (vv[2] - pv)}, 1e-12, 1e-14);
}

TEST_CASE("gradgradcheck: nll_loss composed with log_softmax, every reduction", "[layers][double_backward]") {
  for (Reduction r : kReductions) {
    Tensor x = rand_leaf({3, 4}, 6);
    const Tensor t = Tensor::from_int64({3, -100, 0}, {3});
    require_gradgradcheck(
        [r, t](const std::vector<Tensor>& v) { return L::nll_loss(log_softmax(v[0], 1), t, r); }, {x});
  }
}

TEST_CASE("gradgradcheck: binary_cross_entropy_with_logits, every reduction", "[layers][double_backward]") {
  for (Reduction r : kReductions) {
    Tensor x = rand_leaf({2, 3}, 7, -2.0, 2.0), t = rand_leaf({2, 3}, 8, 0.0, 1.0);
    require_gradgradcheck(
        [r](const std::vector<Tensor>& v) { return L::binary_cross_entropy_with_logits(v[0], v[1], r); }, {x, t});
  }
}

TEST_CASE("gradgradcheck: linear with and without bias, batched (*, in)", "[layers][double_backward]") {
  Tensor x = rand_leaf({2, 3, 4}, 9), w = rand_leaf({5, 4}, 10), b = rand_leaf({5}, 11);
  require_gradgradcheck([](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); }, {x, w, b});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return linear(v[0], v[1], Tensor()); }, {x, w});
}
