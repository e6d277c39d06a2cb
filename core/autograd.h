#pragma once
// Tape-based reverse-mode autograd.
//
// Every op whose inputs require grad (while grad mode is on) appends a Node to the
// calling thread's tape: the input edges, the tensors its backward needs (captured by
// the closure, nothing more) and the backward closure itself, written right below the
// forward in the op's source. Tensor::backward() seeds the root node and walks the tape
// in reverse recording order, which is a valid reverse topological order because a
// node is always recorded after the nodes of its inputs. Gradients are accumulated.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapegrad {

struct Node;

/// Per-tensor autograd state (only for tensors that require grad).
struct AutogradMeta {
  bool requires_grad = true;
  Tensor grad;                    ///< leaf gradient (accumulated)
  std::shared_ptr<Node> grad_fn;  ///< producing node; null for leaves
};

/// Collects the gradients a node's backward produces for its inputs.
class GradSink {
 public:
  /// Whether input i needs a gradient (skip the work otherwise).
  bool needs(std::size_t i) const;
  /// Accumulates g into input i's gradient. g must have the input's shape and dtype.
  void add(std::size_t i, Tensor g);
  explicit GradSink(Node* node) : node_(node) {}

 private:
  Node* node_;
};

/// Backward closure: receives d(root)/d(output) and adds d(root)/d(input_i).
using BackwardFn = std::function<void(const Tensor& grad_output, GradSink& grads)>;

/// One recorded op.
struct Node {
  const char* name = "";
  std::vector<std::shared_ptr<AutogradMeta>> inputs;  ///< null where no grad is needed
  std::vector<Shape> input_shapes;
  std::vector<Dtype> input_dtypes;
  BackwardFn backward;
  Tensor grad;           ///< gradient of the output, accumulated during backward
  std::uint64_t seq = 0;  ///< recording order on the tape
  bool freed = false;
  std::string where;  ///< recording site, filled only in anomaly mode
};

/// Whether ops record on the tape (thread-local; on by default).
bool grad_mode_enabled();
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
void set_anomaly_mode(bool enabled);
class AnomalyModeGuard {
 public:
  explicit AnomalyModeGuard(bool enabled = true) : prev_(anomaly_mode_enabled()) { set_anomaly_mode(enabled); }
  ~AnomalyModeGuard() { set_anomaly_mode(prev_); }

 private:
  bool prev_;
};
/// Label attached to nodes recorded in this scope in anomaly mode (e.g. a module name).
class RecordSiteGuard {
 public:
  explicit RecordSiteGuard(std::string site);
  ~RecordSiteGuard();

 private:
  std::string prev_;
};

namespace autograd {

/// True when an op on these inputs must record a node.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

/// Records `out` as the result of op `name` on `inputs` with the given backward.
/// Call only when needs_grad(...) is true.
void record(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn backward);

/// Number of live nodes on this thread's tape (for tests of memory behaviour).
std::size_t tape_size();

/// Runs backward from `root` (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

/// Gradients of `outputs`... w.r.t. `inputs` without touching .grad of other leaves is
/// not offered; use backward and read .grad().

}  // namespace autograd
}  // namespace tapegrad
