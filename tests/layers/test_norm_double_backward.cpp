// LayerNorm, GroupNorm, InstanceNorm on batch statistics (the shared grouped_norm node) and
// LocalResponseNorm differentiated twice: gradgradcheck in float64 over shapes, groups and
// affine or not, a third-order check against central differences, the create_graph
// gradient against the fused kernels' gradient, the first-order bits left alone, and the
// refusal of a constant group with eps = 0.
#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <string>

#include <tapegrad/core/core.h>
#include <tapegrad/core/gradcheck.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/functional/group_norm.h>
#include <tapegrad/layers/functional/instance_norm.h>
#include <tapegrad/layers/functional/layer_norm.h>
#include <tapegrad/layers/functional/local_response_norm.h>
#include <tapegrad/layers/instance_norm.h>
#include "double_backward_support.h"
#include "test_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using namespace tapegrad::test;

namespace {
// gradgradcheck of fn over x (and w, b when affine), with a message naming the case.
void check_twice(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const Tensor& x, const Tensor& w,
                 const Tensor& b, bool affine, const std::string& what) {
  require_gradgradcheck(fn, affine ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x}, what);
}
bool same_bits(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector(), vb = b.to_vector();
  return a.shape() == b.shape() && std::memcmp(va.data(), vb.data(), va.size() * sizeof(double)) == 0;
}
}  // namespace

TEST_CASE("gradgradcheck: layer_norm over 1 and 2 trailing dims, affine or not", "[norms][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(21);
  struct Case {
    Shape x, normalized;
  };
  for (const Case& c : {Case{{4, 5}, {5}}, Case{{2, 3, 4}, {4}}, Case{{2, 3, 4}, {3, 4}}, Case{{3, 2, 2, 3}, {2, 3}}})
    for (bool affine : {true, false}) {
      Tensor x = uniform(c.x, -2, 2, Dtype::Float64, g).requires_grad_();
      Tensor w = uniform(c.normalized, 0.5, 1.5, Dtype::Float64, g).requires_grad_();
      Tensor b = uniform(c.normalized, -1, 1, Dtype::Float64, g).requires_grad_();
      auto fn = [&](const std::vector<Tensor>& v) {
        return functional::layer_norm(v[0], c.normalized, affine ? v[1] : Tensor(), affine ? v[2] : Tensor(), 1e-3);
      };
      check_twice(fn, x, w, b, affine,
                  "x " + shape_str(c.x) + " normalized " + shape_str(c.normalized) + " affine " +
                      std::to_string(affine));
    }
}

TEST_CASE("gradgradcheck: group_norm on (N, C), (N, C, L), (N, C, H, W), groups 1, 2 and C, affine or not",
          "[norms][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(22);
  for (const Shape& s : {Shape{3, 4}, Shape{2, 4, 3}, Shape{2, 4, 2, 2}})
    for (std::int64_t groups : {1, 2, 4})
      for (bool affine : {true, false}) {
        if (s.size() == 2 && groups == 4) continue;  // one value per group: σ² = 0, nothing to normalise
        Tensor x = uniform(s, -2, 2, Dtype::Float64, g).requires_grad_();
        Tensor w = uniform({4}, 0.5, 1.5, Dtype::Float64, g).requires_grad_();
        Tensor b = uniform({4}, -1, 1, Dtype::Float64, g).requires_grad_();
        auto fn = [&](const std::vector<Tensor>& v) {
          return functional::group_norm(v[0], groups, affine ? v[1] : Tensor(), affine ? v[2] : Tensor(), 1e-3);
        };
        check_twice(fn, x, w, b, affine,
                    "x " + shape_str(s) + " groups " + std::to_string(groups) + " affine " + std::to_string(affine));
      }
}

TEST_CASE("gradgradcheck: instance_norm 1d/2d on batch statistics, affine or not, tracked or not",
          "[norms][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(23);
  for (const Shape& s : {Shape{2, 3, 4}, Shape{2, 3, 2, 3}})
    for (bool affine : {true, false})
      for (bool tracked : {false, true}) {
        const NormInputs in = norm_inputs(s, g);
        auto fn = [&](const std::vector<Tensor>& v) {
          // tracked: the running statistics move, the output still uses the instance's own
          return functional::instance_norm(v[0], tracked ? in.rm.clone() : Tensor(), tracked ? in.rv.clone() : Tensor(),
                                           affine ? v[1] : Tensor(), affine ? v[2] : Tensor(), true, 0.1, 1e-3);
        };
        check_twice(fn, in.x, in.w, in.b, affine,
                    "x " + shape_str(s) + " affine " + std::to_string(affine) + " tracked " + std::to_string(tracked));
      }
}

