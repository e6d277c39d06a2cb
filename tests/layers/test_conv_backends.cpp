// Conv2d's two float32 backends (im2col + GEMM and oneDNN) on the shared configurations:
// values and gradients against float64, each other, bit-for-bit repeatability, and no
// primitive creation once a shape has run.
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/functional/conv.h>
#include <tapegrad/layers/functional/kernels/conv_dnnl.h>
#include "conv_configs.h"
#include "test_support.h"

using namespace tapegrad;
using namespace tapegrad::layers::functional;
using test::Cfg;

namespace {

// Restores the process-wide backend and thread count on scope exit.
struct BackendGuard {
  ConvBackend saved = conv_backend();
  ~BackendGuard() {
    set_conv_backend(saved);
    set_num_threads(2);
  }
};

std::vector<Cfg> configs() {
  std::vector<Cfg> c = test::kConfigs;
  c.push_back({3, 32, 6, 6, 64, 3, 3, 1, 1, 1, 1, true});      // the CNN's second block, small
  c.push_back({2, 16, 5, 7, 8, 3, 3, 2, 1, 1, 1, false});      // Auto's threshold, stride 2, no bias
  c.push_back({1, 2, 5, 5, 3, 2, 2, 2, 0, 1, 1, true});        // floor drops the last column (oneDNN padding_r < 0)
  return c;
}

struct Grads {
  std::vector<double> y, dx, dw, db;
};

Grads run(const Cfg& c, Dtype dt, std::uint64_t seed) {
  Generator gen(seed);
  Tensor x = uniform({c.N, c.C, c.H, c.W}, -1, 1, Dtype::Float64, gen).to(dt).requires_grad_();
  Tensor w = uniform({c.O, c.C / c.g, c.kh, c.kw}, -1, 1, Dtype::Float64, gen).to(dt).requires_grad_();
  Tensor b = c.bias ? uniform({c.O}, -1, 1, Dtype::Float64, gen).to(dt).requires_grad_() : Tensor();
  Tensor y = conv2d(x, w, b, c.s, c.p, c.d, c.g);
  Tensor gy = uniform(y.shape(), -1, 1, Dtype::Float64, gen).to(dt);
  y.backward(gy);
  return {y.to_vector(), x.grad().to_vector(), w.grad().to_vector(), c.bias ? b.grad().to_vector() : std::vector<double>{}};
}

std::string describe(const Cfg& c) {
  return "C=" + std::to_string(c.C) + " O=" + std::to_string(c.O) + " k=" + std::to_string(c.kh) + "x" +
         std::to_string(c.kw) + " s=" + c.s.str() + " p=" + c.p.str() + " d=" + c.d.str() + " g=" + std::to_string(c.g);
}

}  // namespace

TEST_CASE("conv2d float32: im2col and oneDNN both match float64, values and gradients, 1 and 2 threads", "[conv]") {
  BackendGuard guard;
  if (!conv_onednn_available()) {
    REQUIRE_THROWS_AS(set_conv_backend(ConvBackend::OneDNN), std::invalid_argument);
    return;
  }
  std::uint64_t seed = 100;
  for (const Cfg& c : configs()) {
    ++seed;
    INFO(describe(c));
    set_conv_backend(ConvBackend::Im2col);
    const Grads want = run(c, Dtype::Float64, seed);
    for (ConvBackend be : {ConvBackend::Im2col, ConvBackend::OneDNN})
      for (int threads : {1, 2}) {
        INFO((be == ConvBackend::OneDNN ? "oneDNN" : "im2col") << ", threads " << threads);
        set_num_threads(threads);
        set_conv_backend(be);
        const Grads got = run(c, Dtype::Float32, seed);
        test::require_close(got.y, want.y, 1e-5);
        test::require_close(got.dx, want.dx, 1e-5);
        test::require_close(got.dw, want.dw, 1e-5);
        test::require_close(got.db, want.db, 1e-5);
      }
  }
}

TEST_CASE("conv2d with oneDNN: repeatable bit for bit, no primitives created once a shape has run", "[conv]") {
  BackendGuard guard;
  if (!conv_onednn_available()) {
    REQUIRE_FALSE(kernels::dnnl_conv_supports({2, 32, 6, 6, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 6, true}));
    return;
  }
  set_conv_backend(ConvBackend::OneDNN);
  const Cfg c{8, 32, 9, 9, 64, 3, 3, 1, 1, 1, 1, true};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const Grads first = run(c, Dtype::Float32, 7);
    const std::int64_t created = kernels::dnnl_conv_primitives_created();
    for (int rep = 0; rep < 3; ++rep) {
      const Grads again = run(c, Dtype::Float32, 7);
      REQUIRE(again.y == first.y);
      REQUIRE(again.dx == first.dx);
      REQUIRE(again.dw == first.dw);
      REQUIRE(again.db == first.db);
    }
    REQUIRE(kernels::dnnl_conv_primitives_created() == created);
  }
}

TEST_CASE("conv2d backend: the environment's choice, and Auto's rule", "[conv]") {
  BackendGuard guard;
  REQUIRE(parse_conv_backend("") == ConvBackend::Auto);
  REQUIRE(parse_conv_backend("auto") == ConvBackend::Auto);
  REQUIRE(parse_conv_backend("im2col") == ConvBackend::Im2col);
  REQUIRE_THROWS_WITH(parse_conv_backend("gemm"), Catch::Contains("expected auto, im2col") && Catch::Contains("got 'gemm'"));
  if (conv_onednn_available()) REQUIRE(parse_conv_backend("onednn") == ConvBackend::OneDNN);
  else REQUIRE_THROWS_WITH(parse_conv_backend("onednn"), Catch::Contains("built without oneDNN"));
  set_conv_backend(ConvBackend::Auto);
  REQUIRE(conv_backend() == ConvBackend::Auto);
  set_conv_backend(ConvBackend::Im2col);
  REQUIRE(conv_backend() == ConvBackend::Im2col);
  if (conv_onednn_available()) {
    // Auto sends the CNN's 32-channel block to oneDNN: a cache miss on a fresh shape
    set_conv_backend(ConvBackend::Auto);
    const std::int64_t before = kernels::dnnl_conv_primitives_created();
    run({2, 32, 7, 5, 16, 3, 3, 1, 1, 1, 1, true}, Dtype::Float32, 3);
    REQUIRE(kernels::dnnl_conv_primitives_created() > before);
    // ... and the one-channel first block to im2col: no oneDNN primitive
    const std::int64_t after = kernels::dnnl_conv_primitives_created();
    run({2, 1, 11, 9, 32, 3, 3, 1, 1, 1, 1, true}, Dtype::Float32, 4);
    REQUIRE(kernels::dnnl_conv_primitives_created() == after);
  }
}
