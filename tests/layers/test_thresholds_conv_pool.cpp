// Conv2d and the pools on both sides of their size thresholds: the im2col / oneDNN crossover
// of ConvBackend::Auto (kConvDnnlMinInChannels, kernels/thresholds.h), im2col's split of the
// samples over the threads (N against the thread count), and the pools' split of the planes
// (parallel_rows_grain, core/parallel.h). Conv2d runs on every backend at each size; output,
// input gradient and parameter gradients, float32 and float64 (oneDNN: float32 only), on 1 and
// 2 threads, against direct loops in double written here. Neither op has a train/eval mode.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/functional/conv.h>
#include <tapegrad/layers/functional/kernels/conv_dnnl.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>
#include <tapegrad/layers/functional/pooling.h>

#include "test_errors_support.h"
#include "thresholds_support.h"

using namespace tapegrad;
using namespace tapegrad::test::thresholds;
using tapegrad::test::thrown;
namespace F = tapegrad::layers::functional;
namespace TH = tapegrad::layers::functional::kernels::thresholds;

namespace {

struct BackendGuard {
  F::ConvBackend prev = F::conv_backend();
  ~BackendGuard() { F::set_conv_backend(prev); }
};

// 3×3 convolution, padding 1, stride 1, with bias, on (N, Cin, H, W) -> (N, O, H, W).
template <class T>
void check_conv(std::int64_t N, std::int64_t Cin, std::int64_t O, std::int64_t H, std::int64_t W) {
  constexpr std::int64_t k = 3, pad = 1;
  const Tensor x = pattern<T>({N, Cin, H, W}, 31), w = pattern<T>({O, Cin, k, k}, 32, 0.3),
               b = pattern<T>({O}, 33), dy = pattern<T>({N, O, H, W}, 34);
  const T *xp = x.data<T>(), *wp = w.data<T>(), *bp = b.data<T>(), *gp = dy.data<T>();
  // reference and the magnitude of each sum's terms
  std::vector<double> y(static_cast<std::size_t>(N * O * H * W)), ya(y.size()), dx(static_cast<std::size_t>(x.numel())),
      dxa(dx.size()), dw(static_cast<std::size_t>(w.numel())), dwa(dw.size()), db(static_cast<std::size_t>(O)), dba(db.size());
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t i = 0; i < H; ++i)
        for (std::int64_t j = 0; j < W; ++j) {
          const std::int64_t yi = ((n * O + o) * H + i) * W + j;
          double s = bp[o], sa = std::abs(static_cast<double>(bp[o]));
          const double g = gp[yi];
          db[o] += g;
          dba[o] += std::abs(g);
          for (std::int64_t c = 0; c < Cin; ++c)
            for (std::int64_t p = 0; p < k; ++p)
              for (std::int64_t q = 0; q < k; ++q) {
                const std::int64_t ih = i + p - pad, iw = j + q - pad;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const std::int64_t xi = ((n * Cin + c) * H + ih) * W + iw, wi = ((o * Cin + c) * k + p) * k + q;
                s += wp[wi] * static_cast<double>(xp[xi]);
                sa += std::abs(wp[wi] * static_cast<double>(xp[xi]));
                dx[xi] += g * wp[wi];
                dxa[xi] += std::abs(g * wp[wi]);
                dw[wi] += g * xp[xi];
                dwa[wi] += std::abs(g * xp[xi]);
              }
          y[yi] = s;
          ya[yi] = sa;
        }
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  std::vector<F::ConvBackend> backends{F::ConvBackend::Auto, F::ConvBackend::Im2col};
  if (F::conv_onednn_available() && std::is_same_v<T, float>) backends.push_back(F::ConvBackend::OneDNN);
  BackendGuard bg;
  ThreadsGuard tg;
  for (int nt : thread_counts())
    for (F::ConvBackend be : backends) {
      set_num_threads(nt);
      F::set_conv_backend(be);
      INFO(dtype_label<T>() << " x (" << N << ", " << Cin << ", " << H << ", " << W << "), " << O << " outputs, backend "
                            << static_cast<int>(be) << ", " << nt << " thread(s)");
      Tensor xl = x.detach().requires_grad_(), wl = w.clone().requires_grad_(), bl = b.clone().requires_grad_();
      const std::int64_t created = F::kernels::dnnl_conv_primitives_created();
      Tensor out = F::conv2d(xl, wl, bl, 1, pad);
      if (be == F::ConvBackend::Auto) {
        // the crossover itself: oneDNN from kConvDnnlMinInChannels float32 input channels on
        const bool dnnl = F::conv_onednn_available() && std::is_same_v<T, float> && Cin >= TH::kConvDnnlMinInChannels;
        if (!dnnl) CHECK(F::kernels::dnnl_conv_primitives_created() == created);
      }
      out.backward(dy);
      // a zero-size convolution never reaches a backend (oneDNN refuses such shapes)
      if (x.numel() == 0 || w.numel() == 0 || dy.numel() == 0)
        CHECK(F::kernels::dnnl_conv_primitives_created() == created);
      const auto check = [](const char* what, const Tensor& got, const std::vector<double>& want,
                            const std::vector<double>& mag, double t) {
        REQUIRE(got.numel() == static_cast<std::int64_t>(want.size()));
        if (want.empty()) return;  // a zero-size result: its shape was all there was to check
        Mismatches mm(what);
        const T* gp2 = got.data<T>();
        for (std::size_t i = 0; i < want.size(); ++i)
          mm.check(static_cast<std::int64_t>(i), gp2[i], want[i], t * mag[i] + 1e-300);
        mm.require();
      };
      check("y", out, y, ya, tol);
      check("dx", xl.grad(), dx, dxa, tol);
      check("dweight", wl.grad(), dw, dwa, tol);
      check("dbias", bl.grad(), db, dba, tol);
    }
}

