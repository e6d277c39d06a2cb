#pragma once
// Raw, 64-byte aligned memory behind tensors, recycled through a size-class cache
// so steady-state training loops neither call the system allocator nor page-fault on
// fresh large buffers.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace tapegrad {

/// A block of bytes owned by one or more tensors (views share it).
class Storage {
 public:
  /// Uninitialised `nbytes` bytes (from the block cache when one fits).
  explicit Storage(std::size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  /// The first byte.
  void* data() const { return ptr_; }
  /// Size in bytes.
  std::size_t nbytes() const { return nbytes_; }
  /// Version counter: every in-place write to any tensor on this storage (views and
  /// detached handles included) increments it; autograd compares it at backward time
  /// with the value it had when an op recorded the tensor (PyTorch's version counter).
  std::uint64_t version() const { return version_; }
  /// Increments version(): call after writing in place.
  void bump_version() { ++version_; }

 private:
  void* ptr_;
  std::size_t nbytes_;
  std::uint64_t version_ = 0;
};

/// Statistics of the block cache (for tests and benchmarks).
struct AllocatorStats {
  std::size_t bytes_in_use = 0;     ///< bytes held by live Storage objects
  std::size_t bytes_cached = 0;     ///< bytes kept for reuse
  std::size_t peak_bytes_in_use = 0;  ///< highest bytes_in_use so far
  std::size_t system_allocations = 0;  ///< calls that reached the system allocator
};
/// The block cache's current statistics.
AllocatorStats allocator_stats();
/// Returns every cached block to the system.
void allocator_release_cached();

}  // namespace tapegrad
