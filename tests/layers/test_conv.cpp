// Conv2d: a direct-loop reference in float64, gradcheck over strides, padding, dilation,
// groups and odd sizes, threads, the module's init, and its errors.
#include <catch2/catch.hpp>

#include <cmath>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/functional/conv.h>
#include "conv_configs.h"
#include "test_errors_support.h"
#include "test_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using functional::conv2d;
using test::Cfg;
using test::kConfigs;

namespace {

// The definition, loop by loop: y[n,o,i,j] = b[o] + Σ w[o,c,p,q]·x[n, g·Cg + c, i·sh−ph+p·dh, j·sw−pw+q·dw].
std::vector<double> direct(const Tensor& x, const Tensor& w, const Tensor& b, const Cfg& c, std::int64_t OH,
                           std::int64_t OW) {
  std::vector<double> y(static_cast<std::size_t>(c.N * c.O * OH * OW));
  const std::int64_t Cg = c.C / c.g, Og = c.O / c.g;
  for (std::int64_t n = 0; n < c.N; ++n)
    for (std::int64_t o = 0; o < c.O; ++o)
      for (std::int64_t i = 0; i < OH; ++i)
        for (std::int64_t j = 0; j < OW; ++j) {
          double acc = c.bias ? b.at(o) : 0.0;
          for (std::int64_t ci = 0; ci < Cg; ++ci)
            for (std::int64_t p = 0; p < c.kh; ++p)
              for (std::int64_t q = 0; q < c.kw; ++q) {
                const std::int64_t ih = i * c.s.h - c.p.h + p * c.d.h, iw = j * c.s.w - c.p.w + q * c.d.w;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                const std::int64_t cin = (o / Og) * Cg + ci;
                acc += w.at(((o * Cg + ci) * c.kh + p) * c.kw + q) * x.at(((n * c.C + cin) * c.H + ih) * c.W + iw);
              }
          y[static_cast<std::size_t>(((n * c.O + o) * OH + i) * OW + j)] = acc;
        }
  return y;
}


}  // namespace

TEST_CASE("conv2d matches the definition in float64 and float32, on 1 and 2 threads", "[conv]") {
  Generator gen(11);
  for (const Cfg& c : kConfigs) {
    const Tensor x = uniform({c.N, c.C, c.H, c.W}, -1, 1, Dtype::Float64, gen);
    const Tensor w = uniform({c.O, c.C / c.g, c.kh, c.kw}, -1, 1, Dtype::Float64, gen);
    const Tensor b = c.bias ? uniform({c.O}, -1, 1, Dtype::Float64, gen) : Tensor();
    const std::int64_t OH = functional::conv_output_size(c.H, c.kh, c.s.h, c.p.h, c.d.h);
    const std::int64_t OW = functional::conv_output_size(c.W, c.kw, c.s.w, c.p.w, c.d.w);
    const auto want = direct(x, w, b, c, OH, OW);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      Tensor y = conv2d(x, w, b, c.s, c.p, c.d, c.g);
      REQUIRE(y.shape() == Shape{c.N, c.O, OH, OW});
      test::require_close(y.to_vector(), want, 1e-12);
      Tensor y32 = conv2d(x.to(Dtype::Float32), w.to(Dtype::Float32), c.bias ? b.to(Dtype::Float32) : Tensor(), c.s,
                          c.p, c.d, c.g);
      REQUIRE(y32.dtype() == Dtype::Float32);
      test::require_close(y32.to_vector(), want, 1e-5);
    }
  }
  set_num_threads(2);
}

TEST_CASE("conv2d gradcheck: strides, padding, dilation, groups, odd sizes, 1x1", "[conv][gradcheck]") {
  Generator gen(12);
  for (const Cfg& c : kConfigs) {
    Tensor x = uniform({c.N, c.C, c.H, c.W}, -1, 1, Dtype::Float64, gen).requires_grad_();
    Tensor w = uniform({c.O, c.C / c.g, c.kh, c.kw}, -1, 1, Dtype::Float64, gen).requires_grad_();
    std::vector<Tensor> in{x, w};
    if (c.bias) in.push_back(uniform({c.O}, -1, 1, Dtype::Float64, gen).requires_grad_());
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      auto r = gradcheck(
          [&](const std::vector<Tensor>& v) {
            return conv2d(v[0], v[1], v.size() > 2 ? v[2] : Tensor(), c.s, c.p, c.d, c.g);
          },
          in);
      INFO("config C=" << c.C << " O=" << c.O << " k=" << c.kh << "x" << c.kw << " s=" << c.s.str()
                       << " p=" << c.p.str() << " d=" << c.d.str() << " g=" << c.g << ": " << r.message);
      REQUIRE(r.ok);
    }
  }
  set_num_threads(2);
}

TEST_CASE("conv2d backward: only the inputs that need a gradient get one", "[conv]") {
  Generator gen(13);
  Tensor x = uniform({2, 2, 4, 4}, -1, 1, Dtype::Float64, gen);
  Tensor w = uniform({3, 2, 3, 3}, -1, 1, Dtype::Float64, gen).requires_grad_();
  sum(conv2d(x, w, Tensor(), 1, 1)).backward();
  REQUIRE(w.grad().defined());
  REQUIRE_FALSE(x.grad().defined());
  // dW of sum(y) with padding 1 counts each x value once per output it reaches
  Tensor ones = Tensor::ones({1, 1, 3, 3}, Dtype::Float64).requires_grad_();
  sum(conv2d(Tensor::ones({1, 1, 3, 3}, Dtype::Float64), ones, Tensor(), 1, 1)).backward();
  test::require_close(ones.grad().to_vector(), {4, 6, 4, 6, 9, 6, 4, 6, 4}, 0);
}