// Reference pools over (planes, H, W) in double.
enum class Pool { Max, Avg, Adaptive };

template <class T>
void check_pool(Pool kind, std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t k,
                std::int64_t s, std::int64_t p) {
  const Tensor x = pattern<T>({N, C, H, W}, 41);
  const std::int64_t P = N * C;
  const std::int64_t OH = kind == Pool::Adaptive ? k : (H + 2 * p - k) / s + 1;
  const std::int64_t OW = kind == Pool::Adaptive ? k : (W + 2 * p - k) / s + 1;
  const Tensor dy = pattern<T>({N, C, OH, OW}, 42);
  const T *xp = x.data<T>(), *gp = dy.data<T>();
  std::vector<double> y(static_cast<std::size_t>(P * OH * OW)), dx(static_cast<std::size_t>(x.numel()));
  for (std::int64_t pl = 0; pl < P; ++pl)
    for (std::int64_t i = 0; i < OH; ++i)
      for (std::int64_t j = 0; j < OW; ++j) {
        std::int64_t h0, h1, w0, w1;
        if (kind == Pool::Adaptive) {
          h0 = i * H / k, h1 = ((i + 1) * H + k - 1) / k, w0 = j * W / k, w1 = ((j + 1) * W + k - 1) / k;
        } else {
          h0 = std::max<std::int64_t>(0, i * s - p), h1 = std::min(H, i * s - p + k);
          w0 = std::max<std::int64_t>(0, j * s - p), w1 = std::min(W, j * s - p + k);
        }
        const std::int64_t o = (pl * OH + i) * OW + j;
        const double g = gp[o];
        if (kind == Pool::Max) {
          double m = -std::numeric_limits<double>::infinity();
          std::int64_t at = -1;
          for (std::int64_t h = h0; h < h1; ++h)
            for (std::int64_t w = w0; w < w1; ++w)
              if (xp[(pl * H + h) * W + w] > m) {
                m = xp[(pl * H + h) * W + w];
                at = (pl * H + h) * W + w;
              }
          y[o] = m;
          dx[at] += g;
        } else {  // average over the window inside the input (count_include_pad = false)
          const double div = static_cast<double>((h1 - h0) * (w1 - w0));
          double sum = 0;
          for (std::int64_t h = h0; h < h1; ++h)
            for (std::int64_t w = w0; w < w1; ++w) {
              sum += xp[(pl * H + h) * W + w];
              dx[(pl * H + h) * W + w] += g / div;
            }
          y[o] = sum / div;
        }
      }
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-14;
  ThreadsGuard tg;
  for (int nt : thread_counts()) {
    set_num_threads(nt);
    INFO(dtype_label<T>() << " pool " << static_cast<int>(kind) << " on (" << N << ", " << C << ", " << H << ", " << W
                          << "), kernel " << k << " stride " << s << " padding " << p << ", " << nt << " thread(s)");
    Tensor xl = x.detach().requires_grad_();
    Tensor out = kind == Pool::Max   ? F::max_pool2d(xl, k, s, p)
                 : kind == Pool::Avg ? F::avg_pool2d(xl, k, s, p, false, false)
                                     : F::adaptive_avg_pool2d(xl, k);
    out.backward(dy);
    REQUIRE(out.numel() == static_cast<std::int64_t>(y.size()));
    Mismatches my("y"), mdx("dx");
    const T *yp = out.data<T>(), *dxp = xl.grad().data<T>();
    for (std::size_t i = 0; i < y.size(); ++i) my.check_rel(static_cast<std::int64_t>(i), yp[i], y[i], tol);
    for (std::size_t i = 0; i < dx.size(); ++i) mdx.check_rel(static_cast<std::int64_t>(i), dxp[i], dx[i], tol);
    my.require();
    mdx.require();
  }
}

}  // namespace

