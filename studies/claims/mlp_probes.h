#pragma once
// `claims ics-mlp` and `claims landscape-mlp`: the probes of deep_linear.h (Santurkar et al.
// 2018, Definition 2.1 and Fig. 4) on the Fashion-MNIST MLP 784-256-128-10, BN (Linear -> BN
// -> ReLU) vs plain (Linear -> ReLU), plain SGD (no momentum, so the optimizer step is −lr·g),
// minibatch probes on the batch about to be trained on, every k-th step:
//   ics        per Linear i = 2, 3: G = ∇_{W_i} L on the batch; on a copy, every parameter of the
//              layers before i (Linear W and b, BN γ and β) takes its SGD step; G' = ∇_{W_i} L
//              on the same batch. BN in train mode, running statistics restored.
//   landscape  g = the full minibatch gradient; η on a geometric grid over [0.5, 4]× lr (the
//              paper's range for VGG): L(W − ηg), ‖∇L(W) − ∇L(W − ηg)‖₂ and the effective β.
// The probes leave the run unchanged (same batches, same weights, bit-identical losses).
#include <cstdint>
#include <string>
#include <vector>

#include "deep_linear.h"
#include "mlp.h"
#include "kit/training_options.h"

namespace claims {

struct MlpProbeOptions : studies::kit::FashionGridOptions {
  int epochs = 3;
  std::int64_t batch = 64;
  double lr = 0.1;
  std::vector<std::int64_t> hidden = {256, 128};
  int every = 10;
  int grid = 9;
  double eta_min = 0.5, eta_max = 4;
};
/// --quick: 2 seeds, 1 epoch on 1,024 / 1,000 images, probes every 4 steps, 5 step sizes.
MlpProbeOptions quick_mlp_probe_options(MlpProbeOptions o);
/// Throws std::invalid_argument naming the option.
void check_mlp_probe_options(const MlpProbeOptions& o);

/// Trains plain and BN for every seed with the probes asked for. The result reuses
/// LinearResult (its summaries, CSVs and figures): options.steps = the run's SGD steps,
/// options.depth = the Linears, loss = the minibatch loss at each probe step.
LinearResult run_mlp_probes(const MlpProbeOptions& o, const studies::kit::StudyData& d, bool ics, bool landscape);

}  // namespace claims
