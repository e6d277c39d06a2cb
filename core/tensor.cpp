#include <tapegrad/core/tensor.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/object_pool.h>

namespace tapegrad {
namespace {

std::shared_ptr<TensorImpl> new_impl(Shape shape, Dtype dtype) {
  const std::size_t bytes = nbytes_of(shape, dtype_size(dtype));  // throws on a negative size or overflow
  auto impl = std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>());
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  impl->storage = std::allocate_shared<Storage>(PoolAllocator<Storage>(), bytes);
  return impl;
}

template <class F>
void for_dtype(Dtype d, F&& f) {
  switch (d) {
    case Dtype::Float32: f(float{}); break;
    case Dtype::Float64: f(double{}); break;
    case Dtype::Int64: f(std::int64_t{}); break;
  }
}

// t[i] = f(t[i], v) in place for every element, v = value in t's element type.
template <class F>
void update_with_scalar(const Tensor& t, double value, F f) {
  for_dtype(t.dtype(), [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(t.raw_data());
    const T v = static_cast<T>(value);
    const std::int64_t n = t.numel();
    for (std::int64_t i = 0; i < n; ++i) p[i] = f(p[i], v);
  });
}

void require_defined(const Tensor& t, const char* what) {
  if (!t.defined()) throw std::logic_error(std::string(what) + ": the tensor is undefined");
}

// In-place updates are for buffers, optimizer steps and no-grad code. Writing into a
// tensor that the tape may still read would silently corrupt the backward.
// Every in-place write bumps the storage's version counter, so a backward that would read
// the overwritten values throws instead.
void check_inplace_allowed(const Tensor& t, const char* op) {
  require_defined(t, op);
  if (t.requires_grad() && grad_mode_enabled())
    throw std::logic_error(std::string(op) +
                           ": in-place update of a tensor that requires grad while grad mode is on; "
                           "wrap it in NoGradGuard");
  t.impl()->storage->bump_version();
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, Dtype dtype) { return Tensor(new_impl(Shape(shape), dtype)); }
Tensor Tensor::empty(Shape&& shape, Dtype dtype) { return Tensor(new_impl(std::move(shape), dtype)); }

Tensor Tensor::zeros(const Shape& shape, Dtype dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::ones(const Shape& shape, Dtype dtype) { return full(shape, 1.0, dtype); }

Tensor Tensor::full(const Shape& shape, double value, Dtype dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, Dtype dtype) {
  if (static_cast<std::int64_t>(values.size()) != numel_of(shape))
    throw std::invalid_argument("from_vector: " + std::to_string(values.size()) + " values for shape " +
                                shape_str(shape) + " (expected " + std::to_string(numel_of(shape)) + ")");
  Tensor t = empty(shape, dtype);
  for_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(t.raw_data());
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  return t;
}

Tensor Tensor::from_int64(const std::vector<std::int64_t>& values, const Shape& shape) {
  if (static_cast<std::int64_t>(values.size()) != numel_of(shape))
    throw std::invalid_argument("from_vector: " + std::to_string(values.size()) + " values for shape " +
                                shape_str(shape));
  Tensor t = empty(shape, Dtype::Int64);
  if (!values.empty())  // an empty vector's data() may be null, which memcpy must not see
    std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(std::int64_t));
  return t;
}

Tensor Tensor::scalar(double value, Dtype dtype) { return full({}, value, dtype); }

void Tensor::throw_undefined(const char* what) { throw std::logic_error(std::string(what) + ": the tensor is undefined"); }

std::int64_t Tensor::size(std::int64_t d) const { return shape()[wrap_axis(d, dim())]; }
std::int64_t Tensor::numel() const { return numel_of(shape()); }
void Tensor::throw_dtype_mismatch(Dtype want) const {
  throw std::invalid_argument(std::string("data<T>(): tensor has dtype ") + dtype_name(dtype()) + ", requested " +
                              dtype_name(want));
}

double Tensor::at(std::int64_t i) const {
  if (i < 0 || i >= numel())
    throw std::out_of_range("at: index " + std::to_string(i) + " out of range for " + std::to_string(numel()) +
                            " elements");
  double v = 0;
  for_dtype(dtype(), [&](auto z) {
    using T = decltype(z);
    v = static_cast<double>(static_cast<const T*>(raw_data())[i]);
  });
  return v;
}

double Tensor::item() const {
  if (numel() != 1)
    throw std::invalid_argument("item(): expected a tensor with one element, got shape " + shape_str(shape()));
  return at(0);
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> r(static_cast<std::size_t>(numel()));
  for_dtype(dtype(), [&](auto z) {
    using T = decltype(z);
    const T* p = static_cast<const T*>(raw_data());
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<double>(p[i]);
  });
  return r;
}

std::string Tensor::to_string() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype()) << ", data=[";
  const std::int64_t n = numel();
  for (std::int64_t i = 0; i < n && i < 16; ++i) os << (i ? ", " : "") << at(i);
  if (n > 16) os << ", ...";
  os << "])";
  return os.str();
}

bool Tensor::shares_storage_with(const Tensor& o) const {
  return defined() && o.defined() && impl_->storage == o.impl_->storage;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape(), dtype());
  std::memcpy(t.raw_data(), raw_data(), nbytes());
  return t;
}

Tensor Tensor::detach() const {
  require_defined(*this, "detach");
  auto impl = std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>(), *impl_);
  impl->autograd.reset();
  return Tensor(std::move(impl));
}

