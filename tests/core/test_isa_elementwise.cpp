// The element-wise kernels compiled per ISA level (core/kernels/pointwise.h): every registered
// table this build carries and the CPU runs (baseline, avx2, avx512 in the portable build on an
// AVX-512 machine; the build's one level otherwise), called directly, against float64
// references computed here, at lengths that take whole vectors, a tail, or nothing; then the
// dispatched entry points and the ops on both sides of the parallel grain and the fill_rows
// copy threshold. The ctest entries isa_forced_<level>_core rerun the [isa] cases with
// TAPEGRAD_ISA set.
#include "isa_variants_support.h"
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/isa.h>
#include <tapegrad/core/kernels/pointwise.h>
#include <tapegrad/core/ops/activation.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/matmul.h>
#include <tapegrad/core/ops/unary.h>
#include <tapegrad/core/parallel.h>

using namespace tapegrad;
using kernels::BinaryOp;

namespace {

// One level's registered table of the element-wise family, with its level.
template <class T>
using Variant = test::LevelTable<kernels::PointwiseKernels<T>>;

// The levels this build carries that this CPU runs.
template <class T>
std::vector<Variant<T>> runnable_variants() {
  return test::runnable_tables<kernels::PointwiseKernels<T>>(TAPEGRAD_KERNEL_LEVELS(kernels, pointwise, T));
}

// Values of both signs, zeros of both signs, values on the clamp bounds, a NaN and infinities.
template <class T>
std::vector<T> sample(std::int64_t n, double phase) {
  std::vector<T> x(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = 2.5 * std::sin(0.731 * double(i) + phase) + 0.001 * double(i % 13);
    x[static_cast<std::size_t>(i)] = static_cast<T>(v);
  }
  const T specials[] = {T(0), -T(0), T(1.5), T(-1.25), std::numeric_limits<T>::quiet_NaN(),
                        std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity()};
  for (std::size_t k = 0; k < std::size(specials) && 3 * k < x.size(); ++k) x[3 * k] = specials[k];
  return x;
}

// a == b as values, NaN equal to NaN (the kernels pass NaN through).
template <class T>
bool same(T a, double ref) {
  return (std::isnan(a) && std::isnan(ref)) || double(a) == ref;
}

// float64 references (T's rounding of one IEEE operation in double is T's own operation).
double ref_binary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
  }
  return 0;
}

template <class T>
void check_level(const Variant<T>& k, std::int64_t n) {
  INFO(isa_name(k.level) << ", " << (sizeof(T) == 4 ? "float32" : "float64") << ", n " << n);
  const std::vector<T> x = sample<T>(n, 0.3), g = sample<T>(n, 1.7);
  std::vector<T> y(static_cast<std::size_t>(n + 2), T(7));  // y[n], y[n+1]: must stay untouched
  const T lo = T(-1.25), hi = T(1.5);
  // a sub-range [b, e) too: the kernels write only it
  const std::int64_t b = n > 2 ? 1 : 0, e = n > 2 ? n - 1 : n;
  auto check_range = [&](auto ref, const char* what) {
    INFO(what);
    for (std::int64_t i = 0; i < n + 2; ++i) {
      const std::size_t u = static_cast<std::size_t>(i);
      if (i < b || i >= e)
        REQUIRE(y[u] == T(7));
      else
        REQUIRE(same<T>(y[u], static_cast<double>(static_cast<T>(ref(u)))));
    }
    std::fill(y.begin(), y.end(), T(7));
  };
  k.relu_forward(x.data(), y.data(), b, e);
  check_range([&](std::size_t i) { return double(x[i]) <= 0 ? 0.0 : double(x[i]); }, "relu_forward");
  k.relu_backward(g.data(), x.data(), y.data(), b, e);
  check_range([&](std::size_t i) { return double(x[i]) <= 0 ? 0.0 : double(g[i]); }, "relu_backward");
  k.clamp_forward(x.data(), y.data(), b, e, lo, hi);
  check_range([&](std::size_t i) { return std::isnan(x[i]) ? double(x[i]) : std::min(std::max(double(x[i]), double(lo)), double(hi)); },
              "clamp_forward");
  k.clamp_forward(x.data(), y.data(), b, e, hi, lo);  // min > max: max everywhere (NaN passes)
  check_range([&](std::size_t i) { return std::isnan(x[i]) ? double(x[i]) : double(lo); }, "clamp_forward, lo > hi");
  k.clamp_backward(g.data(), x.data(), y.data(), b, e, lo, hi);
  check_range([&](std::size_t i) { return double(x[i]) >= double(lo) && double(x[i]) <= double(hi) ? double(g[i]) : 0.0; },
              "clamp_backward");
  k.relu_clamp_forward(x.data(), y.data(), b, e, hi);
  check_range([&](std::size_t i) { return std::isnan(x[i]) ? double(x[i]) : std::min(std::max(double(x[i]), 0.0), double(hi)); },
              "relu_clamp_forward");
  k.relu_clamp_backward(g.data(), x.data(), y.data(), b, e, hi);
  check_range([&](std::size_t i) { return double(x[i]) > 0 && double(x[i]) <= double(hi) ? double(g[i]) : 0.0; },
              "relu_clamp_backward");
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div}) {
    k.binary_same(op, x.data(), g.data(), y.data(), b, e);
    check_range([&](std::size_t i) { return ref_binary(op, double(x[i]), double(g[i])); }, "binary_same");
    k.binary_scalar(op, x.data(), T(0.375), y.data(), b, e);
    check_range([&](std::size_t i) { return ref_binary(op, double(x[i]), 0.375); }, "binary_scalar");
  }
}

