#pragma once
// Module: the base of every layer. Holds named parameters (trainable, requires_grad),
// buffers (state that is saved but never trained: running_mean, running_var,
// num_batches_tracked) and child modules, and switches train/eval mode recursively.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/archive.h>
#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/state_dict.h>
#include <tapegrad/layers/state_dict_keys.h>

namespace tapegrad::layers {

/// What load_state_dict did: what it could not apply (missing, unexpected, mismatched keys)
/// and what it changed on the way (converted dtypes, filled-in counters).
struct LoadResult {
  std::vector<std::string> missing_keys;     ///< expected by the module, absent from the dict
  std::vector<std::string> unexpected_keys;  ///< in the dict, unknown to the module
  std::vector<std::string> mismatched;       ///< "key: expected [..] float32, got [..] int64"
  std::vector<std::string> converted;        ///< "key: float64 -> float32" (loaded, cast to the module's dtype)
  std::vector<std::string> filled;           ///< "key = 0 (...)": state a layer derived (Module::upgrade_state_dict)
  /// Key changes made before matching (LoadOptions::strip_prefixes, renames): "stripped
  /// 'module.' from 5 keys", "renamed fc1 -> 0".
  std::vector<std::string> key_changes;
  /// How the dict's keys differ from the module's in structure (describe_key_structure in
  /// layers/state_dict_keys.h), "" when they do not or nothing is missing.
  std::string structure;
  /// true when nothing was missing, unexpected or mismatched (conversions and fills are fine).
  bool ok() const { return missing_keys.empty() && unexpected_keys.empty() && mismatched.empty(); }
  /// Multi-line human summary: "loaded N tensors", then one line per conversion, fill,
  /// missing, unexpected and mismatched key (empty categories omitted).
  std::string report() const;
  std::size_t loaded = 0;  ///< tensors written into the module
};

/// How a load treats the incoming state: Module::load_state_dict, Module::load_from,
/// layers::load (safetensors) and io::load (safetensors or torch.save, format detected).
struct LoadOptions {
  /// true: every key, shape and dtype must match (see load_state_dict); false: apply what
  /// matches and return the rest.
  bool strict = true;
  /// true (default): refuse values no module can hold: a NaN or infinite parameter or
  /// floating buffer, and what the owning module refuses on top (the norm layers: a
  /// running_var < 0, a num_batches_tracked < 0). false: load them as they are, for
  /// studying broken checkpoints.
  bool check_values = true;
  /// Prefixes stripped from the incoming keys, in order, before matching (strip_prefix in
  /// layers/state_dict_keys.h: DataParallel's "module."). Used by load_from and the file
  /// loads; load_state_dict takes its dict as it is.
  std::vector<std::string> strip_prefixes{};
  /// Key-path renames applied after the prefixes (rename_keys in layers/state_dict_keys.h).
  /// Used as strip_prefixes.
  std::vector<KeyRename> renames{};
  /// torch.save files (io::load, io/torch_tensors.h TorchReadOptions): float16 and bfloat16
  /// tensors are cast to float32; false: such a tensor is refused, naming it.
  bool half_to_float32 = false;
  /// torch.save files: the key of the state dict inside a dict of things ({"epoch": 3,
  /// "state_dict": {...}}); "" takes the top-level dict.
  std::string entry{};
  /// torch.save files: the bytes the reader may allocate (0: 4 x the file's size + 1 MiB).
  std::uint64_t max_bytes = 0;
};

/// `dict` after options.strip_prefixes and options.renames, each change listed in
/// `key_changes` when given. Throws std::invalid_argument as strip_prefix and rename_keys.
StateDict apply_key_changes(StateDict dict, const LoadOptions& options, std::vector<std::string>* key_changes = nullptr);

/// The base of every layer, like torch.nn.Module: named parameters (trainable,
/// requires_grad), buffers (saved state that is never trained: running_mean, running_var,
/// num_batches_tracked) and child modules, a train/eval mode set recursively, state_dict
/// and load_state_dict. Not copyable; layers are held by shared_ptr (ModulePtr).
class Module {
 public:
  /// Destroys the module; children held only by it go with it.
  virtual ~Module() = default;
  /// An empty module in training mode.
  Module() = default;
  /// Not copyable: parameters are shared handles (share a module through ModulePtr).
  Module(const Module&) = delete;
  /// Not copy-assignable (see the copy constructor).
  Module& operator=(const Module&) = delete;