TEMPLATE_TEST_CASE("thresholds: Conv2d, im2col / oneDNN crossover and the split of the samples",
                   "[thresholds][conv]", float, double) {
  using T = TestType;
  const std::int64_t cin = TH::kConvDnnlMinInChannels;
  // N = 1: fewer samples than 2 threads (the GEMMs take the threads); N = 2: one per thread
  for (std::int64_t N : {1, 2}) {
    check_conv<T>(N, cin - 1, 8, 11, 10);
    check_conv<T>(N, cin, 8, 11, 10);
  }
}

TEMPLATE_TEST_CASE("thresholds: Conv2d with a zero-size dimension on every backend and both sides of the crossover",
                   "[thresholds][conv][errors]", float, double) {
  using T = TestType;
  const std::int64_t cin = TH::kConvDnnlMinInChannels;
  for (std::int64_t c : {cin - 1, cin, cin + 1}) {
    check_conv<T>(2, c, 0, 5, 5);  // no output channels
    check_conv<T>(0, c, 8, 5, 5);  // no samples
    check_conv<T>(0, c, 0, 5, 5);
  }
  for (std::int64_t N : {1, 2}) check_conv<T>(N, 0, 8, 5, 5);  // no input channels: y = bias, dbias = Σ dy
}

TEMPLATE_TEST_CASE("thresholds: Conv2d over an empty image with padding gives the bias on every backend",
                   "[thresholds][conv][errors]", float, double) {
  using T = TestType;
  std::vector<F::ConvBackend> backends{F::ConvBackend::Auto, F::ConvBackend::Im2col};
  if (F::conv_onednn_available() && std::is_same_v<T, float>) backends.push_back(F::ConvBackend::OneDNN);
  BackendGuard bg;
  for (std::int64_t c : {TH::kConvDnnlMinInChannels - 1, TH::kConvDnnlMinInChannels})
    for (const Shape& xs : {Shape{2, c, 0, 4}, Shape{2, c, 3, 0}})
      for (F::ConvBackend be : backends) {
        F::set_conv_backend(be);
        INFO(dtype_label<T>() << " x " << shape_str(xs) << ", backend " << static_cast<int>(be));
        // 1x1 kernel, padding 1: every output position sees only padding
        Tensor x = Tensor::zeros(xs, dtype_for<T>()).requires_grad_();
        Tensor w = pattern<T>({3, c, 1, 1}, 51).requires_grad_();
        Tensor b = Tensor::from_vector({0.5, -1.0, 2.0}, {3}, dtype_for<T>()).requires_grad_();
        const std::int64_t created = F::kernels::dnnl_conv_primitives_created();
        Tensor y = F::conv2d(x, w, b, 1, 1);
        REQUIRE(y.shape() == Shape{2, 3, xs[2] + 2, xs[3] + 2});
        const std::int64_t L = y.size(2) * y.size(3);
        for (std::int64_t i = 0; i < y.numel(); ++i) REQUIRE(y.at(i) == b.at((i / L) % 3));
        sum(y).backward();
        CHECK(F::kernels::dnnl_conv_primitives_created() == created);
        CHECK(x.grad().shape() == xs);
        CHECK(w.grad().shape() == w.shape());
        for (double v : w.grad().to_vector()) CHECK(v == 0.0);
        CHECK(b.grad().to_vector() == std::vector<double>(3, static_cast<double>(2 * L)));
      }
}

