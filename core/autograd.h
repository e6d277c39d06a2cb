#pragma once
// Tape-based reverse-mode autograd.
//
// Every op whose inputs require grad (while grad mode is on) appends a Node to the
// calling thread's tape: the input edges, the tensors its backward needs (captured by
// the closure, nothing more) and the backward closure itself, written right below the
// forward in the op's source. A node is one allocation: edges (shapes inline), the
// closure and the output's autograd state live in it. Tensor::backward() seeds the root node and walks the tape
// in reverse recording order, which is a valid reverse topological order because a
// node is always recorded after the nodes of its inputs. Gradients are accumulated.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/core/object_pool.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad {

class Node;
namespace autograd::detail {
struct Pass;
}

/// Per-tensor autograd state (only for tensors that require grad). A leaf owns its own;
/// an op's output uses the one inside its producing Node, so keeping the state keeps the
/// node (and through its edges, the graph below it) alive.
struct AutogradMeta {
  /// Whether the tensor takes part in backward.
  bool requires_grad = true;
  Tensor grad;              ///< leaf gradient (accumulated)
  Node* grad_fn = nullptr;  ///< producing node (owns this state); null for leaves
  /// Leaves only: see set_post_accumulate_grad_hook. `hook_pending` is the engine's count
  /// of consumers still to run in the current backward.
  std::function<void()> post_accumulate_grad_hook;
  /// Engine bookkeeping: consumers of this leaf still to run in the current backward.
  std::int64_t hook_pending = 0;
  /// A leaf's gradient from the backward in progress, added to `grad` only once the whole
  /// backward has succeeded (a backward that throws leaves `grad` as it was).
  Tensor pending_grad;
};

/// Collects the gradients a node's backward produces for its inputs.
class GradSink {
 public:
  /// Whether input i needs a gradient (skip the work otherwise). In autograd::grad only the
  /// inputs through which a requested gradient flows are needed.
  bool needs(std::size_t i) const;
  /// Accumulates g into input i's gradient. g must have the input's shape and dtype.
  void add(std::size_t i, Tensor g);
  /// Shape of input i as recorded (what add(i, g) expects of g).
  Shape input_shape(std::size_t i) const;
  /// The op's own output, as the backward of a create_graph pass must read it: `saved` (the
  /// output the closure kept, detached to avoid a cycle) joined again to this node's graph, so
  /// a gradient computed from it differentiates through the op. Outside a create_graph pass,
  /// `saved` itself.
  Tensor output(const Tensor& saved) const;
  /// `tape_id`: the tape of the thread running the backward (see Node::tape_id); `owner`:
  /// the handle that keeps `node` alive (needed by output()); `pass`: the backward pass in
  /// progress (null outside the engine).
  GradSink(Node* node, std::uint64_t tape_id, const std::shared_ptr<Node>* owner = nullptr,
           const autograd::detail::Pass* pass = nullptr)
      : node_(node), tape_id_(tape_id), owner_(owner), pass_(pass) {}

 private:
  Node* node_;
  std::uint64_t tape_id_;
  const std::shared_ptr<Node>* owner_;
  const autograd::detail::Pass* pass_;
};

/// One input of a recorded op: where its gradient goes, and the shape and dtype that
/// gradient must have (kept inline up to rank 4, so recording allocates nothing for it).
class Edge {
 public:
  Edge() = default;
  /// An edge to `t` (no gradient is routed when t does not require grad).
  /// track_version: remember t's storage version for the backward's check (the op's
  /// backward reads t's values).
  explicit Edge(const Tensor& t, bool track_version = true);
  std::shared_ptr<AutogradMeta> meta;  ///< null where no gradient is needed
  /// The input's dtype (its gradient must have it).
  Dtype dtype = Dtype::Float32;
  /// The input's storage and its version when the op was recorded: a backward finding
  /// the storage alive (a closure saved it) at another version throws.
  std::weak_ptr<Storage> storage;
  /// The storage version when the op was recorded.
  std::uint64_t version = 0;
  /// Whether `s` is the input's recorded shape.
  bool same_shape(const Shape& s) const;
  /// The input's recorded shape.
  Shape shape() const;

 private:
  static constexpr std::size_t kInlineRank = 4;
  std::size_t rank_ = 0;
  std::int64_t dims_[kInlineRank] = {};
  Shape big_;  ///< the shape when rank > kInlineRank
};

