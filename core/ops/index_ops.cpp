// Joining and selecting: each forward is followed by its backward closure.
#include <tapegrad/core/ops/index_ops.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/core/ops/reduce.h>
#include <tapegrad/core/ops/view_ops.h>

namespace tapegrad {
namespace {

// ---- cat ------------------------------------------------------------------------------

// Copies rows of `inner`·R_i elements from each part into out, part after part, for every
// outer index (or back, when `split` is true: from out into the parts).
void copy_blocks(char* whole, const std::vector<char*>& parts, const std::vector<std::int64_t>& R, std::int64_t outer,
                 std::int64_t inner, std::size_t es, bool split) {
  std::int64_t total = 0;
  for (auto r : R) total += r;
  for (std::int64_t o = 0; o < outer; ++o) {
    std::int64_t off = 0;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const std::size_t n = static_cast<std::size_t>(R[i] * inner) * es;
      char* w = whole + static_cast<std::size_t>((o * total + off) * inner) * es;
      char* p = parts[i] + static_cast<std::size_t>(o * R[i] * inner) * es;
      if (n) split ? std::memcpy(p, w, n) : std::memcpy(w, p, n);
      off += R[i];
    }
  }
}

// ---- masks -----------------------------------------------------------------------------

// mask[k] = (m != 0) for m broadcast to `shape` (already checked to be broadcastable).
std::shared_ptr<std::vector<std::uint8_t>> expand_mask(const Tensor& m, const Shape& shape) {
  const std::size_t r = shape.size();
  std::vector<std::int64_t> st(r, 0);
  const auto cs = contiguous_strides(m.shape());
  for (std::size_t i = 0; i < m.shape().size(); ++i)
    st[r - m.shape().size() + i] = m.shape()[i] == 1 ? 0 : cs[i];
  auto out = std::make_shared<std::vector<std::uint8_t>>(static_cast<std::size_t>(numel_of(shape)));
  auto fill = [&](auto* p) {
    kernels::for_each_strided(shape, st, [&](std::int64_t k, std::int64_t off) {
      (*out)[static_cast<std::size_t>(k)] = p[off] != 0;
    });
  };
  switch (m.dtype()) {
    case Dtype::Float32: fill(m.data<float>()); break;
    case Dtype::Float64: fill(m.data<double>()); break;
    case Dtype::Int64: fill(m.data<std::int64_t>()); break;
  }
  return out;
}

// out[k] = mask[k] == keep_when ? g[k] : 0, summed down to `shape`. In a create_graph
// backward: g times that constant 0/1 mask, recorded.
Tensor masked_values(const Tensor& g, const std::vector<std::uint8_t>& mask, bool keep_when);
Tensor masked_grad(const Tensor& g, const std::vector<std::uint8_t>& mask, bool keep_when, const Shape& shape) {
  if (autograd::creating_graph())
    return sum_to(mul(g, masked_values(Tensor::ones(g.shape(), g.dtype()), mask, keep_when)), shape);
  return sum_to(masked_values(g, mask, keep_when), shape);
}

Tensor masked_values(const Tensor& g, const std::vector<std::uint8_t>& mask, bool keep_when) {
  return TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "where_backward", [&] {
    Tensor o = Tensor::empty(g.shape(), g.dtype());
    const scalar_t* pg = g.data<scalar_t>();
    scalar_t* po = o.data<scalar_t>();
    for (std::int64_t k = 0, n = g.numel(); k < n; ++k) po[k] = (mask[k] != 0) == keep_when ? pg[k] : scalar_t(0);
    return o;
  });
}

}  // namespace

