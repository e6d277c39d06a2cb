#pragma once
// Optimizer: the base of every optimizer, PyTorch's torch.optim.Optimizer.
//
// Parameters come in groups; each group has its own options (lr, momentum, ...), so a
// head can train with a different lr than the body, and a scheduler changes the lr of
// every group. Per-parameter state (momentum buffers, Adam moments, step counts) lives
// in the base so state_dict()/load_state_dict() work the same for every optimizer.
//
// Only parameters are ever updated: buffers such as BatchNorm's running_mean and
// num_batches_tracked are not parameters and no optimizer sees them.
#include <cstddef>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <tapegrad/core/archive.h>
#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/state_dict.h>

namespace tapegrad::optim {

namespace detail {
/// Shortest text that reads back as the same double ("0.1", "-2", "1e-08"), for messages.
std::string num(double v);
}  // namespace detail

/// Optimizer and scheduler state as named tensors, ready to be saved with the model:
///   "state.<i>.<name>"        per-parameter state of the i-th parameter (counting over
///                             all groups in order), e.g. "state.0.momentum_buffer",
///                             "state.3.step" (int64 scalar), "state.3.exp_avg";
///   "param_groups.<g>.<opt>"  scalar float64 options of group g ("param_groups.0.lr");
///   "param_groups.<g>.params" int64 [n] indices of the group's parameters.
using OptimizerState = layers::StateDict;

/// The base of every optimizer (torch.optim.Optimizer): parameter groups with their own
/// options, per-parameter state kept here so that state_dict()/load_state_dict() work the
/// same for SGD, Adam, AdamW and RMSprop. Only parameters are updated, never buffers. Not
/// copyable.
class Optimizer {
 public:
  /// Destroys the optimizer and its state; the parameters are untouched.
  virtual ~Optimizer() = default;
  /// No groups, no state.
  Optimizer() = default;
  /// Not copyable (the state belongs to one set of parameters).
  Optimizer(const Optimizer&) = delete;
  /// Not copy-assignable.
  Optimizer& operator=(const Optimizer&) = delete;

  /// Applies one update to every parameter that has a gradient. Calls
  /// hooks::run_step_hooks(parameters()) first.
  virtual void step() = 0;
  /// Clears (set_to_none, the default as in PyTorch 2) or zeroes every parameter's grad.
  void zero_grad(bool set_to_none = true);
  /// "SGD", "Adam", ...
  virtual std::string type_name() const = 0;

  // ---- parameter groups ----------------------------------------------------------------
  /// Number of parameter groups (add_param_group adds one).
  virtual std::size_t num_param_groups() const = 0;
  /// The parameters of a group, in the order given. Throws std::out_of_range.
  virtual const std::vector<Tensor>& group_params(std::size_t group) const = 0;
  /// Learning rate of a group (schedulers read and write it). Throws std::out_of_range.
  virtual double lr(std::size_t group) const = 0;
  /// Sets a group's lr; throws std::invalid_argument for lr < 0 or NaN.
  virtual void set_lr(std::size_t group, double lr) = 0;
  /// Every parameter of every group, in order.
  std::vector<Tensor> parameters() const;

  // ---- checkpoints -----------------------------------------------------------------------
  /// Per-parameter state and every group's options (see OptimizerState). State tensors
  /// are copies.
  OptimizerState state_dict() const;
  /// Restores what state_dict() produced. Checks everything before changing anything:
  /// the number of groups and their parameter indices, every key (unknown state names,
  /// parameter indices out of range, unknown options), every state tensor's shape and
  /// dtype against its parameter, the options' validity and the values (a step count in
  /// [0, 2^53], finite moments, second moments >= 0). Throws std::invalid_argument listing
  /// every problem.
  void load_state_dict(const OptimizerState& state);
  /// Writes state_dict() into `archive` under `prefix` ("optimizer."). Throws
  /// std::invalid_argument naming a key the archive already holds.
  void save_to(Archive& archive, const std::string& prefix) const;
  /// load_state_dict of the archive's tensors under `prefix`; same checks and throws.
  void load_from(const Archive& archive, const std::string& prefix);

 protected:
  /// Names a parameter's state may hold ("momentum_buffer", "step", ...).
  virtual std::vector<std::string> state_names() const = 0;
  /// Scalar options of a group as name -> value (bools as 0/1).
  virtual std::vector<std::pair<std::string, double>> group_options(std::size_t group) const = 0;
  /// Checks options read from a state dict; returns "" or what is wrong.
  virtual std::string check_group_options(std::size_t group,
                                          const std::map<std::string, double>& values) const = 0;
  /// Writes options read from a state dict (names as in group_options) into a group;
  /// load_state_dict calls it after check_group_options accepted them.
  virtual void set_group_options(std::size_t group, const std::map<std::string, double>& values) = 0;
  /// Throws unless every parameter is a float leaf that appears in only one group.
  void check_params(const std::vector<Tensor>& params) const;
  /// hooks::run_step_hooks(parameters()): the first thing every step() does.
  void run_step_hooks() const;
  /// Throws std::invalid_argument unless grad has p's shape and dtype (i: parameter index).
  void check_grad(const Tensor& p, const Tensor& grad, std::size_t i) const;
  /// One parameter's state by name ("momentum_buffer", "step", ...).
  using ParamState = std::map<std::string, Tensor>;
  /// Converts p's floating state to p's dtype when they differ (after Module::to(dtype)
  /// converted the parameter); int64 counters stay as they are.
  static void follow_dtype(const Tensor& p, ParamState& st);
  /// State names whose values must be >= 0 (second moments), checked on load.
  virtual std::vector<std::string> nonnegative_state_names() const { return {}; }
  /// State of the i-th parameter (over all groups), created on demand.
  ParamState& state(std::size_t i);
  /// Called when a group is added: keeps state_ one entry per parameter.
  void grow_state(std::size_t n) { state_.resize(state_.size() + n); }

