// Shape ops: forward and backward side by side.
#include <tapegrad/core/ops/shape_ops.h>

#include <algorithm>
#include <cstring>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/kernels.h>

namespace tapegrad {

Tensor reshape(const Tensor& x, const Shape& shape_in) {
  Shape shape = shape_in;
  std::int64_t infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw std::invalid_argument("reshape: only one dimension can be -1, got " + shape_str(shape_in));
      infer = static_cast<std::int64_t>(i);
      shape[i] = 1;  // the known sizes' product below; set after it
    } else if (shape[i] < 0) {
      throw std::invalid_argument("reshape: invalid shape " + shape_str(shape_in));
    }
  }
  // zeros or not: a [2, 0, 2^62, 4] view would give a later flatten an overflowing size
  if (numel_overflows(shape))
    throw std::invalid_argument("reshape: shape " + shape_str(shape_in) +
                                " has more elements than a 64-bit count holds (size overflow); input shape " +
                                shape_str(x.shape()));
  const std::int64_t known = numel_of(shape);
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      throw std::invalid_argument("reshape: shape " + shape_str(shape_in) + " is invalid for input of shape " +
                                  shape_str(x.shape()));
    shape[infer] = x.numel() / known;
  }
  if (known * (infer >= 0 ? shape[infer] : 1) != x.numel())
    throw std::invalid_argument("reshape: shape " + shape_str(shape_in) + " is invalid for input of shape " +
                                shape_str(x.shape()) + " (" + std::to_string(x.numel()) + " elements)");
  Tensor out = alias_with_shape(x, shape);
  if (autograd::needs_grad({&x}))
    autograd::record("reshape", out, {x},
                     [xs = x.shape()](const Tensor& g, GradSink& gs) {
                       gs.add(0, autograd::creating_graph() ? reshape(g, xs) : alias_with_shape(g, xs));
                     }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

namespace {
Tensor permute_values(const Tensor& x, const std::vector<std::int64_t>& dims) {
  const Shape& xs = x.shape();
  const std::size_t r = xs.size();
  Shape os(r);
  for (std::size_t i = 0; i < r; ++i) os[i] = xs[dims[i]];
  Tensor out = Tensor::empty(os, x.dtype());
  const auto xst = contiguous_strides(xs);
  std::vector<std::int64_t> st(r);  // stride in x of each output dim
  for (std::size_t i = 0; i < r; ++i) st[i] = xst[dims[i]];
  const std::size_t es = dtype_size(x.dtype());
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  kernels::for_each_strided(os, st, [&](std::int64_t k, std::int64_t off) {
    std::memcpy(dst + k * es, src + off * es, es);
  });
  return out;
}
}  // namespace

Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims_in) {
  const std::int64_t r = x.dim();
  if (static_cast<std::int64_t>(dims_in.size()) != r)
    throw std::invalid_argument("permute: expected " + std::to_string(r) + " dims for shape " + shape_str(x.shape()) +
                                ", got " + shape_str(dims_in));
  std::vector<std::int64_t> dims(dims_in.size());
  for (std::size_t i = 0; i < dims.size(); ++i) dims[i] = wrap_axis(dims_in[i], r);
  {
    auto s = dims;
    std::sort(s.begin(), s.end());
    for (std::int64_t i = 0; i < r; ++i)
      if (s[i] != i) throw std::invalid_argument("permute: " + shape_str(dims_in) + " is not a permutation");
  }
  Tensor out = permute_values(x, dims);
  if (autograd::needs_grad({&x})) {
    std::vector<std::int64_t> inv(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) inv[dims[i]] = static_cast<std::int64_t>(i);
    autograd::record("permute", out, {x}, [inv](const Tensor& g, GradSink& gs) {
      gs.add(0, autograd::creating_graph() ? permute(g, inv) : permute_values(g, inv));
    }, autograd::kSavesNothing | autograd::kSecondOrder);
  }
  return out;
}

Tensor transpose(const Tensor& x, std::int64_t d0, std::int64_t d1) {
  const std::int64_t r = x.dim();
  std::vector<std::int64_t> dims(static_cast<std::size_t>(r));
  for (std::int64_t i = 0; i < r; ++i) dims[i] = i;
  std::swap(dims[wrap_axis(d0, r)], dims[wrap_axis(d1, r)]);
  return permute(x, dims);
}

}  // namespace tapegrad
