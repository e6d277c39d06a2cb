// Conv2d and the pools differentiated twice (and three times): gradgradcheck in float64 over
// conv2d's stride/padding/dilation/groups/bias grid, the 1x1 and depthwise shapes, the oneDNN
// backend in float32 against float64, MaxPool2d (the 2x2 kernel, padding, dilation,
// ceil_mode), AvgPool2d (count_include_pad, ceil_mode, divisor_override against PyTorch),
// AdaptiveAvgPool2d (non-divisible sizes), a small CNN's gradient penalty and a Sequential
// CNN's Hessian-vector product, the create_graph gradient equal bit for bit to the first-order
// one, and the gradient ops' errors.
#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <string>

#include <tapegrad/core/core.h>
#include <tapegrad/core/gradcheck.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/functional/conv.h>
#include <tapegrad/layers/functional/conv_grad_ops.h>
#include <tapegrad/layers/functional/kernels/conv_dnnl.h>
#include <tapegrad/layers/functional/pool_grad_ops.h>
#include <tapegrad/layers/functional/pooling.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/pooling.h>
#include <tapegrad/layers/sequential.h>
#include "test_support.h"

using namespace tapegrad;
using namespace tapegrad::layers::functional;

namespace {

autograd::GradOptions create_graph(bool on = true) {
  autograd::GradOptions o;
  o.create_graph = on;
  o.retain_graph = true;
  return o;
}

// Same shape and the same bytes.
bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

struct BackendGuard {
  ConvBackend saved = conv_backend();
  ~BackendGuard() { set_conv_backend(saved); }
};

struct ConvCase {
  Size2 stride, padding, dilation;
  std::int64_t groups;
  bool bias;
};

}  // namespace

TEST_CASE("gradgradcheck: conv2d over stride, padding, dilation, groups and bias (im2col, float64)",
          "[conv][double_backward]") {
  Generator gen(3);
  for (std::int64_t s : {1, 2})
    for (std::int64_t p : {0, 1})
      for (std::int64_t d : {1, 2})
        for (std::int64_t groups : {1, 2})
          for (bool bias : {true, false}) {
            Tensor x = uniform({2, 4, 5, 4}, -1, 1, Dtype::Float64, gen).requires_grad_();
            Tensor w = uniform({4, 4 / groups, 3, 2}, -1, 1, Dtype::Float64, gen).requires_grad_();
            Tensor b = uniform({4}, -1, 1, Dtype::Float64, gen).requires_grad_();
            auto fn = [&](const std::vector<Tensor>& v) {
              return conv2d(v[0], v[1], bias ? v[2] : Tensor(), s, p, d, groups);
            };
            auto r = gradgradcheck(fn, bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w});
            INFO("stride " << s << " padding " << p << " dilation " << d << " groups " << groups << " bias " << bias
                           << ": " << r.message);
            REQUIRE(r.ok);
          }
}

TEST_CASE("gradgradcheck: conv2d's 1x1 direct path, depthwise, rectangular windows", "[conv][double_backward]") {
  Generator gen(4);
  const struct {
    Shape x, w;
    ConvCase c;
  } cases[] = {
      {{2, 3, 4, 5}, {4, 3, 1, 1}, {1, 0, 1, 1, true}},           // 1x1, stride 1, no padding: no im2col
      {{2, 3, 5, 5}, {3, 1, 3, 3}, {1, 1, 1, 3, true}},           // depthwise
      {{1, 4, 6, 5}, {8, 1, 3, 3}, {2, 1, 1, 4, false}},          // depthwise, channel multiplier 2
      {{2, 2, 7, 6}, {3, 2, 2, 3}, {{2, 3}, {1, 0}, {2, 1}, 1, true}},  // per-dim stride/padding/dilation
      {{1, 2, 3, 3}, {2, 2, 3, 3}, {1, 2, 1, 1, true}},           // padding larger than the kernel's half
  };
  for (const auto& k : cases) {
    Tensor x = uniform(k.x, -1, 1, Dtype::Float64, gen).requires_grad_();
    Tensor w = uniform(k.w, -1, 1, Dtype::Float64, gen).requires_grad_();
    Tensor b = uniform({k.w[0]}, -1, 1, Dtype::Float64, gen).requires_grad_();
    auto fn = [&](const std::vector<Tensor>& v) {
      return conv2d(v[0], v[1], k.c.bias ? v[2] : Tensor(), k.c.stride, k.c.padding, k.c.dilation, k.c.groups);
    };
    auto r = gradgradcheck(fn, k.c.bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w});
    INFO("x " << shape_str(k.x) << " w " << shape_str(k.w) << ": " << r.message);
    REQUIRE(r.ok);
  }
}

