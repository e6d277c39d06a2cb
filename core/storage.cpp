#include <tapegrad/core/storage.h>

#include <cstdlib>
#include <atomic>
#include <mutex>
#include <thread>
#include <new>
#include <vector>

#include <tapegrad/core/object_pool.h>

namespace tapegrad {
namespace {

// Every block is recycled through a free list per size class: 64-byte multiples up to
// 1 KiB, then 8 classes per power of two (at most 12.5% slack). Steady-state training
// then neither calls the system allocator (whose aligned path is slow and fragments the
// heap for small blocks) nor page-faults on fresh large buffers.
// Under AddressSanitizer nothing is recycled (detail::kRecycleMemory), so use-after-free
// stays detectable.
constexpr std::size_t kCacheMaxBytes = std::size_t(4) << 30;
constexpr std::size_t kSmallMax = 1024;
constexpr std::size_t kClasses = 16 + 54 * 8;

struct SizeClass {
  std::size_t index;
  std::size_t bytes;
};

SizeClass size_class(std::size_t n) {
  if (n == 0) n = 1;
  if (n <= kSmallMax) {
    const std::size_t k = (n + 63) / 64;
    return {k - 1, k * 64};
  }
  const int e = 63 - __builtin_clzll(static_cast<unsigned long long>(n - 1));  // 2^e < n <= 2^(e+1)
  const std::size_t base = std::size_t(1) << e, step = base >> 3;
  const std::size_t k = (n - base + step - 1) / step;  // 1..8
  return {16 + static_cast<std::size_t>(e - 10) * 8 + (k - 1), base + k * step};
}

// The lock around the free lists: its critical sections are a few instructions (a size
// class's push or pop and the statistics), where a pthread mutex costs two atomic
// operations and two library calls. A waiting thread yields its core.
class SpinLock {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire))
      while (locked_.load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

struct Cache {
  SpinLock mu;
  std::vector<void*> free_blocks[kClasses];
  AllocatorStats stats;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: storages may outlive static teardown
  return *c;
}

}  // namespace

Storage::Storage(std::size_t nbytes) : ptr_(nullptr), nbytes_(nbytes) {
  // No machine maps more than 2^47 bytes for a process (x86-64 and AArch64 user space):
  // refuse such a request as the allocator would, without asking it (a sanitizer's
  // allocator aborts instead of failing on absurd sizes).
  if (nbytes > (std::size_t(1) << 47)) throw std::bad_alloc();
  const SizeClass cls = size_class(nbytes);
  Cache& c = cache();
  {
    std::lock_guard<SpinLock> lock(c.mu);
    c.stats.bytes_in_use += cls.bytes;
    if (c.stats.bytes_in_use > c.stats.peak_bytes_in_use) c.stats.peak_bytes_in_use = c.stats.bytes_in_use;
    auto& list = c.free_blocks[cls.index];
    if (!list.empty()) {
      ptr_ = list.back();
      list.pop_back();
      c.stats.bytes_cached -= cls.bytes;
      return;
    }
    ++c.stats.system_allocations;
  }
  ptr_ = std::aligned_alloc(64, cls.bytes);
  if (!ptr_) {
    allocator_release_cached();
    ptr_ = std::aligned_alloc(64, cls.bytes);
    if (!ptr_) {
      std::lock_guard<SpinLock> lock(c.mu);
      c.stats.bytes_in_use -= cls.bytes;
      throw std::bad_alloc();
    }
  }
}

Storage::~Storage() {
  const SizeClass cls = size_class(nbytes_);
  Cache& c = cache();
  {
    std::lock_guard<SpinLock> lock(c.mu);
    c.stats.bytes_in_use -= cls.bytes;
    if (detail::kRecycleMemory && c.stats.bytes_cached + cls.bytes <= kCacheMaxBytes) {
      try {
        c.free_blocks[cls.index].push_back(ptr_);
        c.stats.bytes_cached += cls.bytes;
        return;
      } catch (const std::bad_alloc&) {  // no room to remember the block: free it
      }
    }
  }
  std::free(ptr_);
}

AllocatorStats allocator_stats() {
  Cache& c = cache();
  std::lock_guard<SpinLock> lock(c.mu);
  return c.stats;
}

void allocator_release_cached() {
  Cache& c = cache();
  std::lock_guard<SpinLock> lock(c.mu);
  for (auto& list : c.free_blocks) {
    for (void* p : list) std::free(p);
    list.clear();
  }
  c.stats.bytes_cached = 0;
}

}  // namespace tapegrad