TEMPLATE_TEST_CASE("thresholds: pools, the split of the planes over the threads", "[thresholds][pooling]", float,
                   double) {
  using T = TestType;
  constexpr std::int64_t H = 16, W = 16;
  const std::int64_t planes = parallel_rows_grain(H * W);  // planes from which the pools go parallel
  for (std::int64_t P : {planes - 1, planes}) {
    check_pool<T>(Pool::Max, 1, P, H, W, 2, 2, 0);  // the 2×2 fast path
    check_pool<T>(Pool::Max, 1, P, H, W, 3, 2, 1);  // the general window walk
    check_pool<T>(Pool::Avg, 1, P, H, W, 3, 2, 1);
    check_pool<T>(Pool::Adaptive, 1, P, H, W, 5, 0, 0);
  }
}

TEMPLATE_TEST_CASE("thresholds: pools with no planes on the 2x2 path and the window walk; an empty image is refused",
                   "[thresholds][pooling][errors]", float, double) {
  using T = TestType;
  for (const Shape& xs : {Shape{0, 3, 4, 4}, Shape{2, 0, 4, 4}}) {
    INFO(dtype_label<T>() << " x " << shape_str(xs));
    for (int kind = 0; kind < 4; ++kind) {
      Tensor x = Tensor::zeros(xs, dtype_for<T>()).requires_grad_();
      Tensor y = kind == 0   ? F::max_pool2d(x, 2, 2, 0)  // the 2×2 fast path
                 : kind == 1 ? F::max_pool2d(x, 3, 2, 1)  // the general window walk
                 : kind == 2 ? F::avg_pool2d(x, 3, 2, 1, false, false)
                             : F::adaptive_avg_pool2d(x, 2);
      CHECK(y.shape() == Shape{xs[0], xs[1], 2, 2});
      sum(y).backward();
      CHECK(x.grad().shape() == xs);
    }
  }
  // PyTorch refuses a zero height or width (no window has a value; an average over one divides by 0)
  for (const Shape& xs : {Shape{1, 2, 0, 4}, Shape{1, 2, 4, 0}}) {
    INFO(shape_str(xs));
    const Tensor x = Tensor::zeros(xs, dtype_for<T>());
    for (int kind = 0; kind < 4; ++kind) {
      const std::string what = thrown<std::invalid_argument>([&] {
        if (kind == 0) F::max_pool2d(x, 2, 1, 1);
        else if (kind == 1) F::avg_pool2d(x, 2, 1, 1, false, false);
        else if (kind == 2) F::avg_pool2d(x, 2, 1, 1, false, true);
        else F::adaptive_avg_pool2d(x, 2);
      });
      CHECK_THAT(what, Catch::Matchers::Contains("non-empty spatial size") && Catch::Matchers::Contains(shape_str(xs)));
    }
  }
}
