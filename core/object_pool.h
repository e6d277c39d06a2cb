#pragma once
// Per-thread free lists for the small objects every op creates (tensor handles' shared
// state, storages, tape nodes), used through std::allocate_shared with PoolAllocator.
// A freed block goes to the freeing thread's list for its size class (16-byte steps up to
// 1 KiB) and the next allocation of that size on that thread takes it back: no lock and no
// call into the system allocator in a steady-state training loop. Each list keeps at most
// 64 KiB; a thread's lists are returned to the system when it exits. Under AddressSanitizer
// nothing is pooled, so use-after-free stays detectable.
#include <cstddef>
#include <new>

namespace tapegrad {
namespace detail {
/// Whether freed memory is kept for reuse (this pool, and the Storage cache of
/// core/storage.cpp): false under AddressSanitizer, so that a use after free stays detectable.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kRecycleMemory = false;
#else
inline constexpr bool kRecycleMemory = true;
#endif
/// `bytes` of memory aligned for any object of at most 16-byte alignment.
void* pool_allocate(std::size_t bytes);
/// Returns a block from pool_allocate(bytes) (same `bytes`).
void pool_deallocate(void* p, std::size_t bytes) noexcept;
}  // namespace detail

/// Standard allocator over detail::pool_allocate, for std::allocate_shared.
template <class T>
struct PoolAllocator {
  static_assert(alignof(T) <= 16, "PoolAllocator: blocks are 16-byte aligned");
  /// The allocated type.
  using value_type = T;
  PoolAllocator() noexcept = default;
  /// Rebinding copy (the allocator is stateless).
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}
  /// Memory for n objects of T (not constructed).
  T* allocate(std::size_t n) { return static_cast<T*>(detail::pool_allocate(n * sizeof(T))); }
  /// Returns memory from allocate(n) (same n).
  void deallocate(T* p, std::size_t n) noexcept { detail::pool_deallocate(p, n * sizeof(T)); }
  /// Always true: every PoolAllocator can free the others' blocks.
  template <class U>
  bool operator==(const PoolAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace tapegrad