TEST_CASE("Conv2d module: PyTorch names, shapes and default init bounds", "[conv]") {
  Generator gen(3);
  Conv2d conv(4, 6, {3, 2}, 1, 0, 1, 2, true, Dtype::Float32, gen);
  REQUIRE(conv.weight.shape() == Shape{6, 2, 3, 2});
  REQUIRE(conv.bias.shape() == Shape{6});
  const auto sd = conv.state_dict();
  REQUIRE(sd.find("weight") != nullptr);
  REQUIRE(sd.find("bias") != nullptr);
  const double bound = 1.0 / std::sqrt(2.0 * 3 * 2);  // kaiming-uniform a=√5: gain·√(3/fan_in) = 1/√fan_in
  double wmax = 0, bmax = 0;
  for (double v : conv.weight.to_vector()) wmax = std::max(wmax, std::abs(v));
  for (double v : conv.bias.to_vector()) bmax = std::max(bmax, std::abs(v));
  REQUIRE(wmax <= bound);
  REQUIRE(wmax > 0.7 * bound);
  REQUIRE(bmax <= bound);
  REQUIRE(conv.forward(Tensor::zeros({1, 4, 5, 5})).shape() == Shape{1, 6, 3, 4});
  REQUIRE(conv.extra_repr() == "4, 6, kernel_size=(3, 2), stride=(1, 1), groups=2");
  Conv2d nb(1, 1, 3, 1, 0, 1, 1, false);
  REQUIRE(nb.parameters().size() == 1);
}

TEST_CASE("Conv2d errors name the expected and actual values", "[conv][errors]") {
  using test::thrown;
  using E = std::invalid_argument;
  Conv2d conv(2, 4, 3);
  CHECK_THAT(thrown<E>([&] { conv.forward(test::f32({1, 3, 5, 5})); }),
             Catch::Contains("expected input with 2 channels") && Catch::Contains("got 3"));
  CHECK_THAT(thrown<E>([&] { conv.forward(test::f32({2, 5, 5})); }),
             Catch::Contains("4-D input") && Catch::Contains("[2, 5, 5]"));
  CHECK_THAT(thrown<E>([&] { conv.forward(test::f32({1, 2, 2, 5})); }),
             Catch::Contains("(3, 3)") && Catch::Contains("padded input size (2, 5)"));
  CHECK_THAT(thrown<E>([] { Conv2d(2, 4, 3, 0); }), Catch::Contains("stride >= 1") && Catch::Contains("(0, 0)"));
  CHECK_THAT(thrown<E>([] { Conv2d(2, 4, 3, {1, -1}); }), Catch::Contains("stride >= 1") && Catch::Contains("(1, -1)"));
  CHECK_THAT(thrown<E>([] { Conv2d(2, 4, 3, 1, 0, 0); }), Catch::Contains("dilation >= 1") && Catch::Contains("(0, 0)"));
  CHECK_THAT(thrown<E>([] { Conv2d(2, 4, 0); }), Catch::Contains("kernel_size >= 1") && Catch::Contains("(0, 0)"));
  CHECK_THAT(thrown<E>([] { Conv2d(2, 4, 3, 1, -1); }), Catch::Contains("padding >= 0") && Catch::Contains("(-1, -1)"));
  CHECK_THAT(thrown<E>([] { Conv2d(3, 4, 3, 1, 0, 1, 2); }),
             Catch::Contains("in_channels divisible by groups=2") && Catch::Contains("in_channels=3"));
  CHECK_THAT(thrown<E>([] { Conv2d(4, 3, 3, 1, 0, 1, 2); }),
             Catch::Contains("out_channels divisible by groups=2") && Catch::Contains("out_channels=3"));
  CHECK_THAT(thrown<E>([] { Conv2d(4, 4, 3, 1, 0, 1, 0); }), Catch::Contains("groups >= 1") && Catch::Contains("got 0"));
  // the functional form checks the same things
  const Tensor x = test::f32({1, 4, 5, 5}), w = test::f32({6, 2, 3, 3});
  CHECK_THAT(thrown<E>([&] { conv2d(x, w, Tensor(), 1, 0, 1, 3); }),
             Catch::Contains("expected input with 6 channels") && Catch::Contains("got 4"));
  CHECK_THAT(thrown<E>([&] { conv2d(x, w, Tensor(), 0); }), Catch::Contains("stride >= 1"));
  CHECK_THAT(thrown<E>([&] { conv2d(x, w, test::f32({5}), 1, 0, 1, 2); }),
             Catch::Contains("bias of shape (6)") && Catch::Contains("[5]"));
  CHECK_THAT(thrown<E>([&] { conv2d(x, test::f32({6, 2, 3}), Tensor()); }), Catch::Contains("4-D weight"));
  CHECK_THAT(thrown<E>([&] { conv2d(x, test::f64({6, 2, 3, 3}), Tensor(), 1, 0, 1, 2); }),
             Catch::Contains("float32") && Catch::Contains("float64"));
}