// fill_rows and sum_rows of one level on (rows, n) and (outer, R, inner).
template <class T>
void check_rows(const Variant<T>& k, std::int64_t rows, std::int64_t n) {
  INFO(isa_name(k.level) << ", " << (sizeof(T) == 4 ? "float32" : "float64") << ", rows " << rows << ", n " << n);
  const std::vector<T> bias = sample<T>(n, 0.9);
  std::vector<T> y(static_cast<std::size_t>(rows * n + 1), T(7));
  k.fill_rows(y.data(), bias.data(), rows, n);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; ++j)
      REQUIRE(same<T>(y[static_cast<std::size_t>(r * n + j)], double(bias[static_cast<std::size_t>(j)])));
  REQUIRE(y.back() == T(7));
  // y[r, j] += b[r]: one rounding of a float64-exact sum
  std::vector<T> z = sample<T>(rows * n + 1, 2.3);
  const std::vector<T> z0 = z, rb = sample<T>(rows, 0.4);
  k.add_row_values(z.data(), rb.data(), rows, n);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      const std::size_t u = static_cast<std::size_t>(r * n + j);
      REQUIRE(same<T>(z[u], double(static_cast<T>(double(z0[u]) + double(rb[static_cast<std::size_t>(r)])))));
    }
  REQUIRE(z.back() == z0.back());
  // sums over the middle axis of (2, rows, n), finite values: each column's rows in order
  const std::int64_t outer = 2;
  std::vector<T> x(static_cast<std::size_t>(outer * rows * n));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(std::sin(0.37 * double(i)) * 3.0 + 0.125);
  std::vector<T> s(static_cast<std::size_t>(outer * n + 1), T(7));
  k.sum_rows(x.data(), s.data(), outer, rows, n);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < n; ++j) {
      double ref = 0, ord = 0;  // the float64 sum, and T's sum in row order (the kernel's bits)
      T acc = x[static_cast<std::size_t>((o * rows) * n + j)];
      for (std::int64_t r = 0; r < rows; ++r) {
        const T v = x[static_cast<std::size_t>((o * rows + r) * n + j)];
        ref += double(v);
        if (r > 0) acc += v;
      }
      ord = double(acc);
      const double got = double(s[static_cast<std::size_t>(o * n + j)]);
      REQUIRE(got == ord);
      REQUIRE(got == Approx(ref).margin(sizeof(T) == 4 ? 1e-4 * double(rows) : 1e-12 * double(rows)));
    }
  REQUIRE(s.back() == T(7));
}

}  // namespace

TEST_CASE("isa: the element-wise kernels of every runnable level agree with float64", "[isa]") {
  const auto vf = runnable_variants<float>();
  const auto vd = runnable_variants<double>();
  REQUIRE(!vf.empty());
  CHECK(vf.back().level == std::min(isa_variants().back(), cpu_isa()));  // the machine's best level is among them
  for (std::int64_t n : {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 100, 257}) {
    for (const auto& k : vf) check_level(k, n);
    for (const auto& k : vd) check_level(k, n);
  }
}

TEST_CASE("isa: fill_rows, add_row_values and sum_rows of every runnable level, both sides of their thresholds", "[isa]") {
  // fill_rows copies rows longer than 1024 bytes with memcpy (256 floats, 128 doubles);
  // sum_rows adds blocks of 128 bytes of columns (32 floats, 16 doubles) in registers.
  for (const auto& k : runnable_variants<float>())
    for (std::int64_t n : {2, 31, 32, 33, 70, 256, 257})
      for (std::int64_t rows : {1, 3, 9}) check_rows(k, rows, n);
  for (const auto& k : runnable_variants<double>())
    for (std::int64_t n : {2, 15, 16, 17, 128, 129})
      for (std::int64_t rows : {1, 4}) check_rows(k, rows, n);
}

