#pragma once
// The Fashion-MNIST nets of norm_study and claims: the MLP or CNN with a choice of
// normalisation, one SGD step, evaluation in either mode.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/data/dataset.h>
#include <tapegrad/layers/batch_renorm.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/optimizer.h>

namespace studies::kit {

/// Normalisation after each hidden Linear (MLP) or each Conv2d and the head's Linear (CNN).
///  batch: BatchNorm1d/2d per replica (GhostBatchNorm with R replicas);
///  sync: BatchNorm1d/2d over the whole R·m batch (= SyncBatchNorm across R ranks);
///  renorm: BatchRenorm1d/2d per replica; group: GroupNorm(ModelConfig::groups);
///  layer: LayerNorm over (width) or (C, H, W); none.
enum class NormKind { Batch, Sync, Renorm, Group, Layer, None };
std::string kind_name(NormKind k);
/// Inverse of kind_name; throws std::invalid_argument naming the accepted values.
NormKind parse_kind(const std::string& s);
const std::vector<NormKind>& all_kinds();


struct ModelConfig {
  std::string arch = "mlp";                    ///< "mlp" or "cnn"
  NormKind norm = NormKind::Batch;
  int replicas = 1;                            ///< R (batch and renorm only)
  std::vector<std::int64_t> hidden = {256, 128};  ///< mlp: hidden widths
  tapegrad::Shape image = {1, 28, 28};         ///< cnn: (C, H, W) of a flat input row
  std::vector<std::int64_t> channels = {8, 16};  ///< cnn: conv widths
  std::int64_t head = 64;                      ///< cnn: width of the hidden Linear of the head
  std::optional<double> bn_momentum = 0.1;     ///< PyTorch convention, nullopt = cumulative
  std::int64_t groups = 32;                    ///< GroupNorm groups (must divide every width)
  /// sync only: running_var takes the biased batch variance (divide by m), the convention
  /// of some other frameworks and many hand-written layers (a mode-bug row).
  bool biased_running_var = false;
  tapegrad::Dtype dtype = tapegrad::Dtype::Float32;
};

/// mlp: 784 -> [Linear -> norm -> ReLU] per hidden width -> Linear(10).
/// cnn: Unflatten to `image` -> [Conv2d(3×3, padding 1) -> norm -> ReLU -> MaxPool2d(2)] per
/// conv width -> Flatten -> Linear(C·H·W, head) -> norm -> ReLU -> Linear(head, 10), the
/// block of models::CNN with the study's norms (per-replica and renorm variants included).
/// Conv and Linear weights come from `init` in layer order, so nets differing only in the
/// norm start from the same weights. Throws std::invalid_argument for an unknown arch,
/// groups not dividing a width, or an input size that does not match `image`, and
/// std::runtime_error naming the widths when the parameters do not fit in memory.
struct Model {
  std::shared_ptr<tapegrad::layers::Sequential> net;
  std::vector<tapegrad::layers::BatchNormBase*> bns;          ///< every BatchNorm / BatchRenorm
  std::vector<tapegrad::layers::BatchRenorm1d*> renorms;      ///< for the clipping schedule
  std::vector<tapegrad::layers::BatchRenorm2d*> renorms2d;    ///< for the clipping schedule (cnn)
};
Model build_model(const ModelConfig& c, std::int64_t in_features, std::int64_t classes, tapegrad::Generator& init);

/// Batch Renormalization's clipping schedule (Ioffe 2017 §4 relaxes rmax 1 -> 3 and dmax
/// 0 -> 5 after a BatchNorm warm-up), in fractions of the run: BatchNorm (1, 0) for the
/// first 10% of steps, then linear to (3, 5) at 50%, constant after.
void renorm_schedule(Model& m, std::int64_t step, std::int64_t total_steps);

/// Accuracy (0..1) and mean cross-entropy of `net` on `ds`.
struct Eval {
  double accuracy = 0, loss = 0;
};
/// Eval mode (running statistics), batches of 1000, no grad; modes restored
/// (train::evaluate_classifier, float64 loss).
Eval evaluate_eval_mode(tapegrad::layers::Module& net, const tapegrad::data::Dataset& ds);
/// Train mode with batch statistics of consecutive batches of `batch` rows (the remainder
/// dropped), no grad, every buffer restored afterwards (debug::snapshot_buffers; no side
/// effects); modes restored.
Eval evaluate_train_mode(tapegrad::layers::Module& net, const tapegrad::data::Dataset& ds, std::int64_t batch);

/// One training step: zero_grad, cross-entropy (mean) of net(X) against y, backward,
/// optimizer step. Returns the loss.
double train_step(tapegrad::layers::Module& net, tapegrad::optim::Optimizer& opt, const tapegrad::Tensor& X,
                  const tapegrad::Tensor& y);

/// A loss that is NaN, Inf or > 1e10 ends a run as crashed.
bool crashed_loss(double loss);


}  // namespace studies::kit
