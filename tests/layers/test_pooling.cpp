// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d and Flatten: PyTorch's output-size rule, worked
// examples (ceil_mode, padding divisors, NaN), gradcheck, and errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/functional/pooling.h>
#include <tapegrad/layers/pooling.h>
#include "test_errors_support.h"
#include "test_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using functional::adaptive_avg_pool2d;
using functional::avg_pool2d;
using functional::max_pool2d;
using functional::pool_output_size;

namespace {
Tensor arange_image(std::int64_t h, std::int64_t w) {
  std::vector<double> v(static_cast<std::size_t>(h * w));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return Tensor::from_vector(v, {1, 1, h, w}, Dtype::Float64);
}
}  // namespace

TEST_CASE("pool_output_size follows PyTorch, including the ceil_mode last-window rule", "[pooling]") {
  // in, kernel, stride, pad, dilation -> floor, ceil (values from torch.nn.MaxPool2d 1.13)
  CHECK(pool_output_size(5, 2, 2, 0, 1, false) == 2);
  CHECK(pool_output_size(5, 2, 2, 0, 1, true) == 3);
  // ceil would give 4, but the 4th window would start at 6 >= 5 + 1 (past the left padding)
  CHECK(pool_output_size(5, 2, 2, 1, 1, true) == 3);
  CHECK(pool_output_size(5, 2, 2, 1, 1, false) == 3);
  CHECK(pool_output_size(6, 3, 2, 1, 1, false) == 3);
  CHECK(pool_output_size(6, 3, 2, 1, 1, true) == 4);
  CHECK(pool_output_size(7, 3, 1, 0, 2, false) == 3);
  CHECK(pool_output_size(4, 3, 3, 0, 1, true) == 2);
  CHECK(pool_output_size(4, 3, 3, 0, 1, false) == 1);
}

TEST_CASE("max_pool2d: worked example, ceil_mode, dilation and the gradient route", "[pooling]") {
  Tensor x = arange_image(3, 3).requires_grad_();
  Tensor y = max_pool2d(x, 2, 2, 0, 1, true);  // windows clipped at the border
  test::require_close(y, {4, 5, 7, 8}, 0);
  y.backward(Tensor::from_vector({1, 2, 3, 4}, {1, 1, 2, 2}, Dtype::Float64));
  test::require_close(x.grad(), {0, 0, 0, 0, 1, 2, 0, 3, 4}, 0);
  // overlapping windows route every output's gradient to its argmax, accumulated
  Tensor z = Tensor::from_vector({1, 9, 2, 3, 4, 5}, {1, 1, 1, 6}, Dtype::Float64).requires_grad_();
  Tensor o = max_pool2d(z, {1, 3}, Size2{1, 1}, 0, 1, false);
  test::require_close(o, {9, 9, 4, 5}, 0);
  sum(o).backward();
  test::require_close(z.grad(), {0, 2, 0, 0, 1, 1}, 0);
  // dilation 2 picks every other element (-5, -3, -4); padding is -inf, never 0
  Tensor neg = Tensor::from_vector({-5, -1, -3, -2, -4}, {1, 1, 1, 5}, Dtype::Float64);
  test::require_close(max_pool2d(neg, {1, 3}, Size2{1, 1}, 0, {1, 2}, false), {-3}, 0);
  test::require_close(max_pool2d(neg, {1, 3}, Size2{1, 2}, {0, 1}, 1, false), {-1, -1, -2}, 0);
}

TEST_CASE("max_pool2d propagates NaN like PyTorch and handles all -inf windows", "[pooling]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Tensor x = Tensor::from_vector({1, nan, 3, nan}, {1, 1, 2, 2}, Dtype::Float64).requires_grad_();
  Tensor y = max_pool2d(x, 2);
  REQUIRE(std::isnan(y.item()));
  y.backward(Tensor::ones({1, 1, 1, 1}, Dtype::Float64));
  test::require_close(x.grad(), {0, 0, 0, 1}, 0);  // the last NaN takes the gradient
  Tensor m = Tensor::from_vector({-inf, -inf, -inf, -inf}, {1, 1, 2, 2}, Dtype::Float64).requires_grad_();
  Tensor ym = max_pool2d(m, 2);
  REQUIRE(ym.item() == -inf);
  ym.backward(Tensor::ones({1, 1, 1, 1}, Dtype::Float64));
  test::require_close(m.grad(), {1, 0, 0, 0}, 0);
}

