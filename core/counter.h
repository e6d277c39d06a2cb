#pragma once
// Step and batch counters kept in state dicts (an optimizer's step, a scheduler's
// last_epoch, a norm layer's num_batches_tracked): loaded values are checked for sign at load,
// and the increment saturates, so a loaded INT64_MAX never overflows (signed overflow is
// undefined behaviour).
#include <cstdint>
#include <limits>

namespace tapegrad {

/// ++count, except that INT64_MAX stays INT64_MAX (the count saturates). Returns the new value.
inline std::int64_t saturating_increment(std::int64_t& count) {
  if (count < std::numeric_limits<std::int64_t>::max()) ++count;
  return count;
}

}  // namespace tapegrad
