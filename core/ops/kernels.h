#pragma once
// Building blocks for writing an op: typed element loops (unary, binary with
// broadcasting) and the dtype checks every op starts with. Used by the generic ops in
// core/ops/ and by the op families in layers/functional/ (dropout, losses); a new op
// written elsewhere may use them too. Installed with the other headers; an internal
// interface, so its names may change between versions (the ops' own headers are the
// stable API).
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad::kernels {

/// Throws std::invalid_argument unless a and b have the same dtype (names both).
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);
/// Throws unless t is float32/float64.
void check_floating(const Tensor& t, const char* op);
/// The operands of a binary op: both float32/float64 and of one dtype (check_floating on
/// each, then check_same_dtype).
void check_floating_pair(const Tensor& a, const Tensor& b, const char* op);

/// out[i] = f(x[i]) over a new tensor of x's shape.
template <class T, class F>
Tensor map_unary(const Tensor& x, F f) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const T* __restrict p = x.data<T>();
  T* __restrict q = out.data<T>();
  parallel_for(x.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    const F fl = f;  // captures in registers, not reloaded after every store: the loop vectorises
#pragma GCC unroll 4  // four vectors an iteration: fewer loop instructions
    for (std::int64_t i = b; i < e; ++i) q[i] = fl(p[i]);
  });
  return out;
}

/// out[i] = f(x[i], y[i]) for same-shape x, y.
template <class T, class F>
Tensor map_binary_same(const Tensor& x, const Tensor& y, F f) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const T* __restrict p = x.data<T>();
  const T* __restrict r = y.data<T>();
  T* __restrict q = out.data<T>();
  parallel_for(x.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    const F fl = f;  // as in map_unary
#pragma GCC unroll 4
    for (std::int64_t i = b; i < e; ++i) q[i] = fl(p[i], r[i]);
  });
  return out;
}

/// map_unary in x's dtype: check_floating(x, op), then out[i] = f(x[i]) with f called on the
/// element type (a generic lambda, `[](auto v) { return std::exp(v); }`).
template <class F>
Tensor map_floating(const Tensor& x, const char* op, F f) {
  check_floating(x, op);
  return TAPEGRAD_DISPATCH_FLOAT(x.dtype(), op, [&] { return map_unary<scalar_t>(x, f); });
}

/// map_binary_same in x's dtype (float32/float64; y of the same shape and dtype): out[i] =
/// f(x[i], y[i]) with f called on the element type. `op` names the op in a dtype error.
template <class F>
Tensor map_floating_same(const Tensor& x, const Tensor& y, const char* op, F f) {
  return TAPEGRAD_DISPATCH_FLOAT(x.dtype(), op, [&] { return map_binary_same<scalar_t>(x, y, f); });
}

