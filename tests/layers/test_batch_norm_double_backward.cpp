// BatchNorm differentiated twice (and three times in train mode): gradgradcheck in float64
// for (N, C), (N, C, L), (N, C, H, W), train and eval, affine or not, tracked or not, the fused
// BatchNorm -> ReLU [-> Clamp] op, the running statistics left alone by a double backward, the
// create_graph gradient equal to the fast kernels' gradient, and the refusals; the row-kernel
// norms (LayerNorm, GroupNorm, InstanceNorm, LRN) in test_norm_double_backward.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <tapegrad/core/core.h>
#include <tapegrad/core/gradcheck.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/functional/batch_renorm.h>
#include <tapegrad/layers/functional/group_norm.h>
#include <tapegrad/layers/functional/instance_norm.h>
#include <tapegrad/layers/functional/layer_norm.h>
#include <tapegrad/layers/functional/local_response_norm.h>
#include "double_backward_support.h"
#include "test_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using namespace tapegrad::test;

namespace {
const Shape kShapes[] = {Shape{5, 3}, Shape{4, 3, 2}, Shape{2, 3, 2, 2}};
}  // namespace

TEST_CASE("gradgradcheck: batch_norm train/eval, affine or not, tracked or not, 2-D/3-D/4-D",
          "[batchnorm][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(11);
  for (const Shape& s : kShapes)
    for (bool train : {true, false})
      for (bool affine : {true, false})
        for (bool tracked : {true, false}) {
          const NormInputs in = norm_inputs(s, g);
          // untracked: no running statistics, so batch statistics in either mode (PyTorch)
          const bool batch_stats = train || !tracked;
          auto fn = [&](const std::vector<Tensor>& v) {
            functional::RunningStats rs;
            if (tracked) rs = functional::RunningStats{in.rm.clone(), in.rv.clone(), Tensor(), 0.1, true};
            return functional::batch_norm(v[0], affine ? v[1] : Tensor(), affine ? v[2] : Tensor(), rs, batch_stats,
                                          1e-3);
          };
          require_gradgradcheck(fn, affine ? std::vector<Tensor>{in.x, in.w, in.b} : std::vector<Tensor>{in.x},
                                "shape " + shape_str(s) + " train " + std::to_string(train) + " affine " +
                                    std::to_string(affine) + " tracked " + std::to_string(tracked));
        }
}

TEST_CASE("gradgradcheck: batch_norm_relu fused, with and without clip, 2-D and 4-D", "[batchnorm][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(12);
  for (const Shape& s : {Shape{6, 3}, Shape{2, 3, 2, 2}})
    for (bool train : {true, false})
      for (bool clipped : {false, true}) {
        const NormInputs in = norm_inputs(s, g, 0.3, 0.5);
        std::optional<std::pair<double, double>> clip;
        if (clipped) clip = std::pair{0.0, 0.8};
        auto fn = [&](const std::vector<Tensor>& v) {
          functional::RunningStats rs{in.rm.clone(), in.rv.clone(), Tensor(), 0.1, true};
          // times the input, so the second derivative is not zero on the linear pieces
          return mul(functional::batch_norm_relu(v[0], v[1], v[2], rs, train, 1e-3, "batch_norm_relu", clip), v[0]);
        };
        require_gradgradcheck(fn, {in.x, in.w, in.b},
                              "shape " + shape_str(s) + " train " + std::to_string(train) + " clip " + std::to_string(clipped));
      }
}

TEST_CASE("third order: batch_norm train mode, d/dx of the second-order product against central differences",
          "[batchnorm][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(13);
  for (const Shape& s : {Shape{4, 2}, Shape{3, 2, 2}}) {
    const Tensor x0 = uniform(s, -2, 2, Dtype::Float64, g);
    const Tensor w = uniform({2}, 0.5, 1.5, Dtype::Float64, g);
    const Tensor u = uniform(s, -1, 1, Dtype::Float64, g), v = uniform(s, -1, 1, Dtype::Float64, g);
    const ThirdOrder t = third_order(
        [&](const Tensor& x) { return functional::batch_norm(x, w, Tensor(), functional::RunningStats{}, true, 1e-3); },
        x0, u, v);
    INFO("shape " << shape_str(s));
    require_close(t.analytic, t.numeric, 1e-6);
  }
}

TEST_CASE("create_graph gradient of batch_norm equals the fused kernels' gradient", "[batchnorm][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(14);
  for (Dtype dt : {Dtype::Float64, Dtype::Float32})
    for (const Shape& s : kShapes)
      for (bool train : {true, false}) {
        Tensor x = uniform(s, -2, 2, dt, g).requires_grad_();
        Tensor w = uniform({3}, 0.5, 1.5, dt, g).requires_grad_();
        Tensor b = uniform({3}, -1, 1, dt, g).requires_grad_();
        const Tensor u = uniform(s, -1, 1, dt, g);
        Tensor rm = uniform({3}, -1, 1, dt, g), rv = uniform({3}, 0.5, 2, dt, g);
        auto loss = [&] {
          return sum(mul(functional::batch_norm(x, rm.clone(), rv.clone(), w, b, train, 0.1, 1e-5), u));
        };
        const auto fast = autograd::grad({loss()}, {x, w, b});
        const auto slow = autograd::grad({loss()}, {x, w, b}, {}, create_graph());
        const double tol = dt == Dtype::Float64 ? 1e-12 : 2e-5;
        for (int i = 0; i < 3; ++i) {
          INFO("shape " << shape_str(s) << " train " << train << " input " << i);
          if (i == 0) REQUIRE(slow[i].requires_grad());  // dβ = Σ u is a constant here
          require_close(slow[i], fast[i], tol);
        }
      }
}

