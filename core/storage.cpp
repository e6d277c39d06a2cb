#include "core/storage.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

namespace tapegrad {
namespace {

// Blocks of at least this size are recycled; smaller ones go straight to malloc,
// which already serves them from its own free lists without page faults.
// Under AddressSanitizer nothing is recycled, so use-after-free stays detectable.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kCacheMin = ~std::size_t(0) / 4;
#else
constexpr std::size_t kCacheMin = 64 * 1024;
#endif
constexpr std::size_t kCacheMaxBytes = std::size_t(4) << 30;

// Rounds up to one of 8 size classes per power of two (at most 12.5% slack).
std::size_t size_class(std::size_t n) {
  if (n < kCacheMin) return (n + 63) & ~std::size_t(63);
  std::size_t p = 1;
  while ((p << 1) <= n) p <<= 1;
  const std::size_t step = p / 8;
  return (n + step - 1) / step * step;
}

struct Cache {
  std::mutex mu;
  std::multimap<std::size_t, void*> free_blocks;
  AllocatorStats stats;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: storages may outlive static teardown
  return *c;
}

}  // namespace

Storage::Storage(std::size_t nbytes) : ptr_(nullptr), nbytes_(nbytes) {
  const std::size_t cls = size_class(nbytes == 0 ? 1 : nbytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.bytes_in_use += cls;
    if (c.stats.bytes_in_use > c.stats.peak_bytes_in_use) c.stats.peak_bytes_in_use = c.stats.bytes_in_use;
    if (cls >= kCacheMin) {
      auto it = c.free_blocks.find(cls);
      if (it != c.free_blocks.end()) {
        ptr_ = it->second;
        c.free_blocks.erase(it);
        c.stats.bytes_cached -= cls;
        return;
      }
    }
    ++c.stats.system_allocations;
  }
  ptr_ = std::aligned_alloc(64, cls);
  if (!ptr_) {
    allocator_release_cached();
    ptr_ = std::aligned_alloc(64, cls);
    if (!ptr_) throw std::bad_alloc();
  }
}

Storage::~Storage() {
  const std::size_t cls = size_class(nbytes_ == 0 ? 1 : nbytes_);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.bytes_in_use -= cls;
    if (cls >= kCacheMin && c.stats.bytes_cached + cls <= kCacheMaxBytes) {
      c.free_blocks.emplace(cls, ptr_);
      c.stats.bytes_cached += cls;
      return;
    }
  }
  std::free(ptr_);
}

AllocatorStats allocator_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

void allocator_release_cached() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [sz, p] : c.free_blocks) std::free(p);
  c.free_blocks.clear();
  c.stats.bytes_cached = 0;
}

}  // namespace tapegrad
