#pragma once
// Making every rank start from the same model: a layout check, then a broadcast of the
// parameters and buffers from rank 0 (what PyTorch's DDP does in its constructor).
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

/// Copies rank `root`'s parameter and buffer values to every rank (in place, so existing
/// handles and optimizers see them). Runs check_same_layout first. Collective.
void broadcast_state(layers::Module& module, int root = 0);

}  // namespace tapegrad::distributed