TEST_CASE("a double backward through BatchNorm changes no running statistic", "[batchnorm][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(15);
  BatchNormOptions o;
  o.dtype = Dtype::Float64;
  BatchNorm2d bn(3, o);
  Tensor x = uniform({2, 3, 2, 2}, -2, 2, Dtype::Float64, g).requires_grad_();
  Tensor y = bn.forward(x);  // one forward: the statistics move once
  const auto rm = bn.running_mean.to_vector(), rv = bn.running_var.to_vector();
  const auto nbt = bn.num_batches_tracked.to_vector();
  Tensor gx = autograd::grad({sum(square(y))}, {x}, {}, create_graph())[0];
  Tensor penalty = sum(square(gx));
  penalty.backward();
  REQUIRE(x.grad().defined());
  REQUIRE(bn.weight.grad().defined());
  REQUIRE(bn.running_mean.to_vector() == rm);
  REQUIRE(bn.running_var.to_vector() == rv);
  REQUIRE(bn.num_batches_tracked.to_vector() == nbt);
}

TEST_CASE("batch_norm's double backward refuses what it cannot differentiate, naming the op",
          "[batchnorm][double_backward]") {
  tapegrad::ModeChecksPause pause;
  SECTION("a constant channel with eps = 0") {
    Tensor x = Tensor::from_vector({1, 0.5, 2, 0.5, 3, 0.5}, {3, 2}, Dtype::Float64).requires_grad_();
    Tensor y = functional::batch_norm(x, Tensor(), Tensor(), functional::RunningStats{}, true, 0.0);
    REQUIRE_THROWS_WITH(autograd::grad({sum(square(y))}, {x}, {}, create_graph()),
                        Catch::Contains("batch_norm") && Catch::Contains("channel 1"));
  }
  SECTION("statistics given from outside the input (batch_norm_with_stats)") {
    Tensor x = Tensor::from_vector({1, 2, 3, 5}, {2, 2}, Dtype::Float64).requires_grad_();
    functional::BatchStats st;
    st.mean = Tensor::from_vector({2, 3.5}, {2}, Dtype::Float64);
    st.var = Tensor::from_vector({1, 2.25}, {2}, Dtype::Float64);
    st.count = 2;
    Tensor y = functional::batch_norm_with_stats(x, st, Tensor(), Tensor(), functional::RunningStats{}, 1e-5);
    REQUIRE_THROWS_AS(autograd::grad({sum(square(y))}, {x}, {}, create_graph()), std::logic_error);
  }
}

TEST_CASE("gradgradcheck: BatchRenorm train mode and InstanceNorm with running statistics (batch_norm's paths)",
          "[batchnorm][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(16);
  for (const Shape& s : {Shape{5, 3}, Shape{2, 3, 2, 2}}) {
    Tensor x = uniform(s, -2, 2, Dtype::Float64, g).requires_grad_();
    Tensor w = uniform({3}, 0.5, 1.5, Dtype::Float64, g).requires_grad_();
    Tensor b = uniform({3}, -1, 1, Dtype::Float64, g).requires_grad_();
    // running statistics far from the batch's (mean 200, std 20): r and d on their clipping
    // bounds, where the paper's stop-gradient backward is the forward's true derivative
    Tensor rm = Tensor::full({3}, 200.0, Dtype::Float64), rv = Tensor::full({3}, 400.0, Dtype::Float64);
    auto renorm = [&](const std::vector<Tensor>& v) {
      Tensor r, d;
      functional::RunningStats rs{rm.clone(), rv.clone(), Tensor(), 0.1, true};
      return functional::batch_renorm(v[0], v[1], v[2], rs, 1e-3, 3.0, 5.0, r, d);
    };
    require_gradgradcheck(renorm, {x, w, b}, "batch_renorm " + shape_str(s));
  }
  const NormInputs in = norm_inputs({2, 3, 4}, g);
  auto inst = [&](const std::vector<Tensor>& v) {
    return functional::instance_norm(v[0], in.rm.clone(), in.rv.clone(), v[1], v[2], false, 0.1, 1e-3);
  };
  require_gradgradcheck(inst, {in.x, in.w, in.b}, "instance_norm eval");
}

TEST_CASE("the row-kernel norms now accept a create_graph backward (refused by name before)",
          "[norms][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(17);
  Tensor x = uniform({2, 4, 3}, -2, 2, Dtype::Float64, g).requires_grad_();
  const Tensor u = uniform({2, 4, 3}, -1, 1, Dtype::Float64, g);
  auto twice = [&](const Tensor& y, const char* op) {
    INFO(op);
    Tensor gx = autograd::grad({sum(mul(y, u))}, {x}, {}, create_graph())[0];
    REQUIRE(gx.requires_grad());
    // the gradient of Σ gx² is a real second derivative: finite and not all zero
    Tensor h = autograd::grad({sum(square(gx))}, {x})[0];
    double largest = 0;
    for (double v : h.to_vector()) {
      REQUIRE(std::isfinite(v));
      largest = std::max(largest, std::abs(v));
    }
    REQUIRE(largest > 1e-3);
  };
  twice(functional::layer_norm(x, Shape{3}), "layer_norm");
  twice(functional::group_norm(x, 2), "group_norm");
  twice(functional::instance_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true), "instance_norm");
  twice(functional::local_response_norm(x, 3, 0.5), "local_response_norm");
  // the first-order backward is unchanged
  REQUIRE(autograd::grad({sum(square(functional::layer_norm(x, Shape{3})))}, {x})[0].defined());
}
