#pragma once
// Helpers of the size-threshold tests (tests/core/test_thresholds_*.cpp,
// tests/layers/test_thresholds_*.cpp, tag [thresholds]): each test runs a kernel on a size
// just below and just above a threshold named in core/parallel.h, core/ops/gemm_backends.h,
// core/ops/reduce.h or layers/functional/kernels/thresholds.h, and compares every element
// with a reference computed in double / long double by plain loops in the test.
//
// Inputs are filled from a counter-based hash (splitmix64), not a tensor generator, so tens of
// millions of values cost a few milliseconds even in a sanitizer build. Every element is
// compared (a kernel that leaves part of a vector block unwritten must fail), through one
// Catch2 assertion per array (Mismatches) that reports the first mismatch and how many.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <algorithm>
#include <type_traits>
#include <vector>

#include <tapegrad/core/core.h>

namespace tapegrad::test::thresholds {

/// Restores the thread count on scope exit.
struct ThreadsGuard {
  int prev = get_num_threads();
  ~ThreadsGuard() { set_num_threads(prev); }
};

/// The thread counts every threshold test runs on.
inline const std::vector<int>& thread_counts() {
  static const std::vector<int> t{1, 2};
  return t;
}

template <class T>
Dtype dtype_for() {
  return std::is_same_v<T, float> ? Dtype::Float32 : Dtype::Float64;
}
template <class T>
const char* dtype_label() {
  return std::is_same_v<T, float> ? "float32" : "float64";
}

/// A value in [-1, 1) from (seed, i): splitmix64's finaliser, top 53 bits.
inline double hash_unit(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/// A tensor of `shape` and T's dtype with element i = scale·hash_unit(seed, i) + offset(i),
/// where offset(i) = shift·(channel of i), the channel being (i / inner) mod channels
/// (channels = 0: no offset). Exactly representable in T after the rounding of the store.
template <class T>
Tensor pattern(const Shape& shape, std::uint64_t seed, double scale = 1.0, std::int64_t channels = 0,
               std::int64_t inner = 1, double shift = 0.0) {
  Tensor t = Tensor::empty(shape, dtype_for<T>());
  T* p = t.data<T>();
  const std::int64_t n = t.numel(), block = channels > 0 ? inner : std::max<std::int64_t>(n, 1);
  std::int64_t ch = 0;
  for (std::int64_t b = 0; b < n; b += block) {  // blocks of `inner` values share a channel
    const double off = channels > 0 ? shift * static_cast<double>(ch) : 0.0;
    for (std::int64_t i = b, e = std::min(n, b + block); i < e; ++i)
      p[i] = static_cast<T>(scale * hash_unit(seed, static_cast<std::uint64_t>(i)) + off);
    if (channels > 0 && ++ch == channels) ch = 0;
  }
  return t;
}

/// Collects the elements outside their tolerance and turns them into one assertion that
/// names the array, how many were off and the first one. NaN is always off.
class Mismatches {
 public:
  explicit Mismatches(std::string what) : what_(std::move(what)) {}
  /// Element i: got against want, allowed |got - want| <= tol.
  void check(std::int64_t i, double got, double want, double tol) {
    ++count_;
    if (std::abs(got - want) <= tol) return;
    if (bad_ == 0) {
      first_ = i;
      got_ = got;
      want_ = want;
      tol_ = tol;
    }
    ++bad_;
  }
  /// The same with tol·max(1, |want|): relative above 1, absolute below.
  void check_rel(std::int64_t i, double got, double want, double tol) {
    check(i, got, want, tol * std::max(1.0, std::abs(want)));
  }
  void require() const {
    std::ostringstream msg;
    msg.precision(17);
    msg << what_ << ": " << bad_ << " of " << count_ << " elements outside their tolerance";
    if (bad_ > 0) msg << "; first at " << first_ << ": got " << got_ << ", want " << want_ << " (tol " << tol_ << ")";
    INFO(msg.str());
    REQUIRE(count_ > 0);
    REQUIRE(bad_ == 0);
  }

 private:
  std::string what_;
  std::int64_t count_ = 0, bad_ = 0, first_ = -1;
  double got_ = 0, want_ = 0, tol_ = 0;
};

/// The norm threshold tests' eps and momentum (PyTorch's defaults).
inline constexpr double kEps = 1e-5, kMomentum = 0.1;

/// The norm kernels' tolerances (test_thresholds_batch_norm.cpp, test_thresholds_grouped_norm.cpp):
/// element-wise results (y, dx) relative to max(1, |want|); channel or row sums (dγ, dβ)
/// relative to the sum of their terms' magnitudes (float32 kernels add blocks of rows in
/// float32); running statistics relative.
template <class T>
struct NormTol {
  static constexpr bool f32 = std::is_same_v<T, float>;
  static constexpr double y = f32 ? 1e-5 : 1e-12, dx = f32 ? 5e-5 : 1e-11, sum = f32 ? 2e-5 : 1e-12,
                          run = f32 ? 1e-6 : 1e-13;
};

/// The smallest n with n·unit_bytes >= bytes: how many rows of unit_bytes reach a byte threshold.
inline std::int64_t rows_reaching(std::size_t bytes, std::int64_t unit_bytes) {
  return static_cast<std::int64_t>((bytes + static_cast<std::size_t>(unit_bytes) - 1) / static_cast<std::size_t>(unit_bytes));
}

/// Shape as text, for INFO lines.
inline std::string shape_text(const Shape& s) { return shape_str(s); }

}  // namespace tapegrad::test::thresholds