TEST_CASE("max_pool2d 2x2 fast path follows the window rule (ties, NaN, -inf)", "[pooling]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Generator gen(4);
  Tensor x = uniform({2, 3, 6, 8}, -1, 1, Dtype::Float64, gen);
  std::vector<double> v = x.to_vector();
  v[0] = v[1] = 5;  // a tie: the first wins
  v[10] = nan;
  v[20] = v[21] = v[28] = v[29] = -inf;
  v[40] = nan;
  v[49] = nan;  // two NaN in one window: the last one takes the gradient
  x = Tensor::from_vector(v, {2, 3, 6, 8}, Dtype::Float64).requires_grad_();
  Tensor fast = max_pool2d(x, 2);
  sum(fast).backward();
  const auto g_fast = x.grad().to_vector();
  // the rule, written out: scan each window row-major from -inf; a greater value or a NaN replaces
  std::vector<double> want, want_grad(v.size(), 0.0);
  for (int pl = 0; pl < 6; ++pl)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        double m = -inf;
        int best = pl * 48 + 2 * i * 8 + 2 * j;
        for (int dh = 0; dh < 2; ++dh)
          for (int dw = 0; dw < 2; ++dw) {
            const int at = pl * 48 + (2 * i + dh) * 8 + 2 * j + dw;
            if (v[at] > m || std::isnan(v[at])) {
              m = v[at];
              best = at;
            }
          }
        want.push_back(m);
        want_grad[best] += 1;
      }
  const auto a = fast.to_vector();
  REQUIRE(a.size() == want.size());
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(((std::isnan(a[i]) && std::isnan(want[i])) || a[i] == want[i]));
  REQUIRE(g_fast == want_grad);
}

TEST_CASE("avg_pool2d: ceil_mode windows and count_include_pad divisors", "[pooling]") {
  Tensor x = arange_image(3, 3);
  // ceil-mode windows past the input are clipped: (0+1+3+4)/4, (2+5)/2, (6+7)/2, 8/1
  test::require_close(avg_pool2d(x, 2, 2, 0, true, true), {2, 3.5, 6.5, 8}, 1e-15);
  // padding 1: a corner window holds 4 values of 9; count_include_pad divides by 9, else by 4
  Tensor ones = Tensor::ones({1, 1, 3, 3}, Dtype::Float64);
  test::require_close(avg_pool2d(ones, 3, 1, 1, false, true), {4. / 9, 6. / 9, 4. / 9, 6. / 9, 1, 6. / 9, 4. / 9,
                                                               6. / 9, 4. / 9},
                      1e-15);
  test::require_close(avg_pool2d(ones, 3, 1, 1, false, false), std::vector<double>(9, 1.0), 1e-15);
}

TEST_CASE("adaptive_avg_pool2d windows overlap as PyTorch's", "[pooling]") {
  // W = 5 into 3: windows [0,2), [1,4), [3,5)
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5}, {1, 1, 1, 5}, Dtype::Float64).requires_grad_();
  Tensor y = adaptive_avg_pool2d(x, {1, 3});
  test::require_close(y, {1.5, 3, 4.5}, 1e-15);
  sum(y).backward();
  test::require_close(x.grad(), {0.5, 0.5 + 1. / 3, 1. / 3, 1. / 3 + 0.5, 0.5}, 1e-15);
}

TEST_CASE("pooling gradcheck: strides, padding, dilation, ceil_mode, odd sizes", "[pooling][gradcheck]") {
  Generator gen(21);
  Tensor x = uniform({2, 3, 7, 6}, -1, 1, Dtype::Float64, gen).requires_grad_();
  struct MaxCfg {
    Size2 k, s, p, d;
    bool ceil;
  };
  for (const MaxCfg& c : std::vector<MaxCfg>{{2, 2, 0, 1, false}, {3, 2, 1, 1, false}, {3, 2, 1, 1, true},
                                             {2, 2, 0, 1, true}, {{3, 2}, {1, 2}, {1, 0}, {2, 1}, true},
                                             {3, 3, 1, 2, false}}) {
    auto r = gradcheck([&](const std::vector<Tensor>& v) { return max_pool2d(v[0], c.k, c.s, c.p, c.d, c.ceil); }, {x});
    INFO("max k=" << c.k.str() << " s=" << c.s.str() << " p=" << c.p.str() << " d=" << c.d.str() << ": " << r.message);
    REQUIRE(r.ok);
  }
  for (bool ceil : {false, true})
    for (bool include : {false, true})
      for (Size2 k : {Size2(2), Size2(3), Size2(3, 2)}) {
        const Size2 p(k.h / 2, k.w / 2);
        auto r = gradcheck([&](const std::vector<Tensor>& v) { return avg_pool2d(v[0], k, Size2(2), p, ceil, include); },
                           {x});
        INFO("avg k=" << k.str() << " ceil=" << ceil << " include_pad=" << include << ": " << r.message);
        REQUIRE(r.ok);
      }
  for (Size2 o : {Size2(1), Size2(2, 3), Size2(4, 4), Size2(7, 6)}) {
    auto r = gradcheck([&](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], o); }, {x});
    INFO("adaptive " << o.str() << ": " << r.message);
    REQUIRE(r.ok);
  }
  Flatten fl;
  auto r = gradcheck([&](const std::vector<Tensor>& v) { return fl.forward(v[0]); }, {x});
  REQUIRE(r.ok);
}