 private:
  std::vector<std::map<std::string, Tensor>> state_;
};

/// Optimizer with an Options struct per group. Options must have a double `lr` and a
/// `template <class F> void visit(F&& f)` calling f(name, field) for each scalar field.
template <class Options>
class OptimizerWithOptions : public Optimizer {
 public:
  /// One parameter group: its parameters and their options.
  struct Group {
    /// The group's parameters (float leaves, each in one group only).
    std::vector<Tensor> params;
    /// The group's options (lr, momentum, ...).
    Options options;
  };

  /// Adds a group. Throws std::invalid_argument for invalid options or parameters that
  /// are not float leaves or already in a group.
  void add_param_group(std::vector<Tensor> params, Options options) {
    validate(options);
    check_params(params);
    grow_state(params.size());
    groups_.push_back(Group{std::move(params), options});
  }
  /// Every group with its parameters and options, in the order added.
  const std::vector<Group>& param_groups() const { return groups_; }
  /// A group's options (change them between steps, as with torch's param_groups).
  Options& options(std::size_t group = 0) { return groups_.at(group).options; }
  /// A group's options, read-only. Throws std::out_of_range.
  const Options& options(std::size_t group = 0) const { return groups_.at(group).options; }

  /// Number of groups added.
  std::size_t num_param_groups() const override { return groups_.size(); }
  /// The parameters of group g. Throws std::out_of_range.
  const std::vector<Tensor>& group_params(std::size_t g) const override { return groups_.at(g).params; }
  /// Options::lr of group g. Throws std::out_of_range.
  double lr(std::size_t g) const override { return groups_.at(g).options.lr; }
  /// Sets Options::lr of group g after validating it (std::invalid_argument for lr < 0 or
  /// NaN; the group is unchanged then). Throws std::out_of_range for a bad g.
  void set_lr(std::size_t g, double lr) override {
    Options o = groups_.at(g).options;
    o.lr = lr;
    validate(o);
    groups_[g].options = o;
  }

 protected:
  /// Throws std::invalid_argument naming the offending value (PyTorch's checks).
  virtual void validate(const Options& o) const = 0;

  /// The loop every step() shares: runs the step hooks, then, group by group and in order,
  /// calls f(p, grad, state, options) for each parameter p that has a gradient, after
  /// check_grad(p, grad). Parameters without a gradient are skipped and keep their state.
  template <class F>
  void for_each_param_with_grad(F&& f) {
    // options(g) hands out a mutable reference: check what may have been set since, before
    // any parameter changes (a refused step changes nothing)
    for (const auto& group : groups_) validate(group.options);
    run_step_hooks();
    std::size_t index = 0;
    for (auto& group : groups_) {
      const Options o = group.options;
      for (const Tensor& p : group.params) {
        const std::size_t i = index++;
        auto& st = state(i);
        const Tensor grad = p.grad();
        if (!grad.defined()) continue;
        check_grad(p, grad, i);
        follow_dtype(p, st);
        f(p, grad, st, o);
        p.impl()->storage->bump_version();  // an in-place write, like every optimizer step in PyTorch
      }
    }
  }

  /// Every scalar field of group g's Options (Options::visit order), bools as 0/1.
  std::vector<std::pair<std::string, double>> group_options(std::size_t g) const override {
    std::vector<std::pair<std::string, double>> out;
    Options o = groups_.at(g).options;
    o.visit([&](const char* name, auto& v) { out.emplace_back(name, static_cast<double>(v)); });
    return out;
  }
  /// Validates group g's options with `values` written over them: "" or validate()'s message.
  std::string check_group_options(std::size_t g, const std::map<std::string, double>& values) const override {
    try {
      validate(with_values(groups_.at(g).options, values));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  }
  /// Writes `values` over group g's options (names absent from `values` keep theirs).
  void set_group_options(std::size_t g, const std::map<std::string, double>& values) override {
    groups_.at(g).options = with_values(groups_.at(g).options, values);
  }

  /// The groups, in the order add_param_group added them.
  std::vector<Group> groups_;

 private:
  static Options with_values(Options o, const std::map<std::string, double>& values) {
    o.visit([&](const char* name, auto& v) {
      auto it = values.find(name);
      if (it == values.end()) return;
      using V = std::remove_reference_t<decltype(v)>;
      if constexpr (std::is_same_v<V, bool>)
        v = it->second != 0;
      else
        v = static_cast<V>(it->second);
    });
    return o;
  }
};

}  // namespace tapegrad::optim