TEST_CASE("conv2d: third order (gradgradcheck of a create_graph gradient)", "[conv][double_backward]") {
  Generator gen(5);
  for (std::int64_t groups : {1, 2}) {
    Tensor x = uniform({1, 2, 4, 4}, -1, 1, Dtype::Float64, gen).requires_grad_();
    Tensor w = uniform({2, 2 / groups, 2, 2}, -1, 1, Dtype::Float64, gen).requires_grad_();
    Tensor b = uniform({2}, -1, 1, Dtype::Float64, gen).requires_grad_();
    // fn = d/dx Σ conv(x, w, b)³ (create_graph): its second derivative is the loss's fourth
    // mixed derivative through three conv2d backwards
    auto fn = [&](const std::vector<Tensor>& v) {
      const EnableGradGuard eg;  // gradgradcheck's differences run under no-grad; the inner gradient needs a graph
      Tensor y = conv2d(v[0], v[1], v[2], 1, 1, 1, groups);
      Tensor loss = sum(mul(square(y), y));
      return autograd::grad({loss}, {v[0]}, {}, create_graph())[0];
    };
    auto r = gradgradcheck(fn, {x, w, b});
    INFO("groups " << groups << ": " << r.message);
    REQUIRE(r.ok);
  }
}

TEST_CASE("conv2d: the oneDNN backend differentiates twice (float32 against float64)", "[conv][double_backward]") {
  if (!conv_onednn_available()) {
    SUCCEED("built without oneDNN");
    return;
  }
  BackendGuard guard;
  Generator gen(6);
  const ConvCase cases[] = {{1, 1, 1, 1, true}, {2, 1, 1, 1, false}, {1, 2, 2, 1, true}, {1, 1, 1, 2, true}};
  for (const ConvCase& c : cases) {
    Tensor x64 = uniform({2, 4, 6, 5}, -1, 1, Dtype::Float64, gen), w64 = uniform({6, 4 / c.groups, 3, 3}, -1, 1, Dtype::Float64, gen);
    Tensor b64 = uniform({6}, -1, 1, Dtype::Float64, gen), u64 = uniform({2, 4, 6, 5}, -1, 1, Dtype::Float64, gen);
    // H·v of L = Σ tanh(conv(x, w, b)) along v = u for x (so every conv grad op runs)
    auto hvp = [&](Dtype dt, ConvBackend be) {
      set_conv_backend(be);
      Tensor x = x64.to(dt).requires_grad_(), w = w64.to(dt).requires_grad_(), b = b64.to(dt).requires_grad_();
      Tensor y = conv2d(x, w, c.bias ? b : Tensor(), c.stride, c.padding, c.dilation, c.groups);
      Tensor loss = sum(tanh(y));
      std::vector<Tensor> g1 = autograd::grad({loss}, {x, w}, {}, create_graph());
      Tensor dot = add(sum(mul(g1[0], u64.to(dt))), sum(mul(g1[1], g1[1])));
      return autograd::grad({dot}, {x, w}, {});
    };
    const auto before = kernels::dnnl_conv_primitives_created();
    const auto got = hvp(Dtype::Float32, ConvBackend::OneDNN);
    if (conv_onednn_available()) REQUIRE(kernels::dnnl_conv_primitives_created() > before);  // oneDNN ran
    const auto im2col32 = hvp(Dtype::Float32, ConvBackend::Im2col);
    const auto want = hvp(Dtype::Float64, ConvBackend::Im2col);
    for (std::size_t i = 0; i < 2; ++i) {
      INFO("stride " << c.stride.h << " padding " << c.padding.h << " dilation " << c.dilation.h << " groups "
                     << c.groups << " input " << i);
      test::require_close(got[i].to(Dtype::Float64), want[i], 2e-4);
      test::require_close(im2col32[i].to(Dtype::Float64), want[i], 2e-4);
    }
  }
}

