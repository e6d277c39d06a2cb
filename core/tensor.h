#pragma once
// Tensor: a dense, row-major, contiguous n-d array of float32, float64 or int64 with
// optional reverse-mode gradient tracking. A Tensor is a cheap handle: copies share
// the same data and autograd identity (like torch::Tensor). Views made by reshape,
// flatten, squeeze, unsqueeze and narrow along dim 0 share storage; everything else
// allocates.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <tapegrad/core/dtype.h>
#include <tapegrad/core/shape.h>
#include <tapegrad/core/storage.h>

namespace tapegrad {

struct AutogradMeta;
class Tensor;

/// Shared state of one tensor handle family.
struct TensorImpl {
  /// The bytes (shared by views and copies of the handle).
  std::shared_ptr<Storage> storage;
  std::size_t offset = 0;  ///< in bytes from storage->data()
  /// Sizes per dimension, row-major and contiguous.
  Shape shape;
  /// Element type of the data.
  Dtype dtype = Dtype::Float32;
  std::shared_ptr<AutogradMeta> autograd;  ///< null unless it requires grad
  TensorImpl() = default;
  /// Copies the fields (the storage and autograd state are shared, not copied).
  TensorImpl(const TensorImpl&) = default;
  /// Assigns the fields (shared storage and autograd state).
  TensorImpl& operator=(const TensorImpl&) = default;
  /// Drops `autograd` through release_autograd (iterative teardown of deep graphs).
  ~TensorImpl();
};

/// Resets `meta`; when it was the last handle on an op's node, the node is destroyed by
/// an iterative loop instead of a chain of nested destructors (defined in autograd.cpp).
void release_autograd(std::shared_ptr<AutogradMeta>& meta) noexcept;

/// A dense, row-major, contiguous n-d array of float32, float64 or int64 with optional
/// reverse-mode gradient tracking (torch::Tensor's role). A cheap handle: copies share the
/// data and autograd identity. Views made by reshape, flatten, squeeze, unsqueeze and narrow
/// along dim 0 share storage; every other op allocates. A default-constructed Tensor is
/// undefined: metadata and data accessors throw std::logic_error on it.
class Tensor {
 public:
  Tensor() = default;
  /// A handle on existing state (for ops and views that build a TensorImpl).
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- construction -------------------------------------------------------------
  // Every factory defaults to Float32 (PyTorch's default dtype); pass Dtype::Float64 for
  // double precision (gradchecks, float64 references).
  /// Uninitialised tensor of `shape`.
  static Tensor empty(const Shape& shape, Dtype dtype = Dtype::Float32);
  /// The same, taking the shape over (no copy of a temporary's sizes).
  static Tensor empty(Shape&& shape, Dtype dtype = Dtype::Float32);
  /// Tensor of `shape` filled with 0.
  static Tensor zeros(const Shape& shape, Dtype dtype = Dtype::Float32);
  /// Tensor of `shape` filled with 1.
  static Tensor ones(const Shape& shape, Dtype dtype = Dtype::Float32);
  /// Tensor of `shape` filled with `value` (converted to `dtype`).
  static Tensor full(const Shape& shape, double value, Dtype dtype = Dtype::Float32);
  /// Copies `values` (row-major) into a new tensor; throws std::invalid_argument when
  /// values.size() != numel(shape).
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                            Dtype dtype = Dtype::Float32);
  /// Int64 tensor from `values` (class indices, counters).
  static Tensor from_int64(const std::vector<std::int64_t>& values, const Shape& shape);
  /// Scalar (shape {}).
  static Tensor scalar(double value, Dtype dtype = Dtype::Float32);

