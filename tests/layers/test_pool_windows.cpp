// Window safety of the pools: a max-pool window whose taps all fall in the
// padding has no element to take the maximum of. It must be refused with an error naming the
// geometry, never run (the forward returned -inf with an argmax outside the plane, and the
// backward wrote past the gradient buffer). Then a sweep of small geometries checks, for every
// accepted configuration of every pool, the forward and the backward against brute-force
// references written from the definitions, and that every refused one is a configuration
// with an all-padding window (run it under ASan: an out-of-range index is a report).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/functional/pooling.h>
#include <tapegrad/layers/pooling.h>
#include "test_errors_support.h"

using namespace tapegrad;
using layers::functional::Size2;
using test::thrown;
using Catch::Contains;

namespace {

// The issue's input: (1, 2, 2, 2), values 1..8, requiring grad.
Tensor issue_input() {
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2}, Dtype::Float64);
  x.requires_grad_();
  return x;
}

// forward and backward: before the fix the backward scattered into dx[plane·4 + 6]
void pool_and_backward(const Tensor& x, Size2 k, Size2 s, Size2 p, Size2 d, bool ceil) {
  Tensor y = layers::functional::max_pool2d(x, k, s, p, d, ceil);
  sum(y).backward();
}

}  // namespace

TEST_CASE("max_pool2d refuses a window that lies entirely in the padding (kernel 2, stride 1, padding 1, dilation 3)",
          "[pooling][errors]") {
  const Tensor x = issue_input();
  const std::string msg =
      thrown<std::invalid_argument>([&] { pool_and_backward(x, 2, Size2(1), 1, 3, false); });
  CHECK_THAT(msg, Contains("max_pool2d") && Contains("kernel_size (2, 2)") && Contains("padding (1, 1)") &&
                      Contains("dilation (3, 3)") && Contains("[1, 2, 2, 2]") && Contains("only padding"));
  CHECK_FALSE(x.grad().defined());
  // the module refuses the same input at its forward
  layers::MaxPool2d pool(2, Size2(1), 1, 3);
  CHECK_THAT(thrown<std::invalid_argument>([&] { pool.forward(x); }), Contains("only padding"));
}

TEST_CASE("max_pool2d refuses an all-padding window in either dimension, and the one ceil_mode adds",
          "[pooling][errors]") {
  const Tensor x = issue_input();
  // only the width: kernel (1, 2), padding (0, 1), dilation (1, 3)
  CHECK_THAT(thrown<std::invalid_argument>([&] { pool_and_backward(x, {1, 2}, Size2(1), {0, 1}, {1, 3}, false); }),
             Contains("kernel_size (1, 2)") && Contains("padding (0, 1)") && Contains("dilation (1, 3)") &&
                 Contains("column"));
  // only the height
  CHECK_THAT(thrown<std::invalid_argument>([&] { pool_and_backward(x, {2, 1}, Size2(1), {1, 0}, {3, 1}, false); }),
             Contains("kernel_size (2, 1)") && Contains("row"));
  // height 1, kernel 2, stride 2, padding 1, dilation 3: floor mode has no output row at all
  // (refused as too small); ceil_mode adds one, whose taps -1 and 2 both miss row 0.
  Tensor row = Tensor::from_vector({1, 2, 3, 4}, {1, 1, 1, 4}, Dtype::Float64);
  row.requires_grad_();
  CHECK_THAT(thrown<std::invalid_argument>([&] { pool_and_backward(row, {2, 1}, Size2{2, 1}, {1, 0}, {3, 1}, false); }),
             Contains("output size"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { pool_and_backward(row, {2, 1}, Size2{2, 1}, {1, 0}, {3, 1}, true); }),
             Contains("only padding") && Contains("ceil_mode true") && Contains("dilation (3, 1)"));
  CHECK_FALSE(row.grad().defined());
}

TEST_CASE("max_pool2d with a dilated window partly in the padding takes the taps inside (worked example)",
          "[pooling]") {
  // Height 3 instead of 2: the window at row -1 has its second tap at row 2, inside.
  // kernel (2, 1), stride 1, padding (1, 0), dilation (3, 1) on a 3x1 column [5, 7, 6]:
  // output rows: taps {-1, 2} -> 6 (row 2); taps {0, 3} -> 5 (row 0). OH = (3 + 2 - 3 - 1) + 1 = 2.
  Tensor x = Tensor::from_vector({5, 7, 6}, {1, 1, 3, 1}, Dtype::Float64);
  x.requires_grad_();
  Tensor y = layers::functional::max_pool2d(x, {2, 1}, Size2(1), {1, 0}, {3, 1}, false);
  CHECK(y.shape() == Shape{1, 1, 2, 1});
  CHECK(y.to_vector() == std::vector<double>{6, 5});
  sum(mul(y, Tensor::from_vector({10, 100}, {1, 1, 2, 1}, Dtype::Float64))).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{100, 0, 10});
}

