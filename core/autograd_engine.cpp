// The backward pass: walks the tape in reverse recording order from the roots, running
// each reached node's closure once its gradient is complete (a node is always recorded
// after the nodes of its inputs, so reverse order is a reverse topological order).
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/autograd_tape.h>

namespace tapegrad::autograd {
namespace detail {
namespace {
// Marks a backward running on this thread's tape for its lifetime (see Tape::running);
// the outermost one compacts what was deferred when it ends, however it ends.
class RunningBackward {
 public:
  RunningBackward() : nested_(tape().running > 0) { ++tape().running; }
  ~RunningBackward() {
    if (--tape().running == 0 && tape().compact_deferred) tape().compact();
  }
  RunningBackward(const RunningBackward&) = delete;
  RunningBackward& operator=(const RunningBackward&) = delete;
  /// True for a backward started while another one runs on this thread (from a hook).
  bool nested() const { return nested_; }

 private:
  bool nested_;
};

// Counts a node's backward closure as running, so that a nested backward which frees the
// node (retain_graph=false) leaves the closure to be released once it has returned.
class ApplyingNode {
 public:
  explicit ApplyingNode(Node& node) : node_(node) { ++node_.applying; }
  ~ApplyingNode() { --node_.applying; }
  ApplyingNode(const ApplyingNode&) = delete;
  ApplyingNode& operator=(const ApplyingNode&) = delete;

 private:
  Node& node_;
};

// Makes `pass` the thread's pass in progress for its lifetime (nested passes stack).
class PassScope {
 public:
  explicit PassScope(Pass& pass) : outer_(current_pass()) { current_pass() = &pass; }
  ~PassScope() { current_pass() = outer_; }
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;