TEST_CASE("isa: the dispatched element-wise ops on both sides of the parallel grain", "[isa]") {
  for (std::int64_t n : {std::int64_t(1000), kParallelGrain - 1, kParallelGrain + 17, 3 * kParallelGrain + 5}) {
    INFO("kernels at " << isa_name(isa()) << ", n " << n);
    std::vector<double> xs(static_cast<std::size_t>(n)), gs(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      xs[static_cast<std::size_t>(i)] = 2.0 * std::sin(0.013 * double(i));
      gs[static_cast<std::size_t>(i)] = std::cos(0.021 * double(i)) + 0.5;
    }
    Tensor x = Tensor::from_vector(xs, {n}, Dtype::Float32).requires_grad_();
    const Tensor g = Tensor::from_vector(gs, {n}, Dtype::Float32);
    const Tensor r = relu(x), c = clamp(x, -0.5, 0.75), rc = relu_clamp(x, -1.0, 0.5);
    const Tensor s = add(x, g), d = sub(x, g), m = mul(x, g), q = div(x, g), ms = mul(x, 0.25), as = add(x, -0.5);
    const Tensor bs = mul(x, Tensor::from_vector({3.0}, {1}, Dtype::Float32));  // a one-element b: the scalar loop
    Tensor(r).backward(g);
    const float* xp = x.data<float>();
    const float* gp = g.data<float>();
    const float* gx = x.grad().data<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      const double xv = xp[i], gv = gp[i];
      REQUIRE(r.data<float>()[i] == float(xv <= 0 ? 0.0 : xv));
      REQUIRE(c.data<float>()[i] == float(std::min(std::max(xv, -0.5), 0.75)));
      REQUIRE(rc.data<float>()[i] == float(std::min(std::max(xv, 0.0), 0.5)));
      REQUIRE(s.data<float>()[i] == float(xv + gv));
      REQUIRE(d.data<float>()[i] == float(xv - gv));
      REQUIRE(m.data<float>()[i] == float(xv * gv));
      REQUIRE(q.data<float>()[i] == float(xv / gv));
      REQUIRE(ms.data<float>()[i] == float(xv * 0.25));
      REQUIRE(as.data<float>()[i] == float(xv - 0.5));
      REQUIRE(bs.data<float>()[i] == float(xv * 3.0));
      REQUIRE(gx[i] == float(xv <= 0 ? 0.0 : gv));
    }
  }
}

TEST_CASE("isa: linear's bias rows and their gradient through the dispatched kernels", "[isa]") {
  // out_features 300 floats: rows longer than 1024 bytes, copied; 40: the loop
  for (std::int64_t out_f : {40, 300}) {
    const std::int64_t N = 5, in_f = 3;
    std::vector<double> xs(static_cast<std::size_t>(N * in_f)), ws(static_cast<std::size_t>(out_f * in_f)),
        bs(static_cast<std::size_t>(out_f));
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.5 * double(i));
    for (std::size_t i = 0; i < ws.size(); ++i) ws[i] = std::cos(0.3 * double(i));
    for (std::size_t i = 0; i < bs.size(); ++i) bs[i] = 0.01 * double(i) - 1.0;
    const Tensor x = Tensor::from_vector(xs, {N, in_f}, Dtype::Float64);
    const Tensor w = Tensor::from_vector(ws, {out_f, in_f}, Dtype::Float64);
    Tensor b = Tensor::from_vector(bs, {out_f}, Dtype::Float64).requires_grad_();
    const Tensor y = linear(x, w, b);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t o = 0; o < out_f; ++o) {
        double ref = bs[static_cast<std::size_t>(o)];
        for (std::int64_t k = 0; k < in_f; ++k)
          ref += xs[static_cast<std::size_t>(n * in_f + k)] * ws[static_cast<std::size_t>(o * in_f + k)];
        REQUIRE(y.data<double>()[n * out_f + o] == Approx(ref).margin(1e-12));
      }
    // d(Σ y·c)/db = Σ_n c[n, o]
    std::vector<double> cs(static_cast<std::size_t>(N * out_f));
    for (std::size_t i = 0; i < cs.size(); ++i) cs[i] = std::sin(1.1 * double(i)) + 0.25;
    Tensor(y).backward(Tensor::from_vector(cs, {N, out_f}, Dtype::Float64));
    for (std::int64_t o = 0; o < out_f; ++o) {
      double ref = 0;
      for (std::int64_t n = 0; n < N; ++n) ref += cs[static_cast<std::size_t>(n * out_f + o)];
      REQUIRE(b.grad().data<double>()[o] == Approx(ref).margin(1e-12));
    }
  }
}