TEST_CASE("gradgradcheck: the InstanceNorm1d/2d modules in train mode", "[norms][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(24);
  InstanceNormOptions o;
  o.affine = true;
  o.dtype = Dtype::Float64;
  InstanceNorm1d in1(3, o);
  InstanceNorm2d in2(3, o);
  in1.weight.data<double>()[1] = 1.5;
  in2.bias.data<double>()[2] = -0.5;
  Tensor x1 = uniform({2, 3, 5}, -2, 2, Dtype::Float64, g).requires_grad_();
  Tensor x2 = uniform({2, 3, 2, 2}, -2, 2, Dtype::Float64, g).requires_grad_();
  require_gradgradcheck([&](const std::vector<Tensor>& v) { return in1.forward(v[0]); }, {x1}, "InstanceNorm1d");
  require_gradgradcheck([&](const std::vector<Tensor>& v) { return in2.forward(v[0]); }, {x2}, "InstanceNorm2d");
}

TEST_CASE("gradgradcheck: local_response_norm, window sizes 1 to 5, (N, C, L) and (N, C, H, W)",
          "[norms][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(25);
  for (const Shape& s : {Shape{2, 4, 3}, Shape{1, 5, 2, 2}})
    for (std::int64_t size : {1, 2, 3, 5}) {
      Tensor x = uniform(s, -2, 2, Dtype::Float64, g).requires_grad_();
      // alpha large enough that the denominator is far from constant: a real second derivative
      auto fn = [&](const std::vector<Tensor>& v) { return functional::local_response_norm(v[0], size, 0.5, 0.75, 1.0); };
      require_gradgradcheck(fn, {x}, "x " + shape_str(s) + " size " + std::to_string(size));
    }
}

TEST_CASE("third order: group_norm, layer_norm and local_response_norm, d/dx of a second-order product against central differences",
          "[norms][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(26);
  const Shape s{2, 4, 3};
  const Tensor w = uniform({4}, 0.5, 1.5, Dtype::Float64, g);
  const std::function<Tensor(const Tensor&)> ops[] = {
      [&](const Tensor& x) { return functional::group_norm(x, 2, w, Tensor(), 1e-3); },
      [&](const Tensor& x) { return functional::layer_norm(x, Shape{4, 3}, Tensor(), Tensor(), 1e-3); },
      [&](const Tensor& x) { return functional::local_response_norm(x, 3, 0.5, 0.75, 1.0); }};
  const char* names[] = {"group_norm", "layer_norm", "local_response_norm"};
  for (int k = 0; k < 3; ++k) {
    const Tensor x0 = uniform(s, -2, 2, Dtype::Float64, g);
    const Tensor u = uniform(s, -1, 1, Dtype::Float64, g), v = uniform(s, -1, 1, Dtype::Float64, g);
    const ThirdOrder t = third_order(ops[k], x0, u, v);
    INFO(names[k]);
    double largest = 0;
    for (double n : t.numeric) largest = std::max(largest, std::abs(n));
    REQUIRE(largest > 1e-2);  // a third derivative that is really there
    require_close(t.analytic, t.numeric, 1e-6);
  }
}

TEST_CASE("create_graph gradients of the grouped norms and LRN equal the fused kernels' gradients; first order bits kept",
          "[norms][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(27);
  for (Dtype dt : {Dtype::Float64, Dtype::Float32})
    for (int k = 0; k < 5; ++k) {
      const Shape s = k == 0 ? Shape{3, 8} : Shape{2, 4, 3, 2};
      const Shape ws = k == 0 ? Shape{8} : Shape{4};
      Tensor x = uniform(s, -2, 2, dt, g).requires_grad_();
      Tensor w = uniform(ws, 0.5, 1.5, dt, g).requires_grad_();
      Tensor b = uniform(ws, -1, 1, dt, g).requires_grad_();
      const Tensor u = uniform(s, -1, 1, dt, g);
      auto y = [&](const Tensor& xi) {
        switch (k) {
          case 0: return functional::layer_norm(xi, Shape{8}, w, b);
          case 1: return functional::layer_norm(xi, Shape{3, 2}, Tensor(), Tensor());
          case 2: return functional::group_norm(xi, 2, w, b);
          case 3: return functional::instance_norm(xi, Tensor(), Tensor(), w, b, true, 0.1, 1e-5);
          default: return functional::local_response_norm(xi, 3, 0.5, 0.75, 1.0);
        }
      };
      const bool affine = k == 0 || k == 2 || k == 3;
      const std::vector<Tensor> wrt = affine ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x};
      const auto fast = autograd::grad({sum(mul(y(x), u))}, wrt);
      const auto slow = autograd::grad({sum(mul(y(x), u))}, wrt, {}, create_graph());
      const auto again = autograd::grad({sum(mul(y(x), u))}, wrt);
      const double tol = dt == Dtype::Float64 ? 1e-12 : 2e-5;
      Tensor y_nograd;
      {
        NoGradGuard ng;
        y_nograd = y(x.detach());
      }
      INFO("case " << k << " dtype " << dtype_name(dt));
      REQUIRE(same_bits(y(x), y_nograd));  // the forward is one kernel, recorded or not
      for (std::size_t i = 0; i < wrt.size(); ++i) {
        INFO("input " << i);
        if (i == 0) REQUIRE(slow[i].requires_grad());  // dβ = Σ u is a constant here
        REQUIRE_FALSE(fast[i].requires_grad());
        REQUIRE(same_bits(again[i], fast[i]));  // a create_graph pass leaves the fused path alone
        require_close(slow[i], fast[i], tol);
      }
    }
}