TEST_CASE("conv2d: a create_graph gradient has the first-order gradient's bits", "[conv][double_backward]") {
  BackendGuard guard;
  Generator gen(7);
  for (ConvBackend be : {ConvBackend::Im2col, ConvBackend::OneDNN}) {
    if (be == ConvBackend::OneDNN && !conv_onednn_available()) continue;
    set_conv_backend(be);
    for (Dtype dt : {Dtype::Float32, Dtype::Float64}) {
      Tensor x = uniform({3, 16, 7, 6}, -1, 1, dt, gen).requires_grad_();
      Tensor w = uniform({8, 16, 3, 3}, -1, 1, dt, gen).requires_grad_();
      Tensor b = uniform({8}, -1, 1, dt, gen).requires_grad_();
      Tensor y = conv2d(x, w, b, 2, 1, 1, 1);
      Tensor u = uniform(y.shape(), -1, 1, dt, gen);
      const auto first = autograd::grad({y}, {x, w, b}, {u}, create_graph(false));
      const auto second = autograd::grad({y}, {x, w, b}, {u}, create_graph(true));
      INFO((be == ConvBackend::OneDNN ? "oneDNN " : "im2col ") << dtype_name(dt));
      REQUIRE(second[0].requires_grad());
      REQUIRE(bit_equal(first[0], second[0].detach()));
      REQUIRE(bit_equal(first[1], second[1].detach()));
      test::require_close(second[2].to(Dtype::Float64), first[2].to(Dtype::Float64), 1e-5);  // Σ in another order
      // the same forward bits as a conv2d that records nothing
      NoGradGuard ng;
      REQUIRE(bit_equal(y.detach(), conv2d(x, w, b, 2, 1, 1, 1)));
    }
  }
}

TEST_CASE("conv2d and max_pool2d with a zero size differentiate twice: zeros, no kernel run", "[conv][pooling][double_backward]") {
  Generator gen(14);
  for (const Shape& xs : {Shape{0, 2, 4, 4}, Shape{2, 0, 4, 4}}) {
    Tensor x = uniform(xs, -1, 1, Dtype::Float64, gen).requires_grad_();
    Tensor w = uniform({3, xs[1], 3, 3}, -1, 1, Dtype::Float64, gen).requires_grad_();
    Tensor b = uniform({3}, -1, 1, Dtype::Float64, gen).requires_grad_();
    Tensor y = conv2d(x, w, b, 1, 1);
    Tensor loss = sum(square(y));  // N = 0: 0; C_in = 0: Σ b² over the outputs
    std::vector<Tensor> g = autograd::grad({loss}, {x, w, b}, {}, create_graph());
    REQUIRE(g[0].shape() == xs);
    REQUIRE(g[1].shape() == w.shape());
    Tensor gg = autograd::grad({sum(square(g[2]))}, {b}, {}, create_graph(false))[0];
    // db = 2·Σ_{n,i,j} b = 2·N·16·b, so d Σ db² / db = 8·(N·16)²·b
    const double m = static_cast<double>(xs[0]) * 16;
    test::require_close(gg, mul(b, 8 * m * m).detach());
  }
  Tensor x = uniform({0, 2, 4, 4}, -1, 1, Dtype::Float64, gen).requires_grad_();
  Tensor g = autograd::grad({sum(square(max_pool2d(x, 2)))}, {x}, {}, create_graph())[0];
  REQUIRE(g.shape() == x.shape());
}

namespace {
// A pooling case: input shape, kernel, stride (the kernel when none), padding, dilation, ceil_mode.
struct PoolCase {
  Shape x;
  Size2 k;
  std::optional<Size2> s;
  Size2 p;
  Size2 d = 1;
  bool ceil = false;
};
}  // namespace