namespace {

struct Geometry {
  std::int64_t H, W;
  Size2 k, s, p, d;
  bool ceil;
  std::string str() const {
    return "H=" + std::to_string(H) + " W=" + std::to_string(W) + " k=" + k.str() + " s=" + s.str() +
           " p=" + p.str() + " d=" + d.str() + (ceil ? " ceil" : "");
  }
};

// PyTorch's output size (floor or ceil, and the ceil rule that the last window starts inside
// the input or the left padding), written out again so the sweep does not trust the library.
std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d, bool ceil) {
  const std::int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  std::int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

// True when output position i of one dimension has no tap inside [0, in).
bool all_padding(std::int64_t i, std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d) {
  for (std::int64_t t = 0; t < k; ++t) {
    const std::int64_t pos = i * s - p + t * d;
    if (pos >= 0 && pos < in) return false;
  }
  return true;
}

// Random distinct values in (-1, 1) (no ties, so the argmax is unique).
std::vector<double> distinct_values(std::int64_t n, std::uint64_t seed) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = std::sin(0.7 * static_cast<double>(i + seed) + 0.3 * static_cast<double>(i * i));
  return v;
}

}  // namespace

TEST_CASE("pool window sweep: max_pool2d refuses exactly the all-padding geometries and matches brute force elsewhere",
          "[pooling][errors]") {
  const std::int64_t planes = 2;
  int accepted = 0, refused = 0;
  for (std::int64_t H = 1; H <= 4; ++H)
    for (std::int64_t W : {1, 3})
      for (std::int64_t kh = 1; kh <= 4; ++kh)
        for (std::int64_t sh = 1; sh <= 3; ++sh)
          for (std::int64_t ph = 0; ph <= kh / 2; ++ph)
            for (std::int64_t dh = 1; dh <= 4; ++dh)
              for (bool ceil : {false, true}) {
                // the height sweeps every value; the width uses a fixed window with padding
                const Geometry g{H, W, {kh, 2}, {sh, 1}, {ph, 1}, {dh, 2}, ceil};
                const std::int64_t OH = out_size(H, kh, sh, ph, dh, ceil), OW = out_size(W, 2, 1, 1, 2, ceil);
                bool empty = false;
                for (std::int64_t i = 0; i < OH; ++i) empty = empty || all_padding(i, H, kh, sh, ph, dh);
                for (std::int64_t j = 0; j < OW; ++j) empty = empty || all_padding(j, W, 2, 1, 1, 2);
                const std::vector<double> xv = distinct_values(planes * H * W, static_cast<std::uint64_t>(H + 7 * kh + 13 * dh));
                Tensor x = Tensor::from_vector(xv, {1, planes, H, W}, Dtype::Float64);
                x.requires_grad_();
                INFO(g.str());
                if (OH < 1 || OW < 1 || empty) {
                  CHECK_THROWS_AS(pool_and_backward(x, g.k, g.s, g.p, g.d, g.ceil), std::invalid_argument);
                  CHECK_FALSE(x.grad().defined());
                  ++refused;
                  continue;
                }
                ++accepted;
                // brute force: max over the taps inside, first maximum in row-major tap order
                std::vector<double> want(static_cast<std::size_t>(planes * OH * OW)), wgrad(xv.size(), 0.0);
                std::vector<double> gy(want.size());
                for (std::size_t o = 0; o < gy.size(); ++o) gy[o] = 1.0 + static_cast<double>(o);
                for (std::int64_t pl = 0; pl < planes; ++pl)
                  for (std::int64_t i = 0; i < OH; ++i)
                    for (std::int64_t j = 0; j < OW; ++j) {
                      double m = -std::numeric_limits<double>::infinity();
                      std::int64_t arg = -1;
                      for (std::int64_t a = 0; a < g.k.h; ++a)
                        for (std::int64_t b = 0; b < g.k.w; ++b) {
                          const std::int64_t h = i * g.s.h - g.p.h + a * g.d.h, w = j * g.s.w - g.p.w + b * g.d.w;
                          if (h < 0 || h >= H || w < 0 || w >= W) continue;
                          const double v = xv[static_cast<std::size_t>((pl * H + h) * W + w)];
                          if (v > m) m = v, arg = (pl * H + h) * W + w;
                        }
                      REQUIRE(arg >= 0);
                      const std::size_t o = static_cast<std::size_t>((pl * OH + i) * OW + j);
                      want[o] = m;
                      wgrad[static_cast<std::size_t>(arg)] += gy[o];
                    }
                Tensor y = layers::functional::max_pool2d(x, g.k, g.s, g.p, g.d, g.ceil);
                REQUIRE(y.shape() == Shape{1, planes, OH, OW});
                CHECK(y.to_vector() == want);
                sum(mul(y, Tensor::from_vector(gy, y.shape(), Dtype::Float64))).backward();
                CHECK(x.grad().to_vector() == wgrad);
              }
  CHECK(accepted > 100);
  CHECK(refused > 20);
}