TEST_CASE("a double backward through LayerNorm and GroupNorm matches PyTorch 1.13", "[norms][double_backward]") {
  tapegrad::ModeChecksPause pause;
  // x, w, u, v as below; the gradient of Σ v·d(Σ y·u)/dx w.r.t. x and w, from
  // torch.autograd.grad(..., create_graph=True) in float64 (PyTorch 1.13): layer_norm(x, (4,), w),
  // group_norm(x.reshape(1, 4, 2), 2, w)
  Tensor x = Tensor::from_vector({0.5, -1.0, 2.0, 0.25, 1.5, -0.75, 0.0, 1.0}, {2, 4}, Dtype::Float64).requires_grad_();
  Tensor w = Tensor::from_vector({1.0, 0.5, 2.0, -1.0}, {4}, Dtype::Float64).requires_grad_();
  const Tensor u = Tensor::from_vector({1.0, -2.0, 0.5, 0.25, -1.0, 0.75, 2.0, -0.5}, {2, 4}, Dtype::Float64);
  const Tensor v = Tensor::from_vector({0.3, 0.1, -0.2, 0.4, -0.6, 0.5, 0.2, -0.1}, {2, 4}, Dtype::Float64);
  SECTION("layer_norm") {
    Tensor gx = autograd::grad({sum(mul(functional::layer_norm(x, Shape{4}, w, Tensor(), 1e-5), u))}, {x}, {},
                               create_graph())[0];
    const auto d = autograd::grad({sum(mul(gx, v))}, {x, w});
    require_close(d[0], std::vector<double>{-0.02112950913693215, 0.15528789772916768, 0.0399960944781968, -0.17415448307043224,
                                          -0.6937829554868711, -0.8602690527418289, 1.3811820654401488, 0.17286994278855103}, 1e-10);
    require_close(d[1], std::vector<double>{0.2853851860379115, 0.36689049285949293, -0.07566434413035814, -0.034469474779821443}, 1e-10);
  }
  SECTION("group_norm, 2 groups of 2 channels x 2 positions") {
    Tensor x3 = reshape(x, {1, 4, 2});
    Tensor gx = autograd::grad({sum(mul(functional::group_norm(x3, 2, w, Tensor(), 1e-5), reshape(u, {1, 4, 2})))},
                               {x}, {}, create_graph())[0];
    const auto d = autograd::grad({sum(mul(gx, v))}, {x, w});
    require_close(d[0], std::vector<double>{0.0030786926612246246, 0.22797211861015082, -0.14107589458275208, -0.08997491668862329,
                                          -0.5078606821791076, 0.5584843833637858, -0.9344992294209178, 0.88387552823624}, 1e-10);
    require_close(d[1], std::vector<double>{0.5450295128887721, -0.027880806689954504, 0.10724616600863213, -0.08225301222022507}, 1e-10);
  }
}

TEST_CASE("the grouped norms' double backward refuses a constant group with eps = 0, naming the op and the group",
          "[norms][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 0.5, 0.5, 0.5, 0.5}, {2, 4}, Dtype::Float64).requires_grad_();
  Tensor y = functional::layer_norm(x, Shape{4}, Tensor(), Tensor(), 0.0);
  REQUIRE_THROWS_AS(autograd::grad({sum(mul(y, x))}, {x}, {}, create_graph()), std::logic_error);
  Tensor y2 = functional::group_norm(reshape(x, {1, 4, 2}), 2, Tensor(), Tensor(), 0.0);
  REQUIRE_THROWS_WITH(autograd::grad({sum(mul(y2, reshape(x, {1, 4, 2})))}, {x}, {}, create_graph()),
                      Catch::Contains("group_norm") && Catch::Contains("group 1 of sample 0"));
}
