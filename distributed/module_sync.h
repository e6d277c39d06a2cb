#pragma once
// Making every rank start from the same model: a layout check, then a broadcast of the
// parameters and buffers from rank 0 (what PyTorch's DDP does in its constructor).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <tapegrad/layers/module.h>

namespace tapegrad::distributed {

/// One line per parameter and buffer, in named_parameters / named_buffers order:
/// "param 0.weight [8, 6] float64". What check_same_layout compares across ranks.
std::string layout_description(const layers::Module& module);

/// Checks that every rank's module has the same parameters and buffers (count, names,
/// shapes, dtypes). Compares a hash of layout_description first (one allgather of 8
/// bytes); on a mismatch gathers the descriptions and throws std::runtime_error on every
/// rank, naming the first rank that differs from rank 0 and the first differing line, e.g.
/// "rank 1 differs from rank 0 at line 3: 'param 1.weight [8] float64' vs 'param 1.weight
/// [16] float64'". Collective; a no-op in a world of one.
void check_same_layout(const layers::Module& module);

/// Collective: checks that every rank is in the same state, described by `hash` (cheap to
/// compute every step) and, only when the hashes differ, by `describe()` (one line per item,
/// e.g. "mode train()"). Compares the hashes first (one allgather of 8 bytes per rank); on a
/// mismatch gathers the descriptions and throws std::runtime_error on every rank:
/// "<what>: rank 1 differs from rank 0 at line 3: rank 0 has '...', rank 1 has '...'".
/// A no-op in a world of one.
void check_same_across_ranks(std::uint64_t hash, const std::function<std::string()>& describe,
                             const std::string& what);
/// FNV-1a hash of a string (what check_same_layout compares).
std::uint64_t fnv1a(const std::string& s);
/// FNV-1a hash of `n` bytes at `data`, continuing from `h` (the FNV-1a 64-bit offset basis by
/// default), so several ranges can be hashed in sequence.
std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ull);

/// Copies rank `root`'s parameter and buffer values to every rank (in place, so existing
/// handles and optimizers see them). Collective. First checks, as check_same_layout does,
/// that every rank has the same layout and the same root: std::runtime_error on every rank
/// otherwise ("... rank 0 has 'broadcast root 0', rank 1 has 'broadcast root 1'"), before
/// anything is copied; std::invalid_argument for a root outside [0, world_size()).
void broadcast_state(layers::Module& module, int root = 0);

}  // namespace tapegrad::distributed
