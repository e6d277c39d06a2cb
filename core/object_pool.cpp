#include <tapegrad/core/object_pool.h>

#include <cstdint>
#include <new>

namespace tapegrad::detail {
namespace {

constexpr std::size_t kStep = 16, kMaxBytes = 1024, kClasses = kMaxBytes / kStep;
constexpr std::size_t kListBytes = std::size_t(64) << 10;  // per size class and thread

struct Block {
  Block* next;
};
// Trivially destructible, so it stays usable while other thread-local objects are destroyed
// at thread exit (their tensors free blocks then): after the drain those go to the system.
struct Lists {
  Block* head[kClasses];
  std::uint32_t count[kClasses];
  bool draining;
  bool registered;
};
thread_local Lists lists;

void drain() noexcept {
  lists.draining = true;
  for (std::size_t c = 0; c < kClasses; ++c) {
    while (Block* b = lists.head[c]) {
      lists.head[c] = b->next;
      ::operator delete(b);
    }
    lists.count[c] = 0;
  }
}
struct Drainer {
  ~Drainer() { drain(); }
};
void register_drainer() {
  thread_local Drainer drainer;  // constructed here, destroyed at the thread's exit
  (void)drainer;
}

}  // namespace

void* pool_allocate(std::size_t bytes) {
  if (kRecycleMemory && bytes != 0 && bytes <= kMaxBytes) {
    const std::size_t c = (bytes - 1) / kStep;
    if (Block* b = lists.head[c]) {
      lists.head[c] = b->next;
      --lists.count[c];
      return b;
    }
    return ::operator new((c + 1) * kStep);
  }
  return ::operator new(bytes);
}

void pool_deallocate(void* p, std::size_t bytes) noexcept {
  if (kRecycleMemory && bytes != 0 && bytes <= kMaxBytes && !lists.draining) {
    const std::size_t c = (bytes - 1) / kStep;
    if (lists.count[c] < kListBytes / ((c + 1) * kStep)) {
      if (!lists.registered) {  // construct the thread's Drainer: it empties the lists at exit
        lists.registered = true;
        register_drainer();
      }
      lists.head[c] = ::new (p) Block{lists.head[c]};
      ++lists.count[c];
      return;
    }
  }
  ::operator delete(p);
}

}  // namespace tapegrad::detail