TEST_CASE("gradgradcheck: max_pool2d (2x2 kernel, padding, dilation, ceil_mode)", "[pooling][double_backward]") {
  Generator gen(8);
  const PoolCase cases[] = {
      {{2, 3, 4, 6}, 2, std::nullopt, 0, 1, false},  // the 2x2, stride 2 kernel
      {{2, 2, 5, 6}, 2, std::nullopt, 0, 1, false},  // the 2x2 kernel, odd height
      {{1, 2, 5, 5}, 3, 2, 1, 1, false},
      {{1, 2, 5, 5}, 3, 2, 1, 1, true},
      {{1, 2, 6, 7}, {2, 3}, {{1, 2}}, {1, 1}, 2, false},
      {{2, 1, 5, 5}, 2, std::nullopt, 0, 1, true},  // ceil_mode: partial windows at the edge
  };
  for (const auto& c : cases) {
    Tensor x = uniform(c.x, -2, 2, Dtype::Float64, gen).requires_grad_();
    // max_pool2d then a square, so the second derivative for x is not only zero
    auto fn = [&](const std::vector<Tensor>& v) { return square(max_pool2d(v[0], c.k, c.s, c.p, c.d, c.ceil)); };
    auto r = gradgradcheck(fn, {x});
    INFO("x " << shape_str(c.x) << " kernel " << c.k.str() << " ceil " << c.ceil << ": " << r.message);
    REQUIRE(r.ok);
    auto r2 = gradgradcheck([&](const std::vector<Tensor>& v) { return max_pool2d(v[0], c.k, c.s, c.p, c.d, c.ceil); },
                            {x});
    INFO(r2.message);
    REQUIRE(r2.ok);
    // first order unchanged: the create_graph gradient has the fast scatter's bits
    Tensor y = max_pool2d(x, c.k, c.s, c.p, c.d, c.ceil);
    Tensor u = uniform(y.shape(), -1, 1, Dtype::Float64, gen);
    REQUIRE(bit_equal(autograd::grad({y}, {x}, {u}, create_graph(false))[0],
                      autograd::grad({y}, {x}, {u}, create_graph(true))[0].detach()));
  }
}

TEST_CASE("gradgradcheck: avg_pool2d (count_include_pad, ceil_mode, padding, stride)", "[pooling][double_backward]") {
  Generator gen(9);
  const PoolCase cases[] = {
      {{2, 2, 4, 6}, 2, std::nullopt, 0}, {{1, 2, 5, 5}, 3, 2, 1}, {{1, 3, 6, 5}, {3, 2}, {{2, 1}}, {1, 1}}};
  for (const auto& c : cases)
    for (bool ceil : {false, true})
      for (bool include_pad : {true, false}) {
        Tensor x = uniform(c.x, -2, 2, Dtype::Float64, gen).requires_grad_();
        auto fn = [&](const std::vector<Tensor>& v) { return square(avg_pool2d(v[0], c.k, c.s, c.p, ceil, include_pad)); };
        auto r = gradgradcheck(fn, {x});
        INFO("x " << shape_str(c.x) << " kernel " << c.k.str() << " ceil " << ceil << " count_include_pad "
                  << include_pad << ": " << r.message);
        REQUIRE(r.ok);
        Tensor y = avg_pool2d(x, c.k, c.s, c.p, ceil, include_pad);
        Tensor u = uniform(y.shape(), -1, 1, Dtype::Float64, gen);
        REQUIRE(bit_equal(autograd::grad({y}, {x}, {u}, create_graph(false))[0],
                          autograd::grad({y}, {x}, {u}, create_graph(true))[0].detach()));
      }
}