  /// The layer's computation.
  virtual Tensor forward(const Tensor& input) = 0;
  /// forward() plus the diagnostics hooks of layers/hooks.h (and, in anomaly mode, the
  /// module's type as the recording site of its ops). Containers call children this way.
  Tensor operator()(const Tensor& input);
  /// Type name as PyTorch spells it ("BatchNorm1d").
  virtual std::string type_name() const = 0;
  /// Constructor arguments for printing ("3, eps=1e-05, momentum=0.1").
  virtual std::string extra_repr() const { return ""; }

  // ---- modes -------------------------------------------------------------------------
  /// Sets training mode on this module and every descendant (default true).
  void train(bool mode = true);
  /// train(false).
  void eval() { train(false); }
  /// true in training mode (the default), false after eval() or train(false).
  bool is_training() const { return training_; }

  // ---- parameters, buffers, children ------------------------------------------------
  /// The trainable tensors, in the order of named_parameters(); `recurse` false: this
  /// module's own only. The handles are the live tensors, not copies.
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// ("0.weight", W) pairs, depth-first in registration order, PyTorch's dotted names.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  /// The buffers (persistent or not), in the order of named_buffers(); live handles.
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// ("1.running_mean", t) pairs of every buffer, persistent or not, depth-first in
  /// registration order; `recurse` false: this module's own only.
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  /// The direct children with their names, in registration order.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  /// Replaces the direct child `name` by `child` (like PyTorch's `module.name = child`),
  /// e.g. to swap BatchNorm for SyncBatchNorm. Throws std::invalid_argument when there is
  /// no child of that name or `child` is null. Containers that keep their own list of
  /// children (Sequential) override it and call this.
  virtual void replace_child(const std::string& name, std::shared_ptr<Module> child);
  /// This module ("") and every descendant with its dotted path.
  std::vector<std::pair<std::string, Module*>> named_modules();

  /// Clears (set_to_none) or zeroes the gradients of every parameter.
  void zero_grad(bool set_to_none = true);

  // ---- checkpoints ---------------------------------------------------------------------
  /// Parameters and persistent buffers, in registration order, depth-first:
  /// "0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
  /// "1.num_batches_tracked", ... The tensors are the live ones (not copies).
  StateDict state_dict() const;
  /// Copies values from `dict` into the module's tensors, like PyTorch's load_state_dict.
  /// Atomic: every key, shape and dtype is checked before anything is written; a failed load
  /// changes nothing. Floating data of another floating dtype (float64 into a float32
  /// module) is cast to the module's dtype and listed in LoadResult::converted; floating <->
  /// int64 is a mismatch. A BatchNorm's num_batches_tracked that is absent while its
  /// running_mean and running_var are present (checkpoints before PyTorch 0.4.1) is set to 0
  /// as PyTorch does, and listed in LoadResult::filled. strict: throws std::invalid_argument
  /// listing every missing key, unexpected key and shape/kind mismatch (with
  /// LoadResult::structure's summary when the key layouts differ, the lists then cut to 8
  /// names each). Non-strict: applies the matching entries and returns the rest.
  ///
  /// Values are checked too (LoadOptions::check_values, on by default, strict or not): an
  /// impossible value (a NaN weight, a negative running_var or num_batches_tracked) throws
  /// std::invalid_argument naming every such tensor, its first bad value and its index,
  /// and nothing is loaded.
  LoadResult load_state_dict(const StateDict& dict, bool strict = true);
  /// load_state_dict with every option spelled out (LoadOptions::strict,
  /// LoadOptions::check_values); same checks, same atomicity.
  LoadResult load_state_dict(const StateDict& dict, const LoadOptions& options);

  /// Writes state_dict() into `archive` under `prefix` ("model."); include_buffers false:
  /// parameters only. The handles are the live tensors (read when the archive is saved).
  /// Throws std::invalid_argument naming a key the archive already holds.
  void save_to(Archive& archive, const std::string& prefix = "", bool include_buffers = true) const;
  /// load_state_dict of the archive's tensors under `prefix` (Archive::with_prefix: an empty
  /// prefix leaves the extras out), after options.strip_prefixes and options.renames (listed
  /// in LoadResult::key_changes). Same checks, same atomicity, same throws.
  LoadResult load_from(const Archive& archive, const LoadOptions& options = {}, const std::string& prefix = "");

  /// Converts every parameter and floating buffer to `dtype` in place (int64 buffers
  /// stay int64). Existing handles see the change.
  void to(Dtype dtype);

