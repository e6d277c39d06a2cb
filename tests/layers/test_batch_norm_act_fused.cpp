// functional::batch_norm_relu on (N, C) runs relu [then clamp] inside batch norm's
// normalisation pass and applies the activation's mask inside batch norm's backward sums
// and dx (kernels::bn_rows_forward<T>().affine_act, bn_rows_backward<T>().sums_masked, .dx_masked). It must give
// the bits of batch_norm followed by relu / relu_clamp as separate recorded ops: the output,
// the gradients of x, weight and bias, and the running statistics, on every kernel path
// (channels in registers for cached sizes, row by row for larger ones, streaming stores past
// 24 MiB), in float and double, train and eval mode, with values at the clamp's bound and NaN.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/layers/functional/batch_norm.h>

using namespace tapegrad;
namespace F = tapegrad::layers::functional;

namespace {

// Same bits, element by element (any NaN matches any NaN).
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  for (std::size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(va[i]) && std::isnan(vb[i])) continue;
#if defined(TAPEGRAD_ISA_PORTABLE)
    if (std::memcmp(&va[i], &vb[i], sizeof(double)) != 0) return false;
#else
    // A -march=native build lets the compiler contract the two paths' arithmetic into FMAs
    // differently on some CPUs (seen on an AMD EPYC family 26): the same values to rounding.
    if (std::abs(va[i] - vb[i]) > 1e-6 * std::max(1.0, std::abs(vb[i]))) return false;
#endif
  }
  return true;
}

struct Run {
  Tensor y, gx, gw, gb, running_mean, running_var;
};

// One forward and backward (seed g), fused (batch_norm_relu) or apart (batch_norm, then
// relu or relu_clamp, each its own tape node).
Run run(bool fused, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& rm0, const Tensor& rv0,
        bool train, std::optional<std::pair<double, double>> clip, const Tensor& g) {
  Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
  Run r;
  r.running_mean = rm0.clone();
  r.running_var = rv0.clone();
  const F::RunningStats rs{r.running_mean, r.running_var, Tensor(), 0.1, true};
  Tensor y;
  if (fused) {
    y = F::batch_norm_relu(x, w, b, rs, train, 1e-5, "BatchNorm1d", clip);
    REQUIRE(y.grad_fn_name() == "batch_norm_relu");
  } else {
    const Tensor a = F::batch_norm(x, w, b, rs, train, 1e-5, "BatchNorm1d");
    y = clip ? relu_clamp(a, clip->first, clip->second) : relu(a);
  }
  y.backward(g);
  r.y = y.detach();
  r.gx = x.grad();
  r.gw = w.grad();
  r.gb = b.grad();
  return r;
}

void check_same(std::int64_t N, std::int64_t C, Dtype dt, bool train, bool with_clip, bool with_nan) {
  INFO("N " << N << ", C " << C << ", " << dtype_name(dt) << ", train " << train << ", clip " << with_clip
            << ", NaN " << with_nan);
  Generator gen(static_cast<std::uint64_t>(N * 131 + C));
  Tensor x = randn({N, C}, dt, gen) * 2.0 + 0.5;
  if (with_nan) {  // one NaN: its channel's statistics and outputs are NaN in both runs
    Tensor row = x.detach().clone();
    std::vector<double> v = row.to_vector();
    v[static_cast<std::size_t>(C / 2)] = std::nan("");
    x = Tensor::from_vector(v, {N, C}, dt);
  }
  const Tensor w = randn({C}, dt, gen) + 1.0, b = randn({C}, dt, gen) * 0.5;
  const Tensor rm = randn({C}, dt, gen) * 0.1, rv = uniform({C}, 0.5, 1.5, dt, gen);
  const Tensor g = randn({N, C}, dt, gen);
  std::optional<std::pair<double, double>> clip;
  if (with_clip) {
    // hi = a value the normalisation produces, so some inputs sit exactly at the bound
    // (their gradient passes: 0 < a <= hi) and others above it (theirs does not)
    NoGradGuard ng;
    const F::RunningStats rs{rm.clone(), rv.clone(), Tensor(), 0.1, true};
    const std::vector<double> a = F::batch_norm(x, w, b, rs, train, 1e-5, "BatchNorm1d").to_vector();
    double hi = 1.0;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i] > 0.5 && a[i] < 1.5) {
        hi = a[i];
        break;
      }
    clip = std::pair<double, double>(-hi, hi);
  }
  const Run f = run(true, x, w, b, rm, rv, train, clip, g), a = run(false, x, w, b, rm, rv, train, clip, g);
  CHECK(same_values(f.y, a.y));
  CHECK(same_values(f.gx, a.gx));
  CHECK(same_values(f.gw, a.gw));
  CHECK(same_values(f.gb, a.gb));
  CHECK(same_values(f.running_mean, a.running_mean));
  CHECK(same_values(f.running_var, a.running_var));
  if (with_clip && !with_nan) {  // the bound was reached, and the mask let its gradient through
    const std::vector<double> y = f.y.to_vector();
    std::size_t at = 0;
    for (double v : y) at += v == clip->second;
    CHECK(at > 0);
  }
}

}  // namespace

TEST_CASE("batch_norm_relu's fused (N, C) kernels give the bits of batch_norm then relu / relu_clamp",
          "[batch_norm_relu][fused]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  // cached sizes (channels in registers: whole vectors, a 1-3 vector tail, scalar channels)
  for (std::int64_t C : {1, 7, 37, 64, 128, 200})
    for (bool clip : {false, true})
      for (bool train : {true, false}) {
        check_same(32, C, Dtype::Float32, train, clip, false);
        check_same(5, C, Dtype::Float64, train, clip, false);
      }
  // row by row (above 512 KiB), rows in two-row steps and an odd last row
  for (bool clip : {false, true}) {
    check_same(1025, 160, Dtype::Float32, true, clip, false);
    check_same(601, 130, Dtype::Float64, true, clip, false);
  }
  // NaN in one channel: both runs propagate it the same way
  for (bool clip : {false, true}) {
    check_same(32, 40, Dtype::Float32, true, clip, true);
    check_same(1025, 160, Dtype::Float32, true, clip, true);
  }
}

TEST_CASE("batch_norm_relu's fused kernels with streaming stores give the same bits", "[batch_norm_relu][fused]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  // 49152 x 128 floats = 24 MiB: the output, the activation's input and dx are streamed
  for (bool clip : {false, true}) check_same(49152, 128, Dtype::Float32, true, clip, false);
}

TEST_CASE("batch_norm_relu's output can be written in place without breaking its backward",
          "[batch_norm_relu][fused]") {
  // the mask is read from a private copy of the activation's input, as relu holds its input
  Generator gen(3);
  const Tensor x0 = randn({16, 24}, Dtype::Float32, gen), w0 = randn({24}, Dtype::Float32, gen),
               b0 = randn({24}, Dtype::Float32, gen), g = randn({16, 24}, Dtype::Float32, gen);
  const Tensor rm = Tensor::zeros({24}), rv = Tensor::ones({24});
  const Run ref = run(true, x0, w0, b0, rm, rv, true, std::nullopt, g);
  Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
  const F::RunningStats rs{rm.clone(), rv.clone(), Tensor(), 0.1, true};
  Tensor y = F::batch_norm_relu(x, w, b, rs, true, 1e-5, "BatchNorm1d", std::nullopt);
  {
    NoGradGuard ng;
    y.mul_(0.0);
  }
  y.backward(g);
  CHECK(same_values(x.grad(), ref.gx));
  CHECK(same_values(w.grad(), ref.gw));
}
