// relu_clamp(x, lo, hi) against relu followed by clamp: the same bits forward and backward,
// at the bounds (x = 0, x = hi exactly), for NaN, and on both sides of kParallelGrain; relu
// and every selection op propagate NaN as PyTorch does.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/ops/activation.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/unary.h>
#include <tapegrad/core/parallel.h>

using namespace tapegrad;

namespace {

template <class T>
bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.data<T>(), b.data<T>(), static_cast<std::size_t>(a.numel()) * sizeof(T)) == 0;
}

// Values that hit every branch: negative, -0, +0, inside, exactly hi, above hi, NaN, ±inf.
template <class T>
std::vector<T> edge_values(std::int64_t n, double hi) {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const std::vector<T> special{T(-3), T(-0.0), T(0), T(0.25), static_cast<T>(hi), static_cast<T>(hi * 1.5), nan,
                               inf, -inf, static_cast<T>(-hi)};
  std::vector<T> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = i % 3 == 0 ? special[static_cast<std::size_t>(i / 3) % special.size()]
                                                : static_cast<T>(std::sin(0.37 * static_cast<double>(i)) * 1.7 * hi);
  return v;
}

template <class T>
void check_against_composition(std::int64_t n, double lo, double hi) {
  const Dtype dt = std::is_same_v<T, float> ? Dtype::Float32 : Dtype::Float64;
  const std::vector<T> xv = edge_values<T>(n, hi);
  std::vector<T> gv(xv.size());
  for (std::size_t i = 0; i < gv.size(); ++i) gv[i] = static_cast<T>(std::cos(0.11 * static_cast<double>(i)) - 0.3);
  const Tensor g = Tensor::from_vector(std::vector<double>(gv.begin(), gv.end()), {n}, dt);
  Tensor x1 = Tensor::from_vector(std::vector<double>(xv.begin(), xv.end()), {n}, dt).requires_grad_();
  Tensor x2 = x1.detach().clone().requires_grad_();
  Tensor y1 = relu_clamp(x1, lo, hi);
  Tensor y2 = clamp(relu(x2), lo, hi);
  y1.backward(g);
  y2.backward(g);
  CHECK(same_bits<T>(y1, y2));
  CHECK(same_bits<T>(x1.grad(), x2.grad()));
  CHECK(std::string(y1.grad_fn_name()) == "relu_clamp");
  // spot values: the gradient passes for 0 < x <= hi only
  const T* xp = x1.data<T>();
  const T* dx = x1.grad().data<T>();
  const T* gp = g.data<T>();
  for (std::int64_t i = 0; i < n; ++i) {
    const bool pass = xp[i] > T(0) && xp[i] <= static_cast<T>(hi);
    REQUIRE(dx[i] == (pass ? gp[i] : T(0)));
  }
}

}  // namespace

TEST_CASE("relu_clamp equals clamp(relu(x)) bit for bit, forward and backward", "[relu_clamp][thresholds]") {
  const int saved = get_num_threads();
  for (int nt : {1, 2}) {
    set_num_threads(nt);
    for (std::int64_t n : {std::int64_t(1), std::int64_t(37), kParallelGrain - 1, kParallelGrain + 5}) {
      INFO(n << " elements, " << nt << " thread(s)");
      check_against_composition<float>(n, -10.0, 10.0);
      check_against_composition<double>(n, -10.0, 10.0);
      check_against_composition<float>(n, 0.0, 6.0);  // lo at the ReLU's floor
    }
  }
  set_num_threads(saved);
}

TEST_CASE("relu_clamp refuses bounds the fusion does not cover and integer input", "[relu_clamp][errors]") {
  const Tensor x = Tensor::from_vector(std::vector<double>{1.0, -1.0}, {2}, Dtype::Float32);
  CHECK_THROWS_WITH(relu_clamp(x, 0.5, 2.0), Catch::Contains("relu_clamp: expected lo <= 0 <= hi, got lo=0.500000, hi=2.000000"));
  CHECK_THROWS_WITH(relu_clamp(x, -1.0, -0.5), Catch::Contains("expected lo <= 0 <= hi"));
  CHECK_THROWS_WITH(relu_clamp(x, std::nan(""), 1.0), Catch::Contains("expected lo <= 0 <= hi"));
  CHECK_THROWS_AS(relu_clamp(Tensor::zeros({1}, Dtype::Int64), -1.0, 1.0),
                  std::invalid_argument);
}

TEST_CASE("reliability: relu and every selection propagate NaN like PyTorch", "[errors][reliability]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (Dtype dt : {Dtype::Float32, Dtype::Float64}) {
    const Tensor x = Tensor::from_vector({nan, -1.0, 2.0}, {3}, dt);
    const auto r = relu(x).to_vector();
    CHECK(std::isnan(r[0]));
    CHECK(r[1] == 0.0);
    CHECK(r[2] == 2.0);
    CHECK(std::isnan(leaky_relu(x).at(0)));
    CHECK(std::isnan(clamp(x, 0.0, 1.0).at(0)));
    CHECK(std::isnan(clamp_min(x, 0.0).at(0)));
    CHECK(std::isnan(maximum(x, Tensor::zeros({3}, dt)).at(0)));
    CHECK(std::isnan(minimum(Tensor::zeros({3}, dt), x).at(0)));
    CHECK(std::isnan(max(x, 0).item()));
    CHECK(std::isnan(min(x, 0).item()));
    CHECK(argmax(x).item() == 0);
    CHECK(std::isnan(abs(x).at(0)));
    CHECK(std::isnan(where(Tensor::from_vector({1, 0, 0}, {3}, dt), x, x).at(0)));
    CHECK(std::isnan(sigmoid(x).at(0)));
    CHECK(std::isnan(tanh(x).at(0)));
    CHECK(std::isnan(gelu(x).at(0)));
    CHECK(std::isnan(softmax(x, 0).at(1)));
  }
  // the loss sees the NaN (a finite-loss guard fires); the gradient passes where the
  // input is not <= 0, as PyTorch's threshold_backward does
  Tensor w = Tensor::from_vector({nan, 1.0, -1.0}, {3}, Dtype::Float64);
  w.requires_grad_();
  Tensor loss = sum(relu(w));
  CHECK(std::isnan(loss.item()));
  loss.backward();
  CHECK(w.grad().to_vector() == std::vector<double>{1, 1, 0});
}
