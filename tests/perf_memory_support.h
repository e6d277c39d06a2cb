#pragma once
// The scaffold of the long-training-loop memory tests (tests/models/test_memory_mlp.cpp for the
// MLP, test_memory_cnn.cpp for the CNN): warm the block cache, run many training steps, and
// check that neither the tape nor the live bytes grow and that the blocks come from the cache.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/core/storage.h>

namespace tapegrad::test {

// Under AddressSanitizer the block cache is off (core/storage.cpp: freed blocks go back to
// the system so use-after-free stays detectable), so the cache-reuse checks do not apply.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kBlockCacheOn = false;
#else
constexpr bool kBlockCacheOn = true;
#endif

/// Restores the thread count a test changed.
struct ThreadsGuard {
  int prev = get_num_threads();
  ~ThreadsGuard() { set_num_threads(prev); }
};

/// One training step: the loss of a forward, then zero_grad, backward and opt.step(); returns
/// the loss's value.
template <class Optimizer>
double training_step(Optimizer& opt, const std::function<Tensor()>& forward_loss) {
  Tensor loss = forward_loss();
  opt.zero_grad();
  loss.backward();
  opt.step();
  return loss.item();
}

struct FlatMemoryOptions {
  int steps = 1000;        ///< measured steps, after 20 warm-up steps
  int check_every = 100;   ///< tape and live bytes checked every this many steps
  int extra_system_allocations = 0;  ///< blocks the cache may add once (a bounded peak, not growth)
  bool same_cached_bytes = true;     ///< the cache holds exactly the warm-up's bytes at the end
};

/// Runs step() (returning the loss) 20 times to warm the cache, then o.steps times: the tape
/// is empty and the bytes in use equal the warm value at every check and at the end, the
/// last loss is finite, and (block cache on) at most o.extra_system_allocations new blocks
/// came from the system.
inline void require_flat_memory(const std::function<double()>& step, const FlatMemoryOptions& o) {
  for (int i = 0; i < 20; ++i) step();
  const AllocatorStats warm = allocator_stats();
  double last = 0;
  for (int i = 0; i < o.steps; ++i) {
    last = step();
    if (i % o.check_every == 0) {
      REQUIRE(autograd::tape_size() == 0);
      REQUIRE(allocator_stats().bytes_in_use == warm.bytes_in_use);
    }
  }
  const AllocatorStats end = allocator_stats();
  CHECK(std::isfinite(last));
  CHECK(autograd::tape_size() == 0);
  CHECK(end.bytes_in_use == warm.bytes_in_use);  // same live tensors after every step
  if (kBlockCacheOn) CHECK(end.system_allocations <= warm.system_allocations + o.extra_system_allocations);
  if (o.same_cached_bytes) CHECK(end.bytes_cached == warm.bytes_cached);
}

}  // namespace tapegrad::test