TEST_CASE("avg_pool2d's divisor_override: PyTorch's values and gradient, gradgradcheck, zero refused",
          "[pooling][double_backward]") {
  // PyTorch 1.13: x = arange(20).reshape(1, 1, 4, 5) / 7,
  // F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False, divisor_override=5), u = 1..9
  Tensor x = mul(Tensor::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19},
                                     {1, 1, 4, 5}, Dtype::Float64),
                 1.0 / 7).requires_grad_();
  Tensor y = avg_pool2d(x, 3, 2, 1, true, false, 5);
  test::require_close(y, {0.34285714285714286, 0.7714285714285715, 0.6857142857142857, 1.8, 3.0857142857142854,
                          2.3142857142857145, 0.8857142857142858, 1.4571428571428569, 1.0571428571428574});
  Tensor u = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}, y.shape(), Dtype::Float64);
  test::require_close(autograd::grad({y}, {x}, {u})[0],
                      {0.2, 0.6, 0.4, 1.0, 0.6, 1.0, 2.4, 1.4, 3.2, 1.8, 0.8, 1.8, 1.0, 2.2, 1.2, 2.2, 4.8, 2.6, 5.6, 3.0});
  // a negative divisor, as PyTorch allows: F.avg_pool2d(x, 2, divisor_override=-3)
  test::require_close(avg_pool2d(x, 2, std::nullopt, 0, false, true, -3),
                      {-0.5714285714285715, -0.9523809523809522, -2.476190476190476, -2.857142857142857});
  for (std::int64_t d : {5, -3}) {
    auto r = gradgradcheck([d](const std::vector<Tensor>& v) { return square(avg_pool2d(v[0], 3, 2, 1, true, false, d)); },
                           {x});
    INFO("divisor_override " << d << ": " << r.message);
    REQUIRE(r.ok);
  }
  REQUIRE_THROWS_WITH(avg_pool2d(x, 2, std::nullopt, 0, false, true, 0),
                      Catch::Contains("avg_pool2d: expected divisor_override != 0, got 0"));
}

TEST_CASE("gradgradcheck: adaptive_avg_pool2d with sizes that do not divide", "[pooling][double_backward]") {
  Generator gen(10);
  const struct {
    Shape x;
    Size2 out;
  } cases[] = {{{2, 2, 5, 7}, {3, 4}}, {{1, 3, 4, 4}, 3}, {{2, 2, 3, 5}, 1}, {{1, 1, 3, 2}, {5, 4}}};
  for (const auto& c : cases) {
    Tensor x = uniform(c.x, -2, 2, Dtype::Float64, gen).requires_grad_();
    auto fn = [&](const std::vector<Tensor>& v) { return square(adaptive_avg_pool2d(v[0], c.out)); };
    auto r = gradgradcheck(fn, {x});
    INFO("x " << shape_str(c.x) << " out " << c.out.str() << ": " << r.message);
    REQUIRE(r.ok);
    Tensor y = adaptive_avg_pool2d(x, c.out);
    Tensor u = uniform(y.shape(), -1, 1, Dtype::Float64, gen);
    REQUIRE(bit_equal(autograd::grad({y}, {x}, {u}, create_graph(false))[0],
                      autograd::grad({y}, {x}, {u}, create_graph(true))[0].detach()));
  }
}

TEST_CASE("the pools' gradient ops: third order and each op's adjoint", "[pooling][double_backward]") {
  Generator gen(11);
  Tensor x = uniform({1, 2, 5, 6}, -2, 2, Dtype::Float64, gen).requires_grad_();
  // d/dx Σ pool(x)³, differentiated twice more
  auto third = [&](auto pool) {
    return [pool](const std::vector<Tensor>& v) {
      const EnableGradGuard eg;
      Tensor y = pool(v[0]);
      return autograd::grad({sum(mul(square(y), y))}, {v[0]}, {}, create_graph())[0];
    };
  };
  for (auto r : {gradgradcheck(third([](const Tensor& t) { return max_pool2d(t, 2, std::nullopt, 0, 1, true); }), {x}),
                 gradgradcheck(third([](const Tensor& t) { return avg_pool2d(t, 3, 2, 1, true, false); }), {x}),
                 gradgradcheck(third([](const Tensor& t) { return adaptive_avg_pool2d(t, {3, 4}); }), {x})}) {
    INFO(r.message);
    REQUIRE(r.ok);
  }
  // <gather(t), g> = <t, scatter(g)>: the two are each other's adjoint
  Tensor idx = Tensor::from_vector(std::vector<double>{0, 5, 29, 7, 7, 12}, {1, 1, 2, 3}, Dtype::Float64).to(Dtype::Int64);
  Tensor t = uniform({1, 1, 5, 6}, -1, 1, Dtype::Float64, gen), g = uniform({1, 1, 2, 3}, -1, 1, Dtype::Float64, gen);
  const double lhs = sum(mul(max_pool2d_gather(t, idx), g)).item();
  const double rhs = sum(mul(t, max_pool2d_scatter(g, idx, t.shape()))).item();
  REQUIRE(lhs == Approx(rhs).epsilon(1e-14));
  REQUIRE(max_pool2d_scatter(g, idx, t.shape()).at(7) == g.at(3) + g.at(4));  // a repeated index adds
}