  // ---- metadata -----------------------------------------------------------------
  /// false for a default-constructed (undefined) tensor.
  bool defined() const { return impl_ != nullptr; }
  /// Sizes per dimension ({} for a scalar). Throws std::logic_error when undefined.
  const Shape& shape() const {
    if (!impl_) [[unlikely]]
      throw_undefined("shape");
    return impl_->shape;
  }
  /// Number of dimensions (0 for a scalar).
  std::int64_t dim() const { return static_cast<std::int64_t>(shape().size()); }
  /// Size of dimension d (negative counts from the end).
  std::int64_t size(std::int64_t d) const;
  /// Number of elements (product of the shape; 1 for a scalar).
  std::int64_t numel() const;
  /// Element type. Throws std::logic_error when undefined.
  Dtype dtype() const {
    if (!impl_) [[unlikely]]
      throw_undefined("dtype");
    return impl_->dtype;
  }
  /// Size of the data in bytes: numel() · dtype_size(dtype()).
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype()); }

  // ---- data access ----------------------------------------------------------------
  /// Typed pointer to the first element; throws std::invalid_argument on a dtype
  /// mismatch (names both dtypes).
  template <class T> T* data() const {
    check_dtype(dtype_of<std::remove_const_t<T>>::value);
    return static_cast<T*>(raw_data());
  }
  /// Untyped pointer to the first element. Throws std::logic_error when undefined.
  void* raw_data() const {
    if (!impl_) [[unlikely]]
      throw_undefined("data");
    return static_cast<char*>(impl_->storage->data()) + impl_->offset;
  }
  /// The single value of a one-element tensor, as double; throws otherwise.
  double item() const;
  /// Element at a flat row-major index, as double (slow; for tests and printing).
  double at(std::int64_t flat_index) const;
  /// All values as doubles (row-major).
  std::vector<double> to_vector() const;
  /// "Tensor(shape=[2, 3], dtype=float32, data=[...])": the first 16 values, then "...";
  /// "Tensor(undefined)" for an undefined tensor.
  std::string to_string() const;
  /// True when both tensors share storage (views or copies of one handle).
  bool shares_storage_with(const Tensor& other) const;

  // ---- copies and conversions --------------------------------------------------
  /// New storage, same values; not connected to the graph (like torch.clone().detach()).
  Tensor clone() const;
  /// Converts to `dtype` (records a node when differentiable); same tensor if equal.
  Tensor to(Dtype dtype) const;
  /// Same storage, no gradient history, requires_grad false.
  Tensor detach() const;

  // ---- in-place updates (never recorded; throw if autograd would need them) ------
  // Each one increments the storage's version counter, so a backward that saved this
  // tensor (or a view of its storage) throws instead of reading the new values.
  /// Sets every element to `value` (converted to the dtype). Throws std::logic_error on a
  /// tensor that requires grad while grad mode is on (wrap it in NoGradGuard).
  Tensor& fill_(double value);
  /// fill_(0).
  Tensor& zero_() { return fill_(0.0); }
  /// this = src (same shape; dtype converted).
  Tensor& copy_(const Tensor& src);
  /// this += alpha * other (same shape, same dtype).
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  /// this *= value.
  Tensor& mul_(double value);
  /// Replaces this tensor's data, shape and dtype with `src`'s (shared, not copied) for
  /// every handle of this tensor, keeping its autograd identity and dropping its grad.
  /// Used by Module::to(dtype). Never recorded.
  void set_data(const Tensor& src);

  // ---- autograd --------------------------------------------------------------------
  /// Marks a leaf tensor as requiring gradients; throws for int64 or non-leaf tensors.
  Tensor& requires_grad_(bool enable = true);
  /// Whether ops on this tensor are recorded for backward (false when undefined).
  bool requires_grad() const;
  /// A leaf is a tensor not produced by a recorded op.
  bool is_leaf() const;
  /// Accumulated gradient of a leaf (undefined until a backward reaches it).
  Tensor grad() const;
  /// Replaces the accumulated gradient by `g` (undefined clears it). Throws
  /// std::logic_error when the tensor does not require grad, std::invalid_argument when g's
  /// shape or dtype differs from the tensor's.
  void set_grad(const Tensor& g) const;
  /// Clears the gradient (set_to_none) or fills it with zeros.
  void zero_grad(bool set_to_none = true) const;
  /// Name of the op that produced this tensor ("" for leaves).
  std::string grad_fn_name() const;
  /// Reverse-mode backward from this tensor. `gradient` defaults to 1 for a one-element
  /// tensor; a non-scalar without `gradient` throws. The graph is freed afterwards
  /// unless retain_graph; a second backward through a freed graph throws. With create_graph
  /// the backward is recorded (the graph is then kept, as PyTorch's default retain_graph =
  /// create_graph): each leaf's accumulated `.grad` carries a graph and can be
  /// differentiated again. That `.grad` holds its graph until it is reset (zero_grad()).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false, bool create_graph = false) const;

  /// The shared state behind the handle (null when undefined); for ops and views.
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

 private:
  void check_dtype(Dtype want) const {
    if (dtype() != want) [[unlikely]]
      throw_dtype_mismatch(want);
  }
  // The accessors' errors, out of line: std::logic_error "<what>: the tensor is undefined",
  // and data<T>()'s std::invalid_argument naming both dtypes.
  [[noreturn]] static void throw_undefined(const char* what);
  [[noreturn]] void throw_dtype_mismatch(Dtype want) const;
  std::shared_ptr<TensorImpl> impl_;
};

/// Shares the storage of `t` under a new shape (same numel); used by reshape views.
Tensor alias_with_shape(const Tensor& t, const Shape& shape, std::size_t extra_offset_bytes = 0);

}  // namespace tapegrad