namespace {
Tensor convert(const Tensor& src, Dtype dtype) {
  Tensor out = Tensor::empty(src.shape(), dtype);
  for_dtype(src.dtype(), [&](auto zs) {
    using S = decltype(zs);
    for_dtype(dtype, [&](auto zd) {
      using D = decltype(zd);
      const S* s = static_cast<const S*>(src.raw_data());
      D* d = static_cast<D*>(out.raw_data());
      const std::int64_t n = src.numel();
      for (std::int64_t i = 0; i < n; ++i) d[i] = static_cast<D>(s[i]);
    });
  });
  return out;
}
}  // namespace

Tensor Tensor::to(Dtype d) const {
  if (d == dtype()) return *this;
  Tensor out = convert(*this, d);
  if (is_floating(d) && autograd::needs_grad({this})) {
    const Dtype from = dtype();
    autograd::record("to", out, {*this},
                     [from](const Tensor& g, GradSink& gs) {
                       gs.add(0, autograd::creating_graph() ? g.to(from) : convert(g, from));
                     }, autograd::kSavesNothing | autograd::kSecondOrder);
  }
  return out;
}

Tensor& Tensor::fill_(double value) {
  check_inplace_allowed(*this, "fill_");
  update_with_scalar(*this, value, [](auto, auto v) { return v; });
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace_allowed(*this, "copy_");
  require_defined(src, "copy_");
  if (src.shape() != shape())
    throw std::invalid_argument("copy_: source shape " + shape_str(src.shape()) + " does not match destination shape " +
                                shape_str(shape()));
  if (src.dtype() == dtype()) {
    std::memmove(raw_data(), src.raw_data(), nbytes());
  } else {
    Tensor c = convert(src, dtype());
    std::memcpy(raw_data(), c.raw_data(), nbytes());
  }
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_inplace_allowed(*this, "add_");
  if (other.shape() != shape() || other.dtype() != dtype())
    throw std::invalid_argument("add_: expected " + shape_str(shape()) + " " + dtype_name(dtype()) + ", got " +
                                shape_str(other.shape()) + " " + dtype_name(other.dtype()));
  for_dtype(dtype(), [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(raw_data());
    const T* q = static_cast<const T*>(other.raw_data());
    const T a = static_cast<T>(alpha);
    const std::int64_t n = numel();
    if (alpha == 1.0)
      for (std::int64_t i = 0; i < n; ++i) p[i] += q[i];
    else
      for (std::int64_t i = 0; i < n; ++i) p[i] += a * q[i];
  });
  return *this;
}

Tensor& Tensor::mul_(double value) {
  check_inplace_allowed(*this, "mul_");
  update_with_scalar(*this, value, [](auto x, auto v) { return x * v; });
  return *this;
}

void Tensor::set_data(const Tensor& src) {
  require_defined(*this, "set_data");
  require_defined(src, "set_data");
  if (requires_grad() && !is_floating(src.dtype()))
    throw std::invalid_argument("set_data: a tensor that requires grad cannot take int64 data");
  impl_->storage = src.impl()->storage;
  impl_->offset = src.impl()->offset;
  impl_->shape = src.impl()->shape;
  impl_->dtype = src.impl()->dtype;
  if (impl_->autograd) impl_->autograd->grad = Tensor();
}

Tensor& Tensor::requires_grad_(bool enable) {
  require_defined(*this, "requires_grad_");
  if (!enable) {
    if (impl_->autograd && impl_->autograd->grad_fn)
      throw std::logic_error("requires_grad_(false): only leaf tensors can stop requiring grad; use detach()");
    impl_->autograd.reset();
    return *this;
  }
  if (!is_floating(dtype()))
    throw std::invalid_argument(std::string("requires_grad_: only float tensors can require gradients, got ") +
                                dtype_name(dtype()));
  if (!impl_->autograd) impl_->autograd = std::make_shared<AutogradMeta>();
  return *this;
}

bool Tensor::requires_grad() const { return defined() && impl_->autograd && impl_->autograd->requires_grad; }
bool Tensor::is_leaf() const { return !impl_ || !impl_->autograd || !impl_->autograd->grad_fn; }

Tensor Tensor::grad() const {
  require_defined(*this, "grad");
  return impl_->autograd ? impl_->autograd->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  require_defined(*this, "set_grad");
  if (!impl_->autograd)
    throw std::logic_error("set_grad: the tensor does not require grad");
  if (g.defined() && (g.shape() != shape() || g.dtype() != dtype()))
    throw std::invalid_argument("set_grad: expected gradient " + shape_str(shape()) + " " + dtype_name(dtype()) +
                                ", got " + shape_str(g.shape()) + " " + dtype_name(g.dtype()));
  impl_->autograd->grad = g;
}

void Tensor::zero_grad(bool set_to_none) const {
  if (!impl_ || !impl_->autograd) return;
  Tensor& g = impl_->autograd->grad;
  if (set_to_none || !g.defined()) {
    g = Tensor();
  } else if (g.requires_grad()) {  // a gradient with a graph (create_graph): dropped with it, as PyTorch
    g = Tensor::zeros(g.shape(), g.dtype());
  } else {
    NoGradGuard ng;
    g.zero_();
  }
}

std::string Tensor::grad_fn_name() const {
  if (!impl_ || !impl_->autograd || !impl_->autograd->grad_fn) return "";
  return impl_->autograd->grad_fn->name;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::run_backward(*this, gradient, retain_graph || create_graph, create_graph);
}

Tensor alias_with_shape(const Tensor& t, const Shape& shape, std::size_t extra_offset_bytes) {
  nbytes_of(shape, dtype_size(t.dtype()));  // throws on a negative size or an overflowing product
  auto impl = std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>());
  impl->storage = t.impl()->storage;
  impl->offset = t.impl()->offset + extra_offset_bytes;
  impl->shape = shape;
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

}  // namespace tapegrad
