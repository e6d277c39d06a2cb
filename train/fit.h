#pragma once
// fit(): the training loop every program writes by hand, once.
//
//   data::DataLoader loader(train_ds, {.batch_size = 64, .shuffle = true, .drop_last = true}, gen);
//   optim::Adam opt(model->parameters(), {});
//   train::FitOptions o;
//   o.epochs = 20;
//   o.validation = &val_ds;
//   o.generator = &gen;  // saved in checkpoints: exact resume
//   auto history = train::fit(model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o,
//                             {std::make_shared<train::EarlyStopping>(), ...});
//
// Each epoch: model.train(); loader.set_epoch(epoch - 1) and loader.reset() (the epoch's
// order; set_epoch reaches a DistributedSampler, the loader's own order ignores it); per batch forward, loss,
// zero_grad, backward, [data parallel: gradient averaging], [clipping], optimizer.step();
// then validation (train::evaluate: eval mode under NoGradGuard, previous mode restored), the
// scheduler's step (one per epoch), the callbacks.
//
// Divergence is an error, never a result: a batch whose loss or any gradient is NaN or
// infinite is rejected before the update (std::runtime_error naming the epoch, the batch and
// the parameter): the parameters and the optimizer state are untouched, the buffers (e.g.
// BatchNorm's running statistics, moved by that batch's forward) and the generator (its
// dropout masks) are put back as before the batch, and the gradients are cleared. An update
// that makes a parameter NaN or infinite from finite gradients (a learning rate far too
// large) throws after the step, naming the parameter; the model then holds that step (the
// checkpoints of the earlier epochs are intact). A NaN or infinite validation loss throws
// before the callbacks see the epoch.
//
// Exact resume: with the run's generator in FitOptions::generator and a ModelCheckpoint
// callback, resuming from its ".last" file (FitOptions::resume) continues bit for bit as the
// uninterrupted run would have (same batches, dropout masks, updates, early-stopping and best
// decisions), given the same options, data and thread count.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/optim/optimizer.h>
#include <tapegrad/optim/training_checkpoint.h>
#include <tapegrad/train/callback.h>
#include <tapegrad/train/evaluate.h>

namespace tapegrad::train {

/// How fit() trains: epochs, validation, clipping, checkpoints, resume, parallelism.
struct FitOptions {
  /// The run's total epochs, counting epochs restored by a resume. >= 1.
  int epochs = 1;
  /// Evaluated after every epoch (val_loss, val_accuracy); null: none.
  const data::Dataset* validation = nullptr;
  /// Rows per validation batch (EvalOptions::batch_size), >= 1.
  std::int64_t eval_batch_size = kEvalBatch;
  /// optim::clip_grad_norm_(params, max_norm) after backward (and the gradient averaging)
  /// and before step. Unset: no clipping. > 0.
  std::optional<double> clip_grad_norm;
  /// optim::clip_grad_value_(params, value) likewise (after the norm clipping when both). >= 0.
  std::optional<double> clip_grad_value;
  /// The generator of the loader's shuffles and the dropout masks: its state goes into every
  /// checkpoint and is restored on resume (needed for an exact resume). Null: not saved.
  Generator* generator = nullptr;
  /// Continue from a training checkpoint written by ModelCheckpoint (normally its ".last"):
  /// restores the model, optimizer, scheduler, generator, history and callback states, then
  /// runs the remaining epochs. Empty: start fresh.
  std::string resume;
  /// Run at most this many epochs in this call (an interruption; the rest can be resumed).
  std::optional<int> max_epochs;
  /// Tensors and metadata every checkpoint carries beside the training state, e.g. the input
  /// preprocessing (see train/checkpoint.h's standardizer_extras) and the architecture.
  /// Metadata keys under "train." and "callback." are fit's own: fit throws
  /// std::invalid_argument naming such a key.
  optim::CheckpointExtras checkpoint_extras;
  /// Data-parallel training (data_parallel.h); prepare() must have been called on the model
  /// before the optimizer was built. The loader's batch size is then the global batch and
  /// must be divisible by the world size; so must a partial last batch (drop_last = false),
  /// which is split evenly. A loader with a distributed::DistributedSampler over the ranks
  /// (loader_gives_rank_share) instead batches this rank's share: its batch size is per
  /// rank, fit trains on its whole batches (prefetched by its workers) and calls
  /// loader.set_epoch(epoch - 1) before each epoch. Before the first epoch every rank checks that all ranks have the
  /// same data (check_same_data: rows, batching, validation; std::invalid_argument on every
  /// rank otherwise); the epochs then run under run_parallel_guarded: an exception on one
  /// rank (a callback, the loss, a diverged loss) ends the whole job with its message
  /// ("rank 1: error: ...") instead of leaving the other ranks waiting in a collective.
  std::shared_ptr<DataParallel> parallel;
  /// The mode checks (core/mode_checks.h) during this call, validation included: unset = the
  /// process setting (on by default); false = paused; true = on (Warn where it is Off).
  std::optional<bool> mode_checks;
};

/// What a fit() call returns.
struct FitResult {
  std::vector<EpochLogs> history;  ///< every epoch of the run, restored ones included
  int epochs_run = 0;              ///< epochs trained by this call
  int last_epoch = 0;              ///< the last finished epoch (counting restored ones)
  bool stopped_early = false;      ///< a callback set stop_training
  std::string stop_reason;         ///< why it stopped early ("" otherwise)
  std::optional<Evaluation> last_validation;  ///< the last validation pass, if any
  /// Mode issues reported during the call, by kind (e.g. {"bn_train_no_grad", 3}): every
  /// occurrence, also those past the first warning of a kind; process-wide counters, so a
  /// thread training another model at the same time adds its own.
  std::map<std::string, std::int64_t> mode_issues;
};

/// Trains `model` as described above. `loss` takes (output, targets) and returns a scalar
/// mean. `scheduler` may be null. Throws std::invalid_argument for bad options (epochs < 1, a
/// loader without batches, a batch size not divisible by the ranks, clipping values out of
/// range) and a resume file that does not fit the model, optimizer or scheduler (nothing is
/// changed then), or one holding the state of a callback this call does not pass (by
/// name, see callback_state_names); std::runtime_error for an unreadable or corrupted resume
/// file, and for a NaN or infinite loss, gradient, parameter or validation loss (naming the
/// epoch, the batch and the parameter; see the top of this header for what is left as it
/// was); std::logic_error when parallel->prepare() was not called.
FitResult fit(layers::Module& model, data::DataLoader& loader, const LossFn& loss, optim::Optimizer& optimizer,
              optim::LRScheduler* scheduler, const FitOptions& options, std::vector<CallbackPtr> callbacks = {});

/// The metadata key under which checkpoints keep the run's history (JSON array of
/// {"epoch": n, "<key>": value, ...} objects).
inline constexpr const char* kHistoryKey = "train.history";
/// The metadata key present when a callback stopped the run (its reason): resuming from such a
/// checkpoint trains no further epoch.
inline constexpr const char* kStoppedKey = "train.stopped";
/// The metadata key listing the callbacks of the run that wrote a checkpoint, comma-separated
/// (callback_state_names). Their states are under "callback.<name>.<key>"; checkpoints without
/// this key keep them under "callback.<index>.<name>.<key>" and still load.
inline constexpr const char* kCallbacksKey = "train.callbacks";

}  // namespace tapegrad::train