TEST_CASE("a small CNN's gradient penalty: gradgradcheck and gradcheck of the penalty",
          "[conv][pooling][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator gen(12);
  Tensor x = uniform({3, 1, 6, 6}, -1, 1, Dtype::Float64, gen).requires_grad_();
  Tensor wc = uniform({2, 1, 3, 3}, -1, 1, Dtype::Float64, gen).requires_grad_();
  Tensor bc = uniform({2}, -1, 1, Dtype::Float64, gen).requires_grad_();
  Tensor gamma = uniform({2}, 0.5, 1.5, Dtype::Float64, gen).requires_grad_();
  Tensor beta = uniform({2}, -0.5, 0.5, Dtype::Float64, gen).requires_grad_();
  Tensor wl = uniform({1, 8}, -1, 1, Dtype::Float64, gen).requires_grad_();
  // conv(1→2, 3x3, padding 1) → BatchNorm2d (train) → ReLU → MaxPool2d(3) → Linear(8 → 1)
  auto net = [](const std::vector<Tensor>& v) {
    Tensor h = conv2d(v[0], v[1], v[2], 1, 1);
    h = batch_norm(h, v[3], v[4], RunningStats{}, true, 1e-5);
    h = max_pool2d(relu(h), 3);
    return linear(reshape(h, {h.size(0), 8}), v[5]);
  };
  const std::vector<Tensor> all{x, wc, bc, gamma, beta, wl};
  auto r = gradgradcheck(net, all);
  INFO("gradgradcheck: " << r.message);
  REQUIRE(r.ok);
  // penalty(θ) = Σ (d Σ net / dx)², whose gradient for θ runs every op's double backward
  auto penalty = [&](const std::vector<Tensor>& v) {
    const EnableGradGuard eg;  // gradcheck's differences run under no-grad
    std::vector<Tensor> in{x, v[0], v[1], v[2], v[3], v[4]};
    Tensor gx = autograd::grad({sum(net(in))}, {x}, {}, create_graph())[0];
    return sum(square(gx));
  };
  auto r2 = gradcheck(penalty, {wc, bc, gamma, beta, wl});
  INFO("gradcheck of the penalty: " << r2.message);
  REQUIRE(r2.ok);
}