TEST_CASE("pool window sweep: avg_pool2d and adaptive_avg_pool2d match brute force on every small geometry",
          "[pooling]") {
  for (std::int64_t H = 1; H <= 4; ++H)
    for (std::int64_t kh = 1; kh <= 4; ++kh)
      for (std::int64_t sh = 1; sh <= 3; ++sh)
        for (std::int64_t ph = 0; ph <= kh / 2; ++ph)
          for (bool ceil : {false, true})
            for (bool include : {false, true}) {
              const std::int64_t W = 3, kw = 2, sw = 1, pw = 1;
              const std::int64_t OH = out_size(H, kh, sh, ph, 1, ceil), OW = out_size(W, kw, sw, pw, 1, ceil);
              const std::vector<double> xv = distinct_values(H * W, static_cast<std::uint64_t>(H + 5 * kh));
              Tensor x = Tensor::from_vector(xv, {1, 1, H, W}, Dtype::Float64);
              x.requires_grad_();
              INFO("H=" << H << " k=" << kh << " s=" << sh << " p=" << ph << " ceil=" << ceil << " include=" << include);
              if (OH < 1) {
                CHECK_THROWS_AS(layers::functional::avg_pool2d(x, {kh, kw}, Size2{sh, sw}, {ph, pw}, ceil, include),
                                std::invalid_argument);
                continue;
              }
              // PyTorch's CPU rule: the window clipped to the padded input gives the divisor with
              // count_include_pad, clipped to the input without it; never empty.
              std::vector<double> want(static_cast<std::size_t>(OH * OW)), wgrad(xv.size(), 0.0);
              for (std::int64_t i = 0; i < OH; ++i)
                for (std::int64_t j = 0; j < OW; ++j) {
                  std::int64_t h0 = i * sh - ph, w0 = j * sw - pw;
                  std::int64_t h1 = std::min(h0 + kh, H + ph), w1 = std::min(w0 + kw, W + pw);
                  const std::int64_t padded = (h1 - h0) * (w1 - w0);
                  h0 = std::max<std::int64_t>(h0, 0), w0 = std::max<std::int64_t>(w0, 0);
                  h1 = std::min(h1, H), w1 = std::min(w1, W);
                  const std::int64_t inside = (h1 - h0) * (w1 - w0);
                  REQUIRE(inside >= 1);
                  const double div = static_cast<double>(include ? padded : inside);
                  double s = 0;
                  for (std::int64_t h = h0; h < h1; ++h)
                    for (std::int64_t w = w0; w < w1; ++w) s += xv[static_cast<std::size_t>(h * W + w)];
                  want[static_cast<std::size_t>(i * OW + j)] = s / div;
                  for (std::int64_t h = h0; h < h1; ++h)
                    for (std::int64_t w = w0; w < w1; ++w) wgrad[static_cast<std::size_t>(h * W + w)] += 1.0 / div;
                }
              Tensor y = layers::functional::avg_pool2d(x, {kh, kw}, Size2{sh, sw}, {ph, pw}, ceil, include);
              REQUIRE(y.shape() == Shape{1, 1, OH, OW});
              const std::vector<double> got = y.to_vector();
              for (std::size_t o = 0; o < want.size(); ++o) CHECK(got[o] == Approx(want[o]).epsilon(1e-14));
              sum(y).backward();
              const std::vector<double> gx = x.grad().to_vector();
              for (std::size_t e = 0; e < wgrad.size(); ++e) CHECK(gx[e] == Approx(wgrad[e]).epsilon(1e-14));
            }
  // adaptive: windows [floor(i·H/O), ceil((i+1)·H/O)) are never empty, also for O > H
  for (std::int64_t H = 1; H <= 4; ++H)
    for (std::int64_t O = 1; O <= 6; ++O) {
      const std::vector<double> xv = distinct_values(H * 2, static_cast<std::uint64_t>(H * 11 + O));
      Tensor x = Tensor::from_vector(xv, {1, 1, H, 2}, Dtype::Float64);
      x.requires_grad_();
      Tensor y = layers::functional::adaptive_avg_pool2d(x, {O, 1});
      std::vector<double> wgrad(xv.size(), 0.0);
      const std::vector<double> got = y.to_vector();
      for (std::int64_t i = 0; i < O; ++i) {
        const std::int64_t h0 = i * H / O, h1 = ((i + 1) * H + O - 1) / O;
        REQUIRE(h1 > h0);
        double s = 0;
        for (std::int64_t h = h0; h < h1; ++h) s += xv[static_cast<std::size_t>(h * 2)] + xv[static_cast<std::size_t>(h * 2 + 1)];
        const double div = static_cast<double>(2 * (h1 - h0));
        CHECK(got[static_cast<std::size_t>(i)] == Approx(s / div).epsilon(1e-14));
        for (std::int64_t h = h0; h < h1; ++h) wgrad[static_cast<std::size_t>(h * 2)] += 1 / div, wgrad[static_cast<std::size_t>(h * 2 + 1)] += 1 / div;
      }
      sum(y).backward();
      const std::vector<double> gx = x.grad().to_vector();
      for (std::size_t e = 0; e < wgrad.size(); ++e) CHECK(gx[e] == Approx(wgrad[e]).epsilon(1e-14));
    }
}