/// One recorded op: its input edges, the gradient of its output (accumulated during
/// backward), the output's autograd state, and (in the derived FnNode) the backward
/// closure with the tensors it saved. One allocation per recorded op.
class Node {
 public:
  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /// Hands the inputs it was the last holder of to an iterative teardown: dropping a
  /// chain of a million nodes does not recurse.
  virtual ~Node();

  /// Runs the backward closure: d(root)/d(output) in, d(root)/d(input_i) into grads.
  virtual void apply(const Tensor& grad_output, GradSink& grads) = 0;
  /// Drops the closure and the tensors it saved (after a backward without retain_graph).
  virtual void release() = 0;

  /// Number of input edges.
  std::size_t num_inputs() const { return n_inputs_; }
  /// Input edge i (unchecked; i < num_inputs()).
  Edge& input(std::size_t i) { return i < kInlineInputs ? inline_[i] : more_[i - kInlineInputs]; }
  /// Sets the edges (called once, by autograd::record).
  void set_inputs(const Tensor* inputs, std::size_t n, bool track_versions = true);

  /// The op's name ("MulBackward", ...), as Tensor::grad_fn_name() reports it.
  const char* name = "";
  Tensor grad;            ///< gradient of the output, accumulated during backward
  AutogradMeta out_meta;  ///< the output tensor's autograd state (grad_fn == this)
  std::uint64_t seq = 0;  ///< recording order on the tape
  /// true once a backward without retain_graph released the closure; a second backward
  /// through this node throws.
  bool freed = false;
  std::uint32_t applying = 0;  ///< backward closures of this node running (nested backwards)
  std::string where;  ///< recording site, filled only in anomaly mode
  std::uint64_t tape_id = 0;  ///< the recording thread's tape (a backward elsewhere throws)
  std::weak_ptr<Storage> out_storage;  ///< the output's storage and version when recorded
  /// The output storage's version when recorded.
  std::uint64_t out_version = 0;
  std::shared_ptr<AutogradMeta> teardown_self;  ///< set only while queued for teardown
  /// Next node in the iterative teardown queue (see ~Node).
  Node* teardown_next = nullptr;
  bool reached = false;  ///< a backward ran this node's closure
  /// The backward supports a create_graph pass (recorded with autograd::kSecondOrder).
  bool second_order = false;
  /// See autograd::on_graph_released (null unless a diagnostic watches this node).
  std::unique_ptr<std::function<void(bool reached)>> on_release;
  /// See autograd::watch_train_forward (empty unless the default mode check watches it).
  std::string train_forward_who;
  /// The watched layer's channel count (for the message).
  std::int64_t train_forward_channels = 0;

 private:
  static constexpr std::size_t kInlineInputs = 3;
  std::size_t n_inputs_ = 0;
  Edge inline_[kInlineInputs];
  std::vector<Edge> more_;  ///< inputs past the third (cat of many tensors)
};

/// Whether ops record on the tape (thread-local; on by default).
bool grad_mode_enabled();
/// Turns recording on or off for this thread (NoGradGuard and EnableGradGuard restore it).
void set_grad_mode(bool enabled);