TEST_CASE("a Sequential CNN's Hessian-vector product against central differences of its gradient",
          "[conv][pooling][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator gen(13);
  using namespace tapegrad::layers;
  // Conv2d(2→3, 3x3, stride 2, padding 1) → BatchNorm2d → ReLU → AvgPool2d(2, ceil_mode) →
  // Conv2d(3→2, 1x1) → AdaptiveAvgPool2d(1) → Flatten → Linear(2 → 1), in float64
  Sequential net({std::make_shared<Conv2d>(Conv2dOptions(2, 3, 3).stride(2).padding(1), gen),
                  std::make_shared<BatchNorm2d>(3), std::make_shared<ReLU>(),
                  std::make_shared<AvgPool2d>(AvgPool2dOptions(2).ceil_mode(true)),
                  std::make_shared<Conv2d>(Conv2dOptions(3, 2, 1), gen), std::make_shared<AdaptiveAvgPool2d>(1),
                  std::make_shared<Flatten>(), std::make_shared<Linear>(LinearOptions(2, 1), gen)});
  net.to(Dtype::Float64);
  const Tensor x = uniform({4, 2, 7, 7}, -1, 1, Dtype::Float64, gen);
  const std::vector<Tensor> params = net.parameters();
  auto loss_of = [&] { return sum(square(net.forward(x))); };
  std::vector<Tensor> v;
  for (const Tensor& p : params) v.push_back(uniform(p.shape(), -1, 1, Dtype::Float64, gen));
  const std::vector<Tensor> hv = autograd::hessian_vector_product(loss_of(), params, v);
  // (∇L(θ + εv) − ∇L(θ − εv)) / 2ε
  auto grad_at = [&](double step) {
    {
      NoGradGuard ng;
      for (std::size_t i = 0; i < params.size(); ++i) const_cast<Tensor&>(params[i]).add_(v[i], step);
    }
    std::vector<Tensor> g = autograd::grad({loss_of()}, params);
    NoGradGuard ng;
    for (std::size_t i = 0; i < params.size(); ++i) const_cast<Tensor&>(params[i]).add_(v[i], -step);
    return g;
  };
  const double eps = 1e-5;
  const std::vector<Tensor> gp = grad_at(eps), gm = grad_at(-eps);
  double hv_norm = 0;
  for (const Tensor& h : hv) hv_norm += sum(square(h)).item();
  REQUIRE(hv_norm > 1e-2);  // a real product, not zeros on both sides
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor numeric = mul(sub(gp[i], gm[i]), 1 / (2 * eps));
    INFO("parameter " << i << " " << shape_str(params[i].shape()));
    test::require_close(hv[i], numeric, 1e-6);
  }
}

TEST_CASE("the conv and pool gradient ops refuse bad shapes, naming expected and actual", "[conv][pooling][double_backward]") {
  Tensor w = Tensor::zeros({4, 2, 3, 3}, Dtype::Float64), g = Tensor::zeros({1, 4, 3, 3}, Dtype::Float64);
  const Conv2dParams p{};
  REQUIRE(conv2d_input_grad(g, w, {1, 2, 5, 5}, p).shape() == Shape{1, 2, 5, 5});
  REQUIRE_THROWS_WITH(conv2d_input_grad(g, w, {1, 2, 6, 5}, p),
                      Catch::Contains("expected g of conv2d's output shape [1, 4, 4, 3], got [1, 4, 3, 3]"));
  REQUIRE_THROWS_WITH(conv2d_input_grad(g, w, {1, 3, 5, 5}, p), Catch::Contains("expected input with 2 channels"));
  REQUIRE_THROWS_WITH(conv2d_weight_grad(Tensor::zeros({1, 2, 5, 5}, Dtype::Float64), g, {4, 2, 2, 2}, p),
                      Catch::Contains("conv2d_weight_grad: expected g of conv2d's output shape [1, 4, 4, 4]"));
  REQUIRE_THROWS_WITH(conv2d_input_grad(g.to(Dtype::Float32), w, {1, 2, 5, 5}, p), Catch::Contains("conv2d_input_grad"));
  Tensor idx = Tensor::zeros({1, 4, 3, 3}, Dtype::Int64);
  REQUIRE_NOTHROW(max_pool2d_scatter(g, idx, {1, 4, 2, 2}));
  idx.data<std::int64_t>()[5] = 4;
  REQUIRE_THROWS_WITH(max_pool2d_scatter(g, idx, {1, 4, 2, 2}),
                      Catch::Contains("expected indices in [0, 4)") && Catch::Contains("got 4 at flat position 5"));
  REQUIRE_THROWS_WITH(max_pool2d_scatter(g, Tensor::zeros({1, 4, 3, 2}, Dtype::Int64), {1, 4, 6, 6}),
                      Catch::Contains("expected indices of shape [1, 4, 3, 3], got [1, 4, 3, 2]"));
  REQUIRE_THROWS_WITH(avg_pool2d_backward(g, {1, 4, 6, 6}, 3, 1),
                      Catch::Contains("expected g of avg_pool2d's output shape [1, 4, 4, 4], got [1, 4, 3, 3]"));
  REQUIRE_THROWS_WITH(adaptive_avg_pool2d_backward(g, {2, 4, 6, 6}),
                      Catch::Contains("expected g of shape (2, 4, OH, OW)"));
}