 private:
  Pass* outer_;
};

void free_node(Node& node) {
  node.freed = true;
  if (node.applying == 0) node.release();  // drops the saved tensors
}

[[noreturn]] void throw_freed(const Node& node) {
  throw std::logic_error(std::string("backward: trying to backward through the graph a second time (node '") +
                         node.name + "' was freed by an earlier backward); pass retain_graph=true to the first");
}

// The hooked leaves a node feeds (for set_post_accumulate_grad_hook).
template <class F>
void for_hooked_leaves(Node& node, F&& f) {
  for (std::size_t k = 0; k < node.num_inputs(); ++k) {
    AutogradMeta* m = node.input(k).meta.get();
    if (m && !m->grad_fn && m->post_accumulate_grad_hook) f(*m);
  }
}
}  // namespace

void execute(const Tensor* roots, const Tensor* seeds, std::size_t n_roots, bool retain_graph, bool create_graph,
             Request* request) {
  Tape& t = tape();
  auto& entries = t.entries;
  // The root nodes and the latest of their tape positions (leaf roots have no node); one
  // root (backward()) allocates nothing for them.
  std::shared_ptr<Node> one_rnode;
  std::vector<std::shared_ptr<Node>> more_rnodes;
  if (n_roots > 1) more_rnodes.resize(n_roots);
  std::shared_ptr<Node>* rnodes = n_roots > 1 ? more_rnodes.data() : &one_rnode;
  std::ptrdiff_t start = -1;
  for (std::size_t k = 0; k < n_roots; ++k) {
    AutogradMeta& rmeta = *roots[k].impl()->autograd;
    if (!rmeta.grad_fn) continue;
    std::shared_ptr<Node> rnode(roots[k].impl()->autograd, rmeta.grad_fn);
    if (rnode->freed) throw_freed(*rnode);
    auto it = std::lower_bound(entries.begin(), entries.end(), rnode->seq,
                               [](const TapeEntry& e, std::uint64_t s) { return e.seq < s; });
    // Sequence numbers are per thread: also compare the node, so another thread's graph is
    // never mistaken for an entry of this tape.
    if (it == entries.end() || it->seq != rnode->seq || it->node.lock() != rnode)
      throw std::logic_error("backward: the graph was recorded on another thread's tape");
    start = std::max(start, static_cast<std::ptrdiff_t>(it - entries.begin()));
    rnodes[k] = std::move(rnode);
  }
  // From here on the tape is only appended to until the outermost backward ends, so the
  // indices below stay valid whatever a hook or a backward closure does (a create_graph
  // pass appends the nodes it records after `start`: they are not walked).
  const RunningBackward running;
  const bool nested = running.nested();
  std::optional<NoGradGuard> no_grad;  // first order: backward closures compute plain values
  std::optional<EnableGradGuard> with_grad;  // create_graph: they record
  if (create_graph)
    with_grad.emplace();
  else
    no_grad.emplace();

  // The nodes reachable from the roots: needed by the post-accumulate-grad hooks (below),
  // by a nested backward, which runs only its own graph (the tape interleaves it with the
  // outer backward's, whose nodes may hold gradients waiting to be propagated), and by
  // autograd::grad, which runs only the part through which a requested gradient flows.
  const bool hooks = !request && hooked_leaves().load(std::memory_order_relaxed) > 0;
  const bool restrict = nested || request;
  std::unordered_set<const Node*> reach;
  std::unordered_set<const AutogradMeta*> reached_metas;  // request: every state an edge or root reaches
  std::vector<std::pair<AutogradMeta*, std::int64_t>> outer_hook_counts;  // nested: restored at the end
  if (hooks || restrict) {
    for (std::size_t k = 0; k < n_roots; ++k) {
      if (rnodes[k]) reach.insert(rnodes[k].get());
      if (request) reached_metas.insert(roots[k].impl()->autograd.get());
    }
    for (std::ptrdiff_t i = start; i >= 0; --i) {
      std::shared_ptr<Node> node = entries[static_cast<std::size_t>(i)].node.lock();
      if (!node || node->freed || !reach.count(node.get())) continue;
      for (std::size_t k = 0; k < node->num_inputs(); ++k) {
        AutogradMeta* m = node->input(k).meta.get();
        if (m && m->grad_fn) reach.insert(m->grad_fn);
        if (m && request) reached_metas.insert(m);
      }
      if (hooks)
        for_hooked_leaves(*node, [&](AutogradMeta& m) {
          if (nested) outer_hook_counts.emplace_back(&m, m.hook_pending);
          m.hook_pending = 0;
        });
    }
  }
  // autograd::grad: the states a requested gradient flows through (`wanted`: the inputs,
  // and the output of every reachable node with a wanted input) and the nodes that must run.
  std::unordered_map<const AutogradMeta*, std::size_t> targets;
  std::unordered_set<const AutogradMeta*> wanted;
  std::unordered_set<const Node*> runs;
  Pass pass;
  pass.create_graph = create_graph;
  if (request) {
    for (std::size_t i = 0; i < request->inputs.size(); ++i) {
      targets.emplace(request->inputs[i], i);
      wanted.insert(request->inputs[i]);
      if (!request->allow_unused && !reached_metas.count(request->inputs[i]))
        throw std::invalid_argument("grad: input " + std::to_string(i) +
                                    " is not reached by the outputs (they do not depend on it); pass "
                                    "allow_unused=true to get an undefined gradient for it");
    }
    for (std::ptrdiff_t i = 0; i <= start; ++i) {  // recording order: inputs before consumers
      std::shared_ptr<Node> node = entries[static_cast<std::size_t>(i)].node.lock();
      if (!node || node->freed || !reach.count(node.get())) continue;
      for (std::size_t k = 0; k < node->num_inputs(); ++k)
        if (const AutogradMeta* m = node->input(k).meta.get(); m && wanted.count(m)) {
          runs.insert(node.get());
          wanted.insert(&node->out_meta);
          break;
        }
    }
    request->captured.assign(request->inputs.size(), Tensor());
    pass.wanted = &wanted;
    pass.targets = &targets;
    pass.captured = &request->captured;
  }
  const PassScope pass_scope(pass);

  // Post-accumulate-grad hooks: count, per hooked leaf, the nodes reachable from the root
  // that feed it; each one that has run (or was skipped) counts down, and the leaf's hook
  // fires at zero. Only done while some hook is set.
  if (hooks)
    for (const Node* n : reach) for_hooked_leaves(*const_cast<Node*>(n), [](AutogradMeta& m) { ++m.hook_pending; });
  auto count_down = [&](Node& node) {
    if (!hooks || !reach.count(&node)) return;
    for_hooked_leaves(node, [&](AutogradMeta& m) {
      if (--m.hook_pending != 0) return;
      // Final for this backward: committed now, not at the backward's end, so that the hook
      // (data-parallel reduction) sees it while the rest of the backward runs. Only hooked
      // leaves are committed early; a backward that throws later keeps their gradient.
      if (m.pending_grad.defined()) {
        accumulate(m.grad, std::move(m.pending_grad), true, create_graph);
        m.pending_grad = Tensor();
      }
      m.post_accumulate_grad_hook();
    });
  };

  // Leaf gradients wait in pending_grad until every node has run: a backward that throws
  // (anomaly, in-place modification, another thread's graph) leaves no gradient behind,
  // on the leaves or on the live graph, for a later backward to pick up.
  thread_local std::vector<std::shared_ptr<AutogradMeta>> pending;
  const std::size_t pending_base = pending.size();  // a backward run from inside a backward
  // A nested backward sets aside what the outer one has accumulated so far on the nodes
  // and leaves they share, and puts it back when it ends: each backward propagates its own
  // gradients (as PyTorch's separate graph tasks do), and the leaves receive both.
  std::vector<std::pair<Node*, Tensor>> outer_node_grads;
  std::vector<Tensor> outer_leaf_grads;
  if (nested) {
    for (const Node* n : reach) {
      Node* node = const_cast<Node*>(n);  // alive: the roots' edges hold every reachable node
      if (node->grad.defined()) outer_node_grads.emplace_back(node, std::move(node->grad));
      node->grad = Tensor();
    }
    outer_leaf_grads.reserve(pending_base);
    for (std::size_t k = 0; k < pending_base; ++k) {
      outer_leaf_grads.push_back(std::move(pending[k]->pending_grad));
      pending[k]->pending_grad = Tensor();
    }
  }
  auto restore_outer = [&] {
    if (!nested) return;
    for (auto& [node, g] : outer_node_grads) node->grad = std::move(g);
    for (std::size_t k = 0; k < pending_base; ++k) pending[k]->pending_grad = std::move(outer_leaf_grads[k]);
    for (auto& [m, count] : outer_hook_counts) m->hook_pending = count;
  };
  if (!request) pass.pending_leaves = &pending;
  try {
    for (std::size_t k = 0; k < n_roots; ++k) {
      if (rnodes[k]) {
        accumulate(rnodes[k]->grad, seeds[k], false, create_graph);
        continue;
      }
      AutogradMeta* leaf = roots[k].impl()->autograd.get();  // a leaf root: its gradient is the seed
      if (request) {
        if (auto it = targets.find(leaf); it != targets.end())
          accumulate(request->captured[it->second], seeds[k], false, create_graph);
      } else {
        if (!leaf->pending_grad.defined()) pending.push_back(roots[k].impl()->autograd);
        accumulate(leaf->pending_grad, seeds[k], false, create_graph);
      }
    }
    for (std::ptrdiff_t i = start; i >= 0; --i) {
      std::shared_ptr<Node> node = entries[static_cast<std::size_t>(i)].node.lock();
      if (!node) continue;
      if (restrict && !reach.count(node.get())) continue;  // the outer backward's, or not this graph
      if (!node->grad.defined()) {
        count_down(*node);
        continue;
      }
      if (request) {  // a requested non-leaf input: its gradient is complete here
        if (auto it = targets.find(&node->out_meta); it != targets.end())
          accumulate(request->captured[it->second], node->grad, false, create_graph);
        if (!runs.count(node.get())) {
          node->grad = Tensor();
          continue;
        }
      }
      if (node->freed) throw_freed(*node);
      if (create_graph && !node->second_order)
        throw std::logic_error(std::string("backward with create_graph=true: '") + node->name +
                               "' cannot be differentiated twice (its backward is not written with differentiable "
                               "ops); second derivatives need every op between the outputs and the inputs to support "
                               "them (docs/layers_and_ops.md, Second derivatives)" +
                               (node->where.empty() ? std::string() : "; the op was recorded at: " + node->where));
      check_versions(*node);
      Tensor g = std::move(node->grad);
      node->grad = Tensor();
      GradSink sink(node.get(), t.id, &node, &pass);
      {
        const ApplyingNode applying(*node);
        node->apply(g, sink);
        node->reached = true;
      }
      if (node->freed && node->applying == 0 && retain_graph) node->release();  // a nested backward freed it
      count_down(*node);
      if (!retain_graph) free_node(*node);
    }
  } catch (...) {
    for (std::size_t k = pending_base; k < pending.size(); ++k) pending[k]->pending_grad = Tensor();
    pending.resize(pending_base);
    // A backward that throws disarms the bn_train_no_backward watch on the graph it ran
    // over: the forward did reach a backward, and the exception already told the user.
    for (std::ptrdiff_t i = start; i >= 0; --i)
      if (auto node = entries[static_cast<std::size_t>(i)].node.lock(); node && (!restrict || reach.count(node.get()))) {
        node->grad = Tensor();
        node->train_forward_who.clear();
      }
    restore_outer();
    throw;
  }
  for (std::size_t k = pending_base; k < pending.size(); ++k) {
    AutogradMeta& m = *pending[k];
    if (!m.pending_grad.defined()) continue;  // a hooked leaf, committed when it was final
    accumulate(m.grad, std::move(m.pending_grad), true, create_graph);
    m.pending_grad = Tensor();
  }
  pending.resize(pending_base);
  restore_outer();
  if (!retain_graph) t.compact();  // deferred to the outermost backward's end when nested
}
}  // namespace detail

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph, bool create_graph) {
  if (!root.defined()) throw std::logic_error("backward: the tensor is undefined");
  if (!root.requires_grad())
    throw std::logic_error("backward: the tensor does not require grad and has no grad_fn "
                           "(did you compute it under NoGradGuard, or forget requires_grad_()? A gradient "
                           "returned by autograd::grad or backward() has a graph only with create_graph=true)");
  Tensor seed = gradient;
  if (!seed.defined()) {
    if (root.numel() != 1)
      throw std::invalid_argument("backward: a gradient can be implied only for a one-element output; got shape " +
                                  shape_str(root.shape()) + ", pass a gradient of that shape");
    seed = Tensor::ones(root.shape(), root.dtype());
  } else if (seed.shape() != root.shape() || seed.dtype() != root.dtype()) {
    throw std::invalid_argument("backward: gradient has shape " + shape_str(seed.shape()) + " " +
                                dtype_name(seed.dtype()) + " but the output has shape " + shape_str(root.shape()) +
                                " " + dtype_name(root.dtype()));
  }
  detail::execute(&root, &seed, 1, retain_graph, create_graph, nullptr);
}

}  // namespace tapegrad::autograd
