#pragma once
// Learning-rate schedulers, PyTorch's torch.optim.lr_scheduler (1.13 formulas).
//
// Like PyTorch, a scheduler takes the optimizer's current lr of each group as base_lr,
// applies the lr for epoch 0 on construction, and moves one epoch per step(), called
// after optimizer.step(). The recursive ("chainable") update of PyTorch is used, so the
// lrs match torch's float for float.
#include <cstdint>
#include <vector>

#include <tapegrad/optim/optimizer.h>

namespace tapegrad::optim {

/// The base of every learning-rate scheduler (torch.optim.lr_scheduler.LRScheduler): takes
/// each group's current lr as base_lr, applies epoch 0 on construction, and moves one epoch
/// per step() (call it after optimizer.step()). Keeps a reference to the optimizer, which
/// must outlive it. Not copyable.
class LRScheduler {
 public:
  /// Leaves the optimizer's lrs as they are.
  virtual ~LRScheduler() = default;
  /// Not copyable (it drives one optimizer).
  LRScheduler(const LRScheduler&) = delete;
  /// Not copy-assignable.
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one epoch and writes the new lr into every group.
  void step();
  /// The lr of each group set by the last step (or the constructor).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  /// Each group's lr when the scheduler was made (the base of the formulas).
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  /// Epochs stepped: 0 after construction, +1 per step() (saturating at INT64_MAX).
  std::int64_t last_epoch() const { return last_epoch_; }
  /// "StepLR", "CosineAnnealingLR", ... (PyTorch's class names).
  virtual std::string type_name() const = 0;

  /// "last_epoch" (int64 scalar), "base_lrs" and "last_lr" (float64 [groups]). The
  /// optimizer's lrs are saved by the optimizer's own state_dict.
  OptimizerState state_dict() const;
  /// Restores state_dict(); throws std::invalid_argument naming missing keys, a group
  /// count that differs from the optimizer's, a last_epoch outside [-1, 10^9] or an lr that
  /// is negative or not finite (nothing changes then).
  void load_state_dict(const OptimizerState& state);
  /// Writes state_dict() into `archive` under `prefix` ("scheduler."). Throws
  /// std::invalid_argument naming a key the archive already holds.
  void save_to(Archive& archive, const std::string& prefix) const;
  /// load_state_dict of the archive's tensors under `prefix`; same checks and throws.
  void load_from(const Archive& archive, const std::string& prefix);

 protected:
  /// Reads every group's current lr into base_lrs; last_epoch starts at -1 until
  /// initial_step().
  explicit LRScheduler(Optimizer& optimizer);
  /// Call at the end of the derived constructor: the epoch-0 step.
  void initial_step() { step(); }
  /// The new lr of group g at last_epoch_ given its current lr (PyTorch's get_lr()).
  virtual double next_lr(std::size_t g, double current) const = 0;

  /// The optimizer whose lrs are set (not owned).
  Optimizer& optimizer_;
  /// Each group's lr at construction.
  std::vector<double> base_lrs_;
  /// Each group's lr after the last step.
  std::vector<double> last_lr_;
  /// The current epoch (-1 before the first step).
  std::int64_t last_epoch_ = -1;
};

/// lr = base_lr · gamma^(epoch // step_size). Throws std::invalid_argument for
/// step_size < 1.
class StepLR : public LRScheduler {
 public:
  /// Schedules every group of `optimizer`; `gamma` must be finite and >= 0 (else
  /// std::invalid_argument), as must `step_size` >= 1.
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);
  std::string type_name() const override { return "StepLR"; }

 protected:
  double next_lr(std::size_t g, double current) const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// lr = base_lr · gamma^(number of milestones <= epoch); a milestone listed twice counts
/// twice. Throws std::invalid_argument for a negative milestone.
class MultiStepLR : public LRScheduler {
 public:
  /// Schedules every group of `optimizer`; milestones are epochs (any order); `gamma` must
  /// be finite and >= 0 (else std::invalid_argument).
  MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma = 0.1);
  std::string type_name() const override { return "MultiStepLR"; }

 protected:
  double next_lr(std::size_t g, double current) const override;

 private:
  std::vector<std::int64_t> milestones_;
  double gamma_;
};

/// lr = base_lr · gamma^epoch.
class ExponentialLR : public LRScheduler {
 public:
  /// Schedules every group of `optimizer`; `gamma` must be finite and >= 0 (else
  /// std::invalid_argument).
  ExponentialLR(Optimizer& optimizer, double gamma);
  std::string type_name() const override { return "ExponentialLR"; }

 protected:
  double next_lr(std::size_t g, double current) const override;

 private:
  double gamma_;
};

/// SGDR's cosine annealing without restarts (Loshchilov & Hutter 2017, eq. 5):
/// lr = eta_min + (base_lr - eta_min)(1 + cos(pi·epoch/T_max))/2, computed recursively as
/// PyTorch does (and continuing as a cosine past T_max). Throws std::invalid_argument for
/// T_max < 1.
class CosineAnnealingLR : public LRScheduler {
 public:
  /// Schedules every group of `optimizer` over `T_max` epochs down to `eta_min` (finite,
  /// >= 0, else std::invalid_argument).
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min = 0.0);
  std::string type_name() const override { return "CosineAnnealingLR"; }

 protected:
  double next_lr(std::size_t g, double current) const override;

 private:
  std::int64_t T_max_;
  double eta_min_;
};

/// Linear warm-up, PyTorch's LinearLR: the lr factor goes linearly from start_factor at
/// epoch 0 to end_factor at epoch total_iters and stays there
/// (lr = base_lr·(start + (end - start)·min(epoch, total_iters)/total_iters)).
/// Defaults as in PyTorch: 1/3, 1.0, 5. Throws std::invalid_argument for start_factor
/// outside (0, 1], end_factor outside [0, 1] or total_iters < 1.
class LinearWarmup : public LRScheduler {
 public:
  /// Schedules every group of `optimizer`: factor start_factor at epoch 0 to end_factor at
  /// epoch total_iters (limits in the class description).
  LinearWarmup(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
               std::int64_t total_iters = 5);
  std::string type_name() const override { return "LinearWarmup"; }

 protected:
  double next_lr(std::size_t g, double current) const override;

 private:
  double start_, end_;
  std::int64_t total_;
};
/// PyTorch's name for LinearWarmup.
using LinearLR = LinearWarmup;

}  // namespace tapegrad::optim