/// Walks `shape` in row-major order, calling f(k, off) for its k-th element, with off =
/// Σ_d idx[d]·strides[d] the element's offset in a strided source (strides in elements; 0 on
/// a broadcast dimension).
template <class F>
void for_each_strided(const Shape& shape, const std::vector<std::int64_t>& strides, F f) {
  const std::size_t r = shape.size();
  const std::int64_t n = numel_of(shape);
  std::vector<std::int64_t> idx(r, 0);
  std::int64_t off = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    f(k, off);
    for (std::size_t d = r; d-- > 0;) {  // advance the multi-index, last dimension fastest
      ++idx[d];
      off += strides[d];
      if (idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

/// out = f(a, b) with NumPy broadcasting; `op` names the op in shape errors.
template <class T, class F>
Tensor broadcast_binary(const Tensor& a, const Tensor& b, const char* op, F f) {
  if (a.shape() == b.shape()) return map_binary_same<T>(a, b, f);
  const Shape os = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(os, a.dtype());
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  const std::int64_t n = out.numel();
  if (b.numel() == 1 && a.shape() == os) {
    const T s = pb[0];
    for (std::int64_t i = 0; i < n; ++i) po[i] = f(pa[i], s);
    return out;
  }
  if (a.numel() == 1 && b.shape() == os) {
    const T s = pa[0];
    for (std::int64_t i = 0; i < n; ++i) po[i] = f(s, pb[i]);
    return out;
  }
  // General case: strides with 0 on broadcast dimensions, last dimension innermost.
  const std::size_t r = os.size();
  std::vector<std::int64_t> sa(r, 0), sb(r, 0);
  {
    const auto ca = contiguous_strides(a.shape());
    const auto cb = contiguous_strides(b.shape());
    for (std::size_t i = 0; i < a.shape().size(); ++i) {
      const std::size_t k = r - a.shape().size() + i;
      sa[k] = a.shape()[i] == 1 ? 0 : ca[i];
    }
    for (std::size_t i = 0; i < b.shape().size(); ++i) {
      const std::size_t k = r - b.shape().size() + i;
      sb[k] = b.shape()[i] == 1 ? 0 : cb[i];
    }
  }
  const std::int64_t inner = os.empty() ? 1 : os[r - 1];
  const std::int64_t ia = r ? sa[r - 1] : 0, ib = r ? sb[r - 1] : 0;
  const std::int64_t rows = inner == 0 ? 0 : n / inner;
  std::vector<std::int64_t> idx(r, 0);
  std::int64_t offa = 0, offb = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    T* o = po + row * inner;
    const T* xa = pa + offa;
    const T* xb = pb + offb;
    if (ia == 1 && ib == 1)
      for (std::int64_t j = 0; j < inner; ++j) o[j] = f(xa[j], xb[j]);
    else if (ia == 1 && ib == 0)
      for (std::int64_t j = 0; j < inner; ++j) o[j] = f(xa[j], xb[0]);
    else if (ia == 0 && ib == 1)
      for (std::int64_t j = 0; j < inner; ++j) o[j] = f(xa[0], xb[j]);
    else
      for (std::int64_t j = 0; j < inner; ++j) o[j] = f(xa[j * ia], xb[j * ib]);
    // advance the multi-index over all but the last dimension
    for (std::size_t d = r - 1; d-- > 0;) {
      ++idx[d];
      offa += sa[d];
      offb += sb[d];
      if (idx[d] < os[d]) break;
      offa -= sa[d] * os[d];
      offb -= sb[d] * os[d];
      idx[d] = 0;
    }
  }
  return out;
}

/// The input gradient of a piecewise-linear op (relu, clamp, abs, leaky_relu, ...) from its
/// first-order backward `backward(g)`: that, or, in a create_graph pass, g times the op's
/// constant local derivative backward(ones), recorded, so that it differentiates in g (and
/// is zero in the input, as the true second derivative away from the kinks).
template <class Backward>
Tensor piecewise_linear_grad(const Tensor& g, Backward backward) {
  if (!autograd::creating_graph()) return backward(g);
  return mul(g, backward(Tensor::ones(g.shape(), g.dtype())));
}

/// What the backward of a pointwise op reads: its input or its output.
enum class Saved { Input, Output };

/// Records the backward of a pointwise op out = f(x), when x needs a gradient, whose
/// derivative reads one saved tensor s (x, or out when `saved` is Saved::Output): dx[i] =
/// first(g[i], s[i]) on the element type, or, in a create_graph pass, graph(g, s) from
/// differentiable ops. `name` names the tape node (and the backward in a dtype error).
template <class First, class Graph>
void record_pointwise(const char* name, Tensor& out, const Tensor& x, Saved saved, First first, Graph graph) {
  if (!autograd::needs_grad({&x})) return;
  const bool output = saved == Saved::Output;
  autograd::record(name, out, {x}, [s = output ? out.detach() : x, output, name, first, graph](const Tensor& g,
                                                                                               GradSink& gs) {
    if (autograd::creating_graph()) return gs.add(0, graph(g, output ? gs.output(s) : s));
    gs.add(0, map_floating_same(g, s, name, first));
  }, (output ? autograd::kSavesOutput : autograd::kSavesInputs) | autograd::kSecondOrder);
}

}  // namespace tapegrad::kernels