/// RAII: disables recording in its scope (like torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_mode_enabled()) { set_grad_mode(false); }
  ~NoGradGuard() { set_grad_mode(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// RAII: enables recording in its scope.
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(grad_mode_enabled()) { set_grad_mode(true); }
  ~EnableGradGuard() { set_grad_mode(prev_); }

 private:
  bool prev_;
};

/// Anomaly mode (like torch.autograd.detect_anomaly): every node remembers where it
/// was recorded, and a backward that produces NaN or Inf throws naming that op and
/// site. Thread-local; off by default (it costs a check per gradient).
bool anomaly_mode_enabled();
/// Turns anomaly mode on or off for this thread (AnomalyModeGuard restores it).
void set_anomaly_mode(bool enabled);
/// RAII: sets anomaly mode in its scope (default on) and restores the previous setting.
class AnomalyModeGuard {
 public:
  /// Sets anomaly mode to `enabled` until the guard is destroyed.
  explicit AnomalyModeGuard(bool enabled = true) : prev_(anomaly_mode_enabled()) { set_anomaly_mode(enabled); }
  ~AnomalyModeGuard() { set_anomaly_mode(prev_); }

 private:
  bool prev_;
};
/// Label attached to nodes recorded in this scope in anomaly mode (e.g. a module name).
class RecordSiteGuard {
 public:
  /// In anomaly mode, labels the nodes recorded in scope with `site` (nested guards join
  /// labels with '/'); outside anomaly mode it does nothing.
  explicit RecordSiteGuard(std::string site);
  ~RecordSiteGuard();

 private:
  std::string prev_;
};

namespace autograd {

/// What an op's backward reads, for the version check (PyTorch's saved tensors): a
/// backward that finds a read tensor modified in place since the forward throws, naming
/// the op. Ops whose backward reads neither (add, sum, views) pass kSavesNothing, so
/// in-place writes to their inputs are allowed, as in PyTorch.
/// kSecondOrder (a flag added to the others) declares that the backward supports a
/// create_graph pass: it computes its gradients with differentiable ops when
/// creating_graph() is true. A create_graph pass reaching a node without it throws
/// std::logic_error naming the op, rather than returning a gradient that silently has no graph.
enum Saves : unsigned { kSavesNothing = 0, kSavesInputs = 1, kSavesOutput = 2, kSecondOrder = 4 };

/// True when an op on these inputs must record a node.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
/// The same for a vector of inputs (undefined ones are skipped).
bool needs_grad(const std::vector<Tensor>& inputs);

namespace detail {
template <class F>
class FnNode final : public Node {
 public:
  explicit FnNode(F&& fn) : fn_(std::move(fn)) {}
  void apply(const Tensor& grad_output, GradSink& grads) override { (*fn_)(grad_output, grads); }
  void release() override { fn_.reset(); }

 private:
  std::optional<F> fn_;
};
// Wires `node` to its inputs and output and appends it to the tape.
void attach(const char* name, Tensor& out, const Tensor* inputs, std::size_t n, std::shared_ptr<Node> node,
            unsigned saves);
}  // namespace detail

/// Records `out` as the result of op `name` on `inputs`, with `backward(grad_output,
/// GradSink&)` as its backward closure (stored inline in the node). Undefined inputs (an
/// absent bias) get no edge. Call only when needs_grad(...) is true. `saves` (see Saves)
/// says which tensors the backward reads: by default the inputs.
template <class F>
void record(const char* name, Tensor& out, std::initializer_list<Tensor> inputs, F&& backward,
            unsigned saves = kSavesInputs) {
  detail::attach(name, out, inputs.begin(), inputs.size(),
                 std::allocate_shared<detail::FnNode<std::decay_t<F>>>(PoolAllocator<detail::FnNode<std::decay_t<F>>>(),
                                                                          std::decay_t<F>(std::forward<F>(backward))), saves);
}
/// record() for a vector of inputs (ops over many tensors, e.g. cat).
template <class F>
void record(const char* name, Tensor& out, const std::vector<Tensor>& inputs, F&& backward,
            unsigned saves = kSavesInputs) {
  detail::attach(name, out, inputs.data(), inputs.size(),
                 std::allocate_shared<detail::FnNode<std::decay_t<F>>>(PoolAllocator<detail::FnNode<std::decay_t<F>>>(),
                                                                          std::decay_t<F>(std::forward<F>(backward))), saves);
}

/// Post-accumulate-grad hook of a leaf (like PyTorch's register_post_accumulate_grad_hook):
/// during each backward that reaches the leaf, `hook` runs once, right after the last node
/// that can add to the leaf's .grad in that backward has run (so .grad is final for this
/// backward; it may be undefined if no gradient actually arrived). Data-parallel training
/// uses it to start reducing gradients while the rest of the backward runs. One hook per
/// leaf; an empty function removes it. Throws std::logic_error for a non-leaf or a tensor
/// that does not require grad. The hook runs on the backward's thread, under no-grad.
/// Cost: backwards pay one reachability pass over the tape only while some hook is set.
void set_post_accumulate_grad_hook(const Tensor& leaf, std::function<void()> hook);

/// Calls `callback(reached)` once, when the node that produced `output` is destroyed (its
/// graph was dropped): reached = whether a backward ran through that node. For
/// diagnostics (debug::ModeAudit reports a train-mode BatchNorm forward whose graph never
/// reached backward(): a validation pass in train mode). Several callbacks on one node run
/// in the order added. Throws std::logic_error unless `output` was produced by a recorded
/// op. The callback runs on the thread that drops the graph, inside a destructor: it must
/// not throw (an exception is swallowed) and should only record what it saw.
void on_graph_released(const Tensor& output, std::function<void(bool reached)> callback);

/// The default mode check `bn_train_no_backward` (core/mode_checks.h): marks the node that
/// produced `output`, a train-mode forward of layer `who` with `channels` running statistics,
/// so that when the node is destroyed without a backward having run through it (and not
/// while an exception unwinds the stack), report_train_forward_unreached(who, channels) runs.
/// Cheaper than on_graph_released (no allocation for a short `who`). Does nothing unless
/// `output` was produced by a recorded op.
void watch_train_forward(const Tensor& output, const std::string& who, std::int64_t channels);

/// Number of live nodes on this thread's tape (for tests of memory behaviour).
std::size_t tape_size();

/// Runs backward from `root` (see Tensor::backward). May be called from inside a running
/// backward (a post-accumulate-grad hook, a backward closure): the nested backward runs
/// only the nodes reachable from its own root, the outer backward's pending gradients are
/// set aside meanwhile, and the tape is compacted once the outermost backward ends.
/// `create_graph`: the backward is itself recorded (see GradOptions::create_graph).
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph, bool create_graph = false);

/// Options of grad() (torch.autograd.grad's keyword arguments).
struct GradOptions {
  /// Keep the graph for another backward; unset: the value of create_graph.
  std::optional<bool> retain_graph;
  /// Record the backward itself, so that its results can be differentiated again (second
  /// and higher derivatives: gradient penalties, Hessian-vector products).
  bool create_graph = false;
  /// An input the outputs do not depend on gets an undefined Tensor instead of an error.
  bool allow_unused = false;
};

/// The gradients of Σ_i sum(outputs[i] · grad_outputs[i]) with respect to each of `inputs`
/// (torch.autograd.grad). No `.grad` is read or written, and no post-accumulate-grad hook
/// runs. `grad_outputs` is empty or one tensor per output (its shape and dtype); an empty
/// entry or list is allowed for a one-element output (the gradient 1). With create_graph,
/// the results carry a graph and can be differentiated again. Only the part of the graph
/// through which a requested gradient flows is run.
/// Throws std::invalid_argument for an undefined tensor, an output or input that does not
/// require grad, a missing or mis-shaped grad_output (naming its index and both shapes), or
/// an input that no output reaches (naming its index) unless allow_unused; std::logic_error
/// for a graph freed by an earlier backward (as Tensor::backward).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, const GradOptions& options = {});

/// True while a backward closure runs inside a create_graph pass. Grad mode is on then, so
/// the public ops a closure calls record; a closure whose fast path runs a raw kernel
/// computes its gradient from differentiable ops instead when this is true.
bool creating_graph();

/// Products of the Hessian of a scalar `loss` with vectors, many on one graph (Lanczos,
/// conjugate gradients): H·v = d(Σ_k g_k·v_k)/dθ with g = dloss/dθ (Pearlmutter 1994, "Fast
/// exact multiplication by the Hessian"), the gradient computed once with create_graph.
/// Keeps the loss's graph alive while it lives. Costs one backward through the gradient's
/// graph per product (about twice a gradient).
class HessianOperator {
 public:
  /// Throws std::invalid_argument unless `loss` has one element and requires grad, and every
  /// parameter is a tensor that requires grad (a parameter the loss does not reach is fine:
  /// its rows of H are zero).
  HessianOperator(const Tensor& loss, std::vector<Tensor> params);
  /// H·v for one v (one tensor per parameter, its shape and dtype; throws
  /// std::invalid_argument naming the index otherwise). The results carry no graph.
  std::vector<Tensor> operator()(const std::vector<Tensor>& v) const;
  /// dloss/dθ, one tensor per parameter (detached; zeros where the loss does not reach).
  const std::vector<Tensor>& gradient() const { return gradient_; }
  /// The parameters θ.
  const std::vector<Tensor>& params() const { return params_; }

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> graph_grads_;   ///< dloss/dθ_k with their graph (only those that have one)
  std::vector<std::size_t> graph_index_;  ///< the parameter of each entry of graph_grads_
  std::vector<Tensor> gradient_;
};

/// H·v for one v: HessianOperator(loss, params)(v). Shapes as HessianOperator's.
std::vector<Tensor> hessian_vector_product(const Tensor& loss, const std::vector<Tensor>& params,
                                           const std::vector<Tensor>& v);

}  // namespace autograd
}  // namespace tapegrad
