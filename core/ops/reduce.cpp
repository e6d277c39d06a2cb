// Reductions: forward and backward side by side.
#include <tapegrad/core/ops/reduce.h>

#include <algorithm>
#include <cstring>

#include <Eigen/Core>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/kernels/pointwise.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/shape_ops.h>

namespace tapegrad {
namespace {

std::vector<std::int64_t> normalize_axes(const std::vector<std::int64_t>& axes, std::int64_t rank) {
  std::vector<std::int64_t> r;
  if (axes.empty()) {
    for (std::int64_t i = 0; i < rank; ++i) r.push_back(i);
    return r;
  }
  for (auto a : axes) r.push_back(wrap_axis(a, rank));
  std::sort(r.begin(), r.end());
  if (std::adjacent_find(r.begin(), r.end()) != r.end())
    throw std::invalid_argument("sum: an axis is listed twice");
  if (rank == 0) r.clear();  // axis 0/-1 of a scalar reduces nothing
  return r;
}

// out[o, i] = Σ_r x[o, r, i] for x viewed as (outer, R, inner).
template <class T>
void reduce_block(const T* x, T* out, std::int64_t outer, std::int64_t R, std::int64_t inner) {
  if (inner == 1) {
    Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> m(x, outer, R);
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> o(out, outer);
    o = m.rowwise().sum();
    return;
  }
  kernels::pointwise<T>().sum_rows(x, out, outer, R, inner);  // per ISA level (core/kernels/pointwise.h)
}

// Plain-value sum over sorted axes, keeping them as size 1 (no recording).
Tensor sum_keepdim_values(const Tensor& x, const std::vector<std::int64_t>& axes) {
  Tensor cur = x;
  Shape shape = x.shape();
  // Reduce maximal runs of adjacent axes, highest first, so earlier indices stay valid.
  std::size_t k = axes.size();
  while (k > 0) {
    std::size_t j = k - 1;
    while (j > 0 && axes[j - 1] + 1 == axes[j]) --j;
    const std::int64_t a0 = axes[j], a1 = axes[k - 1];
    std::int64_t outer = 1, R = 1, inner = 1;
    for (std::int64_t d = 0; d < a0; ++d) outer *= shape[d];
    for (std::int64_t d = a0; d <= a1; ++d) R *= shape[d];
    for (std::size_t d = a1 + 1; d < shape.size(); ++d) inner *= shape[d];
    for (std::int64_t d = a0; d <= a1; ++d) shape[d] = 1;
    Tensor next = Tensor::empty(shape, x.dtype());
    if (R == 0) {
      next.zero_();
    } else {
      TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "sum", [&] {
        reduce_block<scalar_t>(cur.data<scalar_t>(), next.data<scalar_t>(), outer, R, inner);
      });
    }
    cur = next;
    k = j;
  }
  if (axes.empty()) cur = cur.clone();
  return cur;
}

Shape drop_axes(const Shape& s, const std::vector<std::int64_t>& axes) {
  Shape r;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(s.size()); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), d)) r.push_back(s[d]);
  return r;
}

}  // namespace

Tensor detail::sum_rows_values(const Tensor& x) {
  const std::int64_t R = x.size(0), C = x.size(1);
  Tensor out = Tensor::empty({C}, x.dtype());
  if (R == 0) {
    out.zero_();
    return out;
  }
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "sum", [&] { reduce_block<scalar_t>(x.data<scalar_t>(), out.data<scalar_t>(), 1, R, C); });
  return out;
}

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& axes_in, bool keepdim) {
  kernels::check_floating(x, "sum");
  const auto axes = normalize_axes(axes_in, x.dim());
  Tensor kept = sum_keepdim_values(x, axes);
  Tensor out = keepdim ? kept : alias_with_shape(kept, drop_axes(x.shape(), axes));
  if (autograd::needs_grad({&x})) {
    autograd::record("sum", out, {x}, [xs = x.shape(), ks = kept.shape()](const Tensor& g, GradSink& gs) {
      gs.add(0, broadcast_to(autograd::creating_graph() ? reshape(g, ks) : alias_with_shape(g, ks), xs));
    }, autograd::kSavesNothing | autograd::kSecondOrder);
  }
  return out;
}

Tensor sum(const Tensor& x) { return sum(x, {}, false); }

Tensor mean(const Tensor& x, const std::vector<std::int64_t>& axes_in, bool keepdim) {
  kernels::check_floating(x, "mean");
  const auto axes = normalize_axes(axes_in, x.dim());
  std::int64_t count = 1;
  for (auto a : axes) count *= x.shape()[a];
  if (count == 0) throw std::invalid_argument("mean: reducing over zero elements of shape " + shape_str(x.shape()));
  return mul(sum(x, axes_in, keepdim), 1.0 / static_cast<double>(count));
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const Shape& xs = x.shape();
  if (shape.size() > xs.size())
    throw std::invalid_argument("sum_to: cannot reduce shape " + shape_str(xs) + " to " + shape_str(shape));
  const std::size_t lead = xs.size() - shape.size();
  std::vector<std::int64_t> axes;
  for (std::size_t d = 0; d < xs.size(); ++d) {
    if (d < lead) {
      axes.push_back(static_cast<std::int64_t>(d));
    } else if (shape[d - lead] != xs[d]) {
      if (shape[d - lead] != 1)
        throw std::invalid_argument("sum_to: cannot reduce shape " + shape_str(xs) + " to " + shape_str(shape));
      axes.push_back(static_cast<std::int64_t>(d));
    }
  }
  Tensor s = sum(x, axes, true);
  return reshape(s, shape);
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  kernels::check_floating(x, "broadcast_to");
  if (x.shape() == shape) return x;
  if (broadcast_shapes(x.shape(), shape, "broadcast_to") != shape)
    throw std::invalid_argument("broadcast_to: shape " + shape_str(x.shape()) + " cannot be broadcast to " +
                                shape_str(shape));
  Tensor zeros = Tensor::zeros(shape, x.dtype());
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "broadcast_to", [&] {
    return kernels::broadcast_binary<scalar_t>(zeros, x, "broadcast_to", [](scalar_t, scalar_t v) { return v; });
  });
  if (autograd::needs_grad({&x}))
    autograd::record("broadcast_to", out, {x},
                     [xs = x.shape()](const Tensor& g, GradSink& gs) { gs.add(0, sum_to(g, xs)); }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

}  // namespace tapegrad