  /// Multi-line description of the module tree, PyTorch style.
  std::string repr() const;

 protected:
  /// Registers a trainable tensor (sets requires_grad). Returns the same handle.
  Tensor register_parameter(const std::string& name, Tensor value);
  /// Registers state that is saved in state_dict (when persistent) but not trained.
  Tensor register_buffer(const std::string& name, Tensor value, bool persistent = true);
  /// Registers `child` under `name` (its state_dict keys get the prefix "name.") and
  /// returns it with its own type. Throws std::invalid_argument when `child` is null or a
  /// child of that name exists.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    add_child(name, child);
    return child;
  }
  /// register_module without the typed return; same checks, same throws.
  void add_child(const std::string& name, std::shared_ptr<Module> child);
  /// Throws std::invalid_argument "<type_name()>: input dtype float64 does not match the
  /// module's float32 (convert with .to() or Module::to())" when `state` (the tensor that
  /// follows Module::to, e.g. the weight) is defined and x's dtype differs; x must be defined.
  void check_input_dtype(const Tensor& x, const Tensor& state) const;
  /// Called after the mode of this module changed (e.g. to reset per-mode caches).
  virtual void on_mode_change() {}
  /// What is impossible about `value` as this module's own parameter or buffer `name`
  /// (e.g. "running_var"), for load_state_dict: "" when it is fine, else "expected …, got
  /// … at index i". The default refuses NaN and infinite floating values; modules with
  /// constrained state (running variances, counts) override it and call this first.
  virtual std::string check_state_value(const std::string& name, const Tensor& value) const;
  /// PyTorch's _load_from_state_dict fix-up: called by load_state_dict for this module and
  /// every descendant before any key is matched, with `prefix` the module's key prefix
  /// ("features.1." or ""). A module whose older checkpoints lack state it can derive puts
  /// it into `added` under its full key and describes it in `filled` (BatchNorm's
  /// num_batches_tracked: ChannelNormBase). Default: nothing.
  virtual void upgrade_state_dict(const std::string& prefix, const StateDict& incoming, StateDict& added,
                                  std::vector<std::string>& filled) const;

 private:
  void collect(const std::string& prefix, bool recurse, bool params,
               std::vector<std::pair<std::string, Tensor>>& out) const;
  void collect_state(const std::string& prefix, StateDict& out) const;
  void repr_into(std::string& out, int indent) const;

  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::string> non_persistent_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// How modules are held and shared (containers, models, DistributedDataParallel).
using ModulePtr = std::shared_ptr<Module>;

/// How containers call a child: `child(input)`, and an exception from inside names where
/// it happened. A std exception of the standard types (invalid_argument, out_of_range,
/// logic_error, runtime_error, ...) is rethrown with the same type and its message
/// prefixed "in module '<name>' (<child type>): "; nested containers join the names
/// ("in module 'features.2' (BatchNorm1d): "). Other exception types pass unchanged.
/// PyTorch does not do this; it finds the module without a debugger.
Tensor call_child(Module& child, const std::string& name, const Tensor& input);

/// RAII: records the train/eval mode of `model` and of every module below it, and sets each
/// back at scope exit, parent before children (named_modules' order), so that every module
/// gets its own mode back although train() recurses.
class ModeRestore {
 public:
  /// Records the modes of `model` and its descendants (`model` must outlive the guard).
  explicit ModeRestore(Module& model);
  ~ModeRestore() {
    for (auto& [module, training] : modes_) module->train(training);
  }
  ModeRestore(const ModeRestore&) = delete;
  ModeRestore& operator=(const ModeRestore&) = delete;

 private:
  std::vector<std::pair<Module*, bool>> modes_;
};

/// RAII for a container's forward: marks the outermost container call on this thread, so
/// that an exception leaving it (see call_child) also gets " (model input: [10])": the
/// shape the user passed, which the failing layer may never have seen.
class ContainerForwardScope {
 public:
  ContainerForwardScope();
  ~ContainerForwardScope();
  ContainerForwardScope(const ContainerForwardScope&) = delete;
  ContainerForwardScope& operator=(const ContainerForwardScope&) = delete;
  /// Call from a catch block in the container's forward: rethrows the current exception,
  /// with the model input's shape appended when this is the outermost container.
  [[noreturn]] void rethrow(const std::exception& e, const Tensor& input) const;

 private:
  bool outermost_;
};

}  // namespace tapegrad::layers
