#pragma once
// The nets of `claims hessian` (hessian_study.h), float64: a ReLU MLP without BatchNorm
// (`plain`), with BatchNorm1d after each hidden Linear normalising with the batch statistics
// (`bn`), and the same BatchNorm normalising with population statistics (`bn-population`,
// Ghorbani, Krishnan & Xiao 2019, §4): the mean and biased variance of each BN input over the
// whole training set, recomputed every k SGD steps and held constant in between, so neither
// the loss nor its gradient depends on the other rows of a mini-batch.
// Per layer: Linear (W, b) -> [BatchNorm1d (γ, β)] -> ReLU; the output Linear has no BN.
// Loss: MSE against (n, 1) targets (regression) or cross-entropy against one-hot (n, classes).
#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>

namespace claims {

enum class HessianArm { plain, bn, bn_population };
/// "plain", "bn" or "bn-population"; throws std::invalid_argument naming the three and `name`.
HessianArm hessian_arm(const std::string& name);

struct HessianNet {
  HessianArm arm = HessianArm::plain;
  bool classify = false;
  /// W_0, b_0, [γ_0, β_0,] W_1, b_1, ... in layer order: what SGD trains and the Hessian is of
  std::vector<tapegrad::Tensor> params;
  /// one (C) float64 pair per hidden layer (BN arms): `bn`: PyTorch's running statistics
  /// (momentum 0.1, unbiased variance), updated by train_loss only; `bn-population`: the
  /// population statistics set by refresh_population and read by every loss.
  std::vector<tapegrad::Tensor> running_mean, running_var;
  std::int64_t hidden_layers = 0;
  double eps = 1e-5;
};

/// sizes: input width, hidden widths..., output width (>= 2 entries). Linear weights and biases
/// ~ U(±1/√fan_in) (PyTorch's default range), γ = 1, β = 0, running mean 0 and variance 1.
HessianNet make_hessian_net(const std::vector<std::int64_t>& sizes, HessianArm arm, bool classify,
                            tapegrad::Generator& g);

/// The loss of one SGD step on rows x (k, width) with targets t: plain: the MLP's; bn: batch
/// statistics of x, the running statistics updated (train mode, as BatchNorm1d); bn-population:
/// the population statistics as constants (refresh_population first).
tapegrad::Tensor train_loss(HessianNet& net, const tapegrad::Tensor& x, const tapegrad::Tensor& t);

/// The loss whose Hessian is probed, on rows x (n, width) (the fixed Hessian set): plain and
/// bn-population: the loss of the n rows at once (bn-population with its population
/// statistics); bn: the rows cut into consecutive chunks of `chunk` rows (a last chunk of one
/// row joins the one before), each normalised with its own batch statistics as an SGD step of
/// that batch size is, and the chunk losses weighted by their row counts (so the mean loss per
/// row). Touches no running statistics. Throws std::invalid_argument for chunk < 2 in the bn arm.
tapegrad::Tensor probe_loss(const HessianNet& net, const tapegrad::Tensor& x, const tapegrad::Tensor& t,
                            std::int64_t chunk);

/// bn-population: sets each BN layer's statistics to the mean and biased variance of its
/// input over the rows x (the whole training set), layer after layer (each layer's input
/// normalised with the statistics just computed below it), without recording a graph.
/// Throws std::logic_error for another arm.
void refresh_population(HessianNet& net, const tapegrad::Tensor& x);

}  // namespace claims
