// Views and slices: each forward is followed by its backward closure.
#include <tapegrad/core/ops/view_ops.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/kernels.h>

namespace tapegrad {
namespace {

void check_defined(const Tensor& x, const char* op) {
  if (!x.defined()) throw std::invalid_argument(std::string(op) + ": the input tensor is undefined");
}

std::int64_t axis_or_throw(std::int64_t dim, std::int64_t rank, const Tensor& x, const char* op) {
  try {
    return wrap_axis(dim, rank);
  } catch (const std::out_of_range& e) {
    throw std::out_of_range(std::string(op) + ": " + e.what() + ", input shape " + shape_str(x.shape()));
  }
}

// A view of x under `shape` (same numel); the gradient is viewed back.
Tensor view_as(const Tensor& x, const Shape& shape, const char* op) {
  Tensor out = alias_with_shape(x, shape);
  if (autograd::needs_grad({&x}))
    autograd::record(op, out, {x},
                     [xs = x.shape(), op](const Tensor& g, GradSink& gs) {
                       gs.add(0, autograd::creating_graph() ? view_as(g, xs, op) : alias_with_shape(g, xs));
                     }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

// x viewed as (outer, R, inner) along dim; the slice keeps indices start + j·step, j < n.
struct SliceSpec {
  std::int64_t outer = 1, R = 1, inner = 1, start = 0, step = 1, n = 0;
};

// Copies the slice's rows between `whole` (the sliced tensor) and `packed` (the slice alone,
// contiguous): into packed when `gather`, else back into whole.
void copy_slice(const SliceSpec& sp, const Tensor& whole, const Tensor& packed, bool gather) {
  const std::size_t es = dtype_size(whole.dtype());
  char* pw = static_cast<char*>(whole.raw_data());
  char* pp = static_cast<char*>(packed.raw_data());
  const std::size_t row = static_cast<std::size_t>(sp.inner) * es;
  for (std::int64_t o = 0; o < sp.outer; ++o)
    for (std::int64_t j = 0; j < sp.n; ++j) {
      char* w = pw + ((o * sp.R + sp.start + j * sp.step) * sp.inner) * es;
      char* p = pp + ((o * sp.n + j) * sp.inner) * es;
      if (gather)
        std::memcpy(p, w, row);
      else
        std::memcpy(w, p, row);
    }
}

// The slice's values out of src, as a new tensor of shape os.
Tensor gather_slice(const Tensor& src, const SliceSpec& sp, const Shape& os) {
  Tensor out = Tensor::empty(os, src.dtype());
  copy_slice(sp, src, out, true);
  return out;
}

// The slice's backward: zeros of the input's shape with g written into the slice.
Tensor scatter_slice(const Tensor& g, const SliceSpec& sp, const Shape& xs) {
  Tensor out = Tensor::zeros(xs, g.dtype());
  copy_slice(sp, out, g, false);
  return out;
}

Tensor scatter_op(const Tensor& g, const SliceSpec& sp, const Shape& xs, const Shape& os);

// The slice as a recorded op of its own (the backward of scatter_op; differentiable again).
Tensor gather_op(const Tensor& x, const SliceSpec& sp, const Shape& os) {
  Tensor out = gather_slice(x, sp, os);
  if (autograd::needs_grad({&x}))
    autograd::record("slice_backward_backward", out, {x}, [sp, xs = x.shape(), os](const Tensor& g, GradSink& gs) {
      gs.add(0, scatter_op(g, sp, xs, os));
    }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

// A slice's backward as a recorded op (a create_graph pass): g written into zeros; its own
// backward takes the slice again.
Tensor scatter_op(const Tensor& g, const SliceSpec& sp, const Shape& xs, const Shape& os) {
  Tensor out = scatter_slice(g, sp, xs);
  if (autograd::needs_grad({&g}))
    autograd::record("slice_backward", out, {g}, [sp, os](const Tensor& gg, GradSink& gs) {
      gs.add(0, gather_op(gg, sp, os));
    }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

Tensor slice_impl(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t n, std::int64_t step,
                  const char* op) {
  const Shape& s = x.shape();
  SliceSpec sp;
  for (std::int64_t d = 0; d < dim; ++d) sp.outer *= s[d];
  sp.R = s[dim];
  for (std::size_t d = dim + 1; d < s.size(); ++d) sp.inner *= s[d];
  sp.start = start;
  sp.step = step;
  sp.n = n;
  Shape os = s;
  os[dim] = n;
  Tensor out;
  if (sp.outer == 1 && (step == 1 || n <= 1))  // one contiguous block: share storage
    out = alias_with_shape(x, os, static_cast<std::size_t>(start * sp.inner) * dtype_size(x.dtype()));
  else
    out = gather_slice(x, sp, os);
  if (autograd::needs_grad({&x}))
    autograd::record(op, out, {x},
                     [sp, xs = s, os](const Tensor& g, GradSink& gs) {
                       gs.add(0, autograd::creating_graph() ? scatter_op(g, sp, xs, os) : scatter_slice(g, sp, xs));
                     }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

}  // namespace

Tensor unsqueeze(const Tensor& x, std::int64_t dim) {
  check_defined(x, "unsqueeze");
  const std::int64_t d = axis_or_throw(dim, x.dim() + 1, x, "unsqueeze");
  Shape s = x.shape();
  s.insert(s.begin() + d, 1);
  return view_as(x, s, "unsqueeze");
}

Tensor squeeze(const Tensor& x) {
  check_defined(x, "squeeze");
  Shape s;
  for (auto v : x.shape())
    if (v != 1) s.push_back(v);
  return view_as(x, s, "squeeze");
}

Tensor squeeze(const Tensor& x, std::int64_t dim) {
  check_defined(x, "squeeze");
  const std::int64_t d = axis_or_throw(dim, x.dim(), x, "squeeze");
  Shape s = x.shape();
  if (!s.empty() && s[d] == 1) s.erase(s.begin() + d);
  return view_as(x, s, "squeeze");
}

Tensor flatten(const Tensor& x, std::int64_t start_dim, std::int64_t end_dim) {
  check_defined(x, "flatten");
  if (x.dim() == 0) return view_as(x, {1}, "flatten");
  const std::int64_t a = axis_or_throw(start_dim, x.dim(), x, "flatten");
  const std::int64_t b = axis_or_throw(end_dim, x.dim(), x, "flatten");
  if (a > b)
    throw std::invalid_argument("flatten: start_dim " + std::to_string(start_dim) + " comes after end_dim " +
                                std::to_string(end_dim) + " for shape " + shape_str(x.shape()));
  const Shape& s = x.shape();
  Shape os(s.begin(), s.begin() + a);
  os.push_back(numel_of(Shape(s.begin() + a, s.begin() + b + 1)));
  os.insert(os.end(), s.begin() + b + 1, s.end());
  return view_as(x, os, "flatten");
}

Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length) {
  check_defined(x, "narrow");
  if (x.dim() == 0) throw std::invalid_argument("narrow: cannot narrow a scalar (shape [])");
  const std::int64_t d = axis_or_throw(dim, x.dim(), x, "narrow");
  const std::int64_t size = x.shape()[d];
  const std::int64_t st = start < 0 ? start + size : start;
  if (st < 0 || st > size || length < 0 || length > size - st)  // no start + length: it may overflow
    throw std::out_of_range("narrow: start " + std::to_string(start) + " + length " + std::to_string(length) +
                            " exceeds dimension " + std::to_string(d) + " of size " + std::to_string(size) +
                            " (input shape " + shape_str(x.shape()) + ")");
  return slice_impl(x, d, st, length, 1, "narrow");
}

Tensor slice(const Tensor& x, std::int64_t dim, std::optional<std::int64_t> start, std::optional<std::int64_t> end,
             std::int64_t step) {
  check_defined(x, "slice");
  if (x.dim() == 0) throw std::invalid_argument("slice: cannot slice a scalar (shape [])");
  if (step < 1) throw std::invalid_argument("slice: step must be >= 1, got " + std::to_string(step));
  const std::int64_t d = axis_or_throw(dim, x.dim(), x, "slice");
  const std::int64_t size = x.shape()[d];
  auto clampi = [size](std::int64_t v) {
    if (v < 0) v += size;
    return std::clamp<std::int64_t>(v, 0, size);
  };
  const std::int64_t b = start ? clampi(*start) : 0;
  const std::int64_t e = end ? clampi(*end) : size;
  const std::int64_t n = e > b ? (e - b - 1) / step + 1 : 0;  // ceil((e - b) / step) without overflow
  return slice_impl(x, d, n > 0 ? b : 0, n, step, "slice");
}

}  // namespace tapegrad