TEST_CASE("Flatten is a view with PyTorch's dims", "[pooling]") {
  Tensor x = Tensor::zeros({2, 3, 4, 5});
  REQUIRE(Flatten().forward(x).shape() == Shape{2, 60});
  REQUIRE(Flatten(0, 1).forward(x).shape() == Shape{6, 4, 5});
  REQUIRE(Flatten(1, 2).forward(x).shape() == Shape{2, 12, 5});
  REQUIRE(Flatten().forward(x).shares_storage_with(x));
  Tensor flat = Tensor::zeros({2, 12});
  REQUIRE(Unflatten(1, {3, 4}).forward(flat).shape() == Shape{2, 3, 4});
  REQUIRE(Unflatten(-1, {1, 3, 4}).forward(flat).shape() == Shape{2, 1, 3, 4});
  REQUIRE(Unflatten(1, {3, 4}).forward(flat).shares_storage_with(flat));
  CHECK_THAT(test::thrown<std::invalid_argument>([&] { Unflatten(1, {5, 2}).forward(flat); }),
             Catch::Contains("of size 10") && Catch::Contains("[2, 12]"));
}

TEST_CASE("pooling errors name the expected and actual values", "[pooling][errors]") {
  using test::thrown;
  using E = std::invalid_argument;
  CHECK_THAT(thrown<E>([] { MaxPool2d(0); }), Catch::Contains("kernel_size >= 1") && Catch::Contains("(0, 0)"));
  CHECK_THAT(thrown<E>([] { MaxPool2d(2, Size2(0)); }), Catch::Contains("stride >= 1") && Catch::Contains("(0, 0)"));
  CHECK_THAT(thrown<E>([] { MaxPool2d(2, Size2(-1, 2)); }), Catch::Contains("stride >= 1") && Catch::Contains("(-1, 2)"));
  CHECK_THAT(thrown<E>([] { MaxPool2d(2, std::nullopt, 0, 0); }), Catch::Contains("dilation >= 1"));
  CHECK_THAT(thrown<E>([] { MaxPool2d(2, std::nullopt, 2); }),
             Catch::Contains("padding <= kernel_size/2") && Catch::Contains("(2, 2)"));
  CHECK_THAT(thrown<E>([] { AvgPool2d(3, std::nullopt, -1); }), Catch::Contains("padding") && Catch::Contains("(-1, -1)"));
  CHECK_THAT(thrown<E>([] { AdaptiveAvgPool2d({0, 2}); }), Catch::Contains("output_size >= 1") && Catch::Contains("(0, 2)"));
  MaxPool2d mp(3);
  CHECK_THAT(thrown<E>([&] { mp.forward(test::f32({1, 1, 2, 5})); }),
             Catch::Contains("[1, 1, 2, 5]") && Catch::Contains("output size (0, 1)"));
  CHECK_THAT(thrown<E>([&] { mp.forward(test::f32({3, 5, 5})); }),
             Catch::Contains("4-D input") && Catch::Contains("[3, 5, 5]"));
  AvgPool2d ap(2);
  CHECK_THAT(thrown<E>([&] { ap.forward(test::f32({5, 5})); }), Catch::Contains("4-D input") && Catch::Contains("[5, 5]"));
  AdaptiveAvgPool2d aap(2);
  CHECK_THAT(thrown<E>([&] { aap.forward(test::f32({1, 2, 3, 4, 5})); }), Catch::Contains("4-D input"));
  CHECK_THAT(thrown<E>([&] { max_pool2d(Tensor::zeros({1, 1, 4, 4}, Dtype::Int64), 2); }), Catch::Contains("int64"));
}
