#pragma once
// A tensor's values kept alive for a backward closure, without a Tensor handle.
#include <cstddef>
#include <memory>

#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// The storage of a tensor and the byte offset of its first element: what a tape node's
/// backward needs to read a saved input. Cheaper than a detach()ed Tensor, which copies the
/// shape (an allocation); the closure knows the shape already (the output gradient has it).
/// Holds the storage itself, so a later set_data() on the tensor does not change what was
/// saved. An undefined tensor gives data() == nullptr.
class SavedData {
 public:
  SavedData() = default;
  /// Keeps t's storage and offset (nothing for an undefined tensor).
  explicit SavedData(const Tensor& t) {
    if (t.defined()) {
      storage_ = t.impl()->storage;
      offset_ = t.impl()->offset;
    }
  }
  /// The first element, or null for an undefined tensor.
  template <class T>
  const T* data() const {
    return storage_ ? reinterpret_cast<const T*>(static_cast<const char*>(storage_->data()) + offset_) : nullptr;
  }

 private:
  std::shared_ptr<Storage> storage_;
  std::size_t offset_ = 0;
};

}  // namespace tapegrad