Tensor cat(const std::vector<Tensor>& ts, std::int64_t dim) {
  if (ts.empty()) throw std::invalid_argument("cat: expected a non-empty list of tensors");
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (!ts[i].defined()) throw std::invalid_argument("cat: tensor " + std::to_string(i) + " is undefined");
  const Tensor& t0 = ts[0];
  if (t0.dim() == 0) throw std::invalid_argument("cat: zero-dimensional tensor 0 cannot be concatenated");
  std::int64_t d;
  try {
    d = wrap_axis(dim, t0.dim());
  } catch (const std::out_of_range& e) {
    throw std::out_of_range(std::string("cat: ") + e.what() + ", tensor 0 has shape " + shape_str(t0.shape()));
  }
  std::vector<std::int64_t> R;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (t.dtype() != t0.dtype())
      throw std::invalid_argument("cat: tensor " + std::to_string(i) + " has dtype " + dtype_name(t.dtype()) +
                                  " but tensor 0 has " + dtype_name(t0.dtype()));
    bool ok = t.dim() == t0.dim();
    for (std::int64_t k = 0; ok && k < t0.dim(); ++k) ok = k == d || t.shape()[k] == t0.shape()[k];
    if (!ok)
      throw std::invalid_argument("cat: tensor " + std::to_string(i) + " has shape " + shape_str(t.shape()) +
                                  " but tensor 0 has shape " + shape_str(t0.shape()) +
                                  "; sizes must match except in dimension " + std::to_string(d));
    R.push_back(t.shape()[d]);
    if (__builtin_add_overflow(total, t.shape()[d], &total))
      throw std::invalid_argument("cat: the sizes along dimension " + std::to_string(d) +
                                  " add up to more than a 64-bit count holds (size overflow); tensor " +
                                  std::to_string(i) + " has shape " + shape_str(t.shape()));
  }
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t k = 0; k < d; ++k) outer *= t0.shape()[k];
  for (std::int64_t k = d + 1; k < t0.dim(); ++k) inner *= t0.shape()[k];
  Shape os = t0.shape();
  os[d] = total;
  Tensor out = Tensor::empty(os, t0.dtype());
  {
    std::vector<char*> parts;
    for (auto& t : ts) parts.push_back(static_cast<char*>(t.raw_data()));
    copy_blocks(static_cast<char*>(out.raw_data()), parts, R, outer, inner, dtype_size(t0.dtype()), false);
  }
  if (autograd::needs_grad(ts))
    // each input's gradient is its block of g along dim
    autograd::record("cat", out, ts, [R, d](const Tensor& g, GradSink& gs) {
      std::int64_t off = 0;
      for (std::size_t i = 0; i < R.size(); ++i) {
        if (gs.needs(i)) gs.add(i, narrow(g, d, off, R[i]));
        off += R[i];
      }
    }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

Tensor stack(const std::vector<Tensor>& ts, std::int64_t dim) {
  if (ts.empty()) throw std::invalid_argument("stack: expected a non-empty list of tensors");
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (!ts[i].defined()) throw std::invalid_argument("stack: tensor " + std::to_string(i) + " is undefined");
    if (ts[i].shape() != ts[0].shape())
      throw std::invalid_argument("stack: tensor " + std::to_string(i) + " has shape " + shape_str(ts[i].shape()) +
                                  " but tensor 0 has shape " + shape_str(ts[0].shape()) +
                                  "; stack needs equal shapes");
  }
  std::int64_t d;
  try {
    d = wrap_axis(dim, ts[0].dim() + 1);
  } catch (const std::out_of_range& e) {
    throw std::out_of_range(std::string("stack: ") + e.what() + ", tensor shape " + shape_str(ts[0].shape()));
  }
  std::vector<Tensor> us;
  us.reserve(ts.size());
  for (auto& t : ts) us.push_back(unsqueeze(t, d));
  return cat(us, d);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (!cond.defined()) throw std::invalid_argument("where: the condition is undefined");
  kernels::check_floating_pair(a, b, "where");
  Shape os;
  try {
    os = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("where: condition " + shape_str(cond.shape()) + ", a " + shape_str(a.shape()) +
                                " and b " + shape_str(b.shape()) + " are not broadcastable");
  }
  auto mask = expand_mask(cond, os);
  const Tensor ae = broadcast_to(a.detach(), os), be = broadcast_to(b.detach(), os);
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(a.dtype(), "where", [&] {
    Tensor o = Tensor::empty(os, a.dtype());
    const scalar_t *pa = ae.data<scalar_t>(), *pb = be.data<scalar_t>();
    scalar_t* po = o.data<scalar_t>();
    const std::uint8_t* m = mask->data();
    for (std::int64_t k = 0, n = o.numel(); k < n; ++k) po[k] = m[k] ? pa[k] : pb[k];
    return o;
  });
  if (autograd::needs_grad({&a, &b}))
    // d/da = g where cond, d/db = g where not cond; each summed over its broadcast dims
    autograd::record("where", out, {a, b}, [mask, sa = a.shape(), sb = b.shape()](const Tensor& g, GradSink& gs) {
      if (gs.needs(0)) gs.add(0, masked_grad(g, *mask, true, sa));
      if (gs.needs(1)) gs.add(1, masked_grad(g, *mask, false, sb));
    }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  kernels::check_floating(x, "masked_fill");
  if (!mask.defined()) throw std::invalid_argument("masked_fill: the mask is undefined");
  if (broadcast_shapes(mask.shape(), x.shape(), "masked_fill") != x.shape())
    throw std::invalid_argument("masked_fill: mask of shape " + shape_str(mask.shape()) +
                                " does not broadcast to the input's shape " + shape_str(x.shape()));
  auto m = expand_mask(mask, x.shape());
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "masked_fill", [&] {
    Tensor o = Tensor::empty(x.shape(), x.dtype());
    const scalar_t* px = x.data<scalar_t>();
    const scalar_t v = static_cast<scalar_t>(value);
    scalar_t* po = o.data<scalar_t>();
    for (std::int64_t k = 0, n = o.numel(); k < n; ++k) po[k] = (*m)[k] ? v : px[k];
    return o;
  });
  if (autograd::needs_grad({&x}))
    // d/dx = g where the mask is false
    autograd::record("masked_fill", out, {x}, [m, xs = x.shape()](const Tensor& g, GradSink& gs) {
      gs.add(0, masked_grad(g, *m, false, xs));
    }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

}  // namespace tapegrad
