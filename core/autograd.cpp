#include <tapegrad/core/autograd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <unordered_set>

namespace tapegrad {
namespace {

struct TapeEntry {
  std::uint64_t seq;
  std::weak_ptr<Node> node;
};

// The calling thread's tape, in recording order. Entries are weak: a node lives as
// long as the tensor it produced (or a later node that consumes it), so a graph that is
// dropped without a backward frees itself; dead entries are compacted away.
std::uint64_t new_tape_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

struct Tape {
  std::uint64_t id = new_tape_id();  ///< unique over the process's life (addresses are reused)
  std::vector<TapeEntry> entries;
  std::uint64_t next_seq = 1;
  std::size_t compact_at = 4096;

  void compact() {
    entries.erase(std::remove_if(entries.begin(), entries.end(),
                                 [](const TapeEntry& e) {
                                   auto n = e.node.lock();
                                   return !n || n->freed;
                                 }),
                  entries.end());
    compact_at = std::max<std::size_t>(4096, 2 * entries.size());
  }
};

thread_local Tape g_tape;
thread_local bool g_grad_mode = true;
thread_local bool g_anomaly = false;
thread_local std::string g_site;
std::atomic<std::int64_t> g_hooked_leaves{0};  // leaves with a post-accumulate-grad hook

// The hooked leaves a node feeds (for set_post_accumulate_grad_hook).
template <class F>
void for_hooked_leaves(Node& node, F&& f) {
  for (std::size_t k = 0; k < node.num_inputs(); ++k) {
    AutogradMeta* m = node.input(k).meta.get();
    if (m && !m->grad_fn && m->post_accumulate_grad_hook) f(*m);
  }
}

// Iterative teardown: nodes whose last handle went away while another node was being
// destroyed wait here (an intrusive list, no allocation) instead of being destroyed
// inside it. Both are trivially destructible, so they stay usable during thread exit.
thread_local Node* g_dead_head = nullptr;
thread_local bool g_tearing_down = false;
// Leaves that received a gradient in the backward in progress (committed at its end).
thread_local std::vector<std::shared_ptr<AutogradMeta>>* g_pending_leaves = nullptr;

bool unique_owner(const Tensor& t) {
  return t.impl().use_count() == 1 && t.impl()->storage.use_count() == 1;
}

// slot += g, never writing into memory someone else can still see.
void accumulate(Tensor& slot, Tensor g, bool leaf) {
  NoGradGuard ng;
  if (!slot.defined()) {
    slot = (leaf && !unique_owner(g)) ? g.clone() : std::move(g);
    if (slot.requires_grad()) slot = slot.detach();
    return;
  }
  if (!unique_owner(slot)) slot = slot.clone();
  slot.add_(g);
}

bool all_finite(const Tensor& t) {
  if (t.dtype() == Dtype::Float32) {
    const float* p = t.data<float>();
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i)
      if (!std::isfinite(p[i])) return false;
  } else if (t.dtype() == Dtype::Float64) {
    const double* p = t.data<double>();
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i)
      if (!std::isfinite(p[i])) return false;
  }
  return true;
}

}  // namespace

bool grad_mode_enabled() { return g_grad_mode; }
void set_grad_mode(bool enabled) { g_grad_mode = enabled; }
bool anomaly_mode_enabled() { return g_anomaly; }
void set_anomaly_mode(bool enabled) { g_anomaly = enabled; }

RecordSiteGuard::RecordSiteGuard(std::string site) : prev_(g_site) {
  if (g_anomaly) g_site = prev_.empty() ? std::move(site) : prev_ + "/" + site;
}
RecordSiteGuard::~RecordSiteGuard() {
  if (g_anomaly) g_site = prev_;
}

Edge::Edge(const Tensor& t, bool track_version) {
  if (!t.defined()) return;  // an absent input (no bias): no edge
  if (t.requires_grad()) meta = t.impl()->autograd;
  dtype = t.dtype();
  if (track_version) {
    storage = t.impl()->storage;
    version = t.impl()->storage->version();
  }
  const Shape& s = t.shape();
  rank_ = s.size();
  if (rank_ <= kInlineRank)
    std::copy(s.begin(), s.end(), dims_);
  else
    big_ = s;
}

bool Edge::same_shape(const Shape& s) const {
  if (s.size() != rank_) return false;
  return rank_ <= kInlineRank ? std::equal(s.begin(), s.end(), dims_) : s == big_;
}

Shape Edge::shape() const { return rank_ <= kInlineRank ? Shape(dims_, dims_ + rank_) : big_; }

void release_autograd(std::shared_ptr<AutogradMeta>& m) noexcept {
  if (!m) return;
  Node* node = m->grad_fn;
  if (!node || m.use_count() != 1) {  // a leaf's state, or not the last handle: no chain behind it
    m.reset();
    return;
  }
  node->teardown_self = std::move(m);  // the node keeps itself alive until its turn
  node->teardown_next = g_dead_head;
  g_dead_head = node;
  if (g_tearing_down) return;  // the loop below, further up this stack, destroys it
  g_tearing_down = true;
  while (g_dead_head) {
    Node* n = g_dead_head;
    g_dead_head = n->teardown_next;
    std::shared_ptr<AutogradMeta> last = std::move(n->teardown_self);
    last.reset();  // destroys n; its inputs queue up here instead of recursing
  }
  g_tearing_down = false;
}

TensorImpl::~TensorImpl() { release_autograd(autograd); }

Node::~Node() {
  if (on_release) {
    try {
      (*on_release)(reached);
    } catch (...) {  // a destructor: nothing may escape
    }
  }
  for (std::size_t i = 0; i < n_inputs_; ++i) release_autograd(input(i).meta);
}

void Node::set_inputs(const Tensor* inputs, std::size_t n, bool track_versions) {
  n_inputs_ = n;
  if (n > kInlineInputs) more_.resize(n - kInlineInputs);
  for (std::size_t i = 0; i < n; ++i) input(i) = Edge(inputs[i], track_versions);
}

namespace {
[[noreturn]] void throw_modified(const Node& node, const std::string& what, const Shape& shape, Dtype dtype,
                                 std::uint64_t recorded, std::uint64_t now) {
  throw std::logic_error("backward: " + what + " of '" + node.name + "' (" + shape_str(shape) + " " +
                         dtype_name(dtype) + "), which its backward reads, was modified by an in-place operation "
                         "after the op was recorded (version " + std::to_string(recorded) + ", now " +
                         std::to_string(now) + "); write into a clone, or make the change before the forward" +
                         (node.where.empty() ? std::string() : "; the op was recorded at: " + node.where));
}

// Like PyTorch's saved-tensor version check: an input or output whose storage is still
// alive (the backward closure holds it) must be at the version it had when recorded.
void check_versions(Node& node) {
  for (std::size_t i = 0; i < node.num_inputs(); ++i) {
    Edge& e = node.input(i);
    if (auto st = e.storage.lock(); st && st->version() != e.version)
      throw_modified(node, "input " + std::to_string(i), e.shape(), e.dtype, e.version, st->version());
  }
  if (auto st = node.out_storage.lock(); st && st->version() != node.out_version)
    throw_modified(node, "output 0", node.grad.defined() ? node.grad.shape() : Shape{},
                   node.grad.defined() ? node.grad.dtype() : Dtype::Float32, node.out_version, st->version());
}
}  // namespace

bool GradSink::needs(std::size_t i) const {
  return i < node_->num_inputs() && node_->input(i).meta != nullptr;
}

Shape GradSink::input_shape(std::size_t i) const { return node_->input(i).shape(); }

void GradSink::add(std::size_t i, Tensor g) {
  if (!needs(i)) return;
  Edge& edge = node_->input(i);
  if (!edge.same_shape(g.shape()) || g.dtype() != edge.dtype)
    throw std::logic_error(std::string("backward of '") + node_->name + "' produced a gradient of shape " +
                           shape_str(g.shape()) + " " + dtype_name(g.dtype()) + " for input " + std::to_string(i) +
                           " of shape " + shape_str(edge.shape()) + " " + dtype_name(edge.dtype));
  if (g_anomaly && !all_finite(g))
    throw std::runtime_error(std::string("anomaly: the backward of '") + node_->name +
                             "' produced a non-finite (NaN or Inf) gradient for input " + std::to_string(i) + " (" +
                             shape_str(g.shape()) + " " + dtype_name(g.dtype()) + "); the op was recorded at: " +
                             (node_->where.empty() ? "<unknown: recorded while anomaly mode was off>" : node_->where));
  AutogradMeta& meta = *edge.meta;
  if (meta.grad_fn && meta.grad_fn->tape_id != tape_id_)
    throw std::logic_error(std::string("backward: input ") + std::to_string(i) + " of '" + node_->name +
                           "' was produced by '" + meta.grad_fn->name +
                           "', recorded on another thread's tape; run the backward on the thread that recorded "
                           "the graph (or detach() the tensor before handing it to another thread)");
  if (meta.grad_fn && meta.grad_fn->freed)  // a new head on a graph an earlier backward freed
    throw std::logic_error(std::string("backward: trying to backward through the graph a second time (node '") +
                           meta.grad_fn->name + "', input " + std::to_string(i) + " of '" + node_->name +
                           "', was freed by an earlier backward); pass retain_graph=true to the first");
  if (meta.grad_fn) {
    accumulate(meta.grad_fn->grad, std::move(g), false);
  } else if (g_pending_leaves) {  // committed to meta.grad once the backward succeeds
    if (!meta.pending_grad.defined()) g_pending_leaves->push_back(edge.meta);
    accumulate(meta.pending_grad, std::move(g), false);
  } else {
    accumulate(meta.grad, std::move(g), true);
  }
}

namespace autograd {

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!g_grad_mode) return false;
  for (const Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!g_grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

namespace detail {
void attach(const char* name, Tensor& out, const Tensor* inputs, std::size_t n, std::shared_ptr<Node> node,
            unsigned saves) {
  node->name = name;
  node->set_inputs(inputs, n, (saves & kSavesInputs) != 0);
  node->seq = g_tape.next_seq++;
  node->tape_id = g_tape.id;
  if (saves & kSavesOutput) {
    node->out_storage = out.impl()->storage;
    node->out_version = out.impl()->storage->version();
  }
  if (g_anomaly) node->where = (g_site.empty() ? std::string("top level (outside any module)") : g_site) + ": " + name;
  node->out_meta.grad_fn = node.get();
  g_tape.entries.push_back({node->seq, node});
  if (g_tape.entries.size() >= g_tape.compact_at) g_tape.compact();
  // the output's state lives in the node: holding it holds the node
  AutogradMeta* meta = &node->out_meta;
  out.impl()->autograd = std::shared_ptr<AutogradMeta>(std::move(node), meta);
}
}  // namespace detail

void set_post_accumulate_grad_hook(const Tensor& leaf, std::function<void()> hook) {
  if (!leaf.defined() || !leaf.requires_grad() || !leaf.is_leaf())
    throw std::logic_error("set_post_accumulate_grad_hook: expected a leaf tensor that requires grad");
  AutogradMeta& m = *leaf.impl()->autograd;
  const bool had = static_cast<bool>(m.post_accumulate_grad_hook);
  m.post_accumulate_grad_hook = std::move(hook);
  g_hooked_leaves += (m.post_accumulate_grad_hook ? 1 : 0) - (had ? 1 : 0);
}

void on_graph_released(const Tensor& output, std::function<void(bool reached)> callback) {
  if (!output.defined() || !output.requires_grad() || !output.impl()->autograd->grad_fn)
    throw std::logic_error("on_graph_released: expected the output of a recorded op (a tensor with a grad_fn)");
  Node& node = *output.impl()->autograd->grad_fn;
  if (!callback) return;
  if (!node.on_release) {
    node.on_release = std::make_unique<std::function<void(bool)>>(std::move(callback));
    return;
  }
  auto first = std::move(*node.on_release);
  *node.on_release = [first = std::move(first), second = std::move(callback)](bool reached) {
    first(reached);
    second(reached);
  };
}

std::size_t tape_size() {
  std::size_t n = 0;
  for (auto& e : g_tape.entries) {
    auto p = e.node.lock();
    if (p && !p->freed) ++n;
  }
  return n;
}

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  if (!root.defined()) throw std::logic_error("backward: the tensor is undefined");
  if (!root.requires_grad())
    throw std::logic_error("backward: the tensor does not require grad and has no grad_fn "
                           "(did you compute it under NoGradGuard, or forget requires_grad_()?)");
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
  AutogradMeta& rmeta = *root.impl()->autograd;
  if (!rmeta.grad_fn) {  // a leaf: its gradient is the seed
    accumulate(rmeta.grad, seed, true);
    return;
  }
  std::shared_ptr<Node> rnode(root.impl()->autograd, rmeta.grad_fn);
  if (rnode->freed)
    throw std::logic_error(std::string("backward: trying to backward through the graph a second time (node '") +
                           rnode->name + "' was freed by an earlier backward); pass retain_graph=true to the first");
  auto& entries = g_tape.entries;
  auto it = std::lower_bound(entries.begin(), entries.end(), rnode->seq,
                             [](const TapeEntry& e, std::uint64_t s) { return e.seq < s; });
  // Sequence numbers are per thread: also compare the node, so another thread's graph is
  // never mistaken for an entry of this tape.
  if (it == entries.end() || it->seq != rnode->seq || it->node.lock() != rnode)
    throw std::logic_error("backward: the graph was recorded on another thread's tape");
  accumulate(rnode->grad, seed, false);

  NoGradGuard no_grad;  // backward closures compute plain values
  // Post-accumulate-grad hooks: count, per hooked leaf, the nodes reachable from the root
  // that feed it; each one that has run (or was skipped) counts down, and the leaf's hook
  // fires at zero. Only done while some hook is set.
  std::unordered_set<const Node*> reach;
  if (g_hooked_leaves.load(std::memory_order_relaxed) > 0) {
    reach.insert(rnode.get());
    for (std::ptrdiff_t i = it - entries.begin(); i >= 0; --i) {
      std::shared_ptr<Node> node = entries[static_cast<std::size_t>(i)].node.lock();
      if (!node || node->freed || !reach.count(node.get())) continue;
      for (std::size_t k = 0; k < node->num_inputs(); ++k) {
        AutogradMeta* m = node->input(k).meta.get();
        if (m && m->grad_fn) reach.insert(m->grad_fn);
      }
      for_hooked_leaves(*node, [](AutogradMeta& m) { m.hook_pending = 0; });
    }
    for (const Node* n : reach) for_hooked_leaves(*const_cast<Node*>(n), [](AutogradMeta& m) { ++m.hook_pending; });
  }
  auto count_down = [&](Node& node) {
    if (reach.empty() || !reach.count(&node)) return;
    for_hooked_leaves(node, [](AutogradMeta& m) {
      if (--m.hook_pending != 0) return;
      // Final for this backward: committed now, not at the backward's end, so that the hook
      // (data-parallel reduction) sees it while the rest of the backward runs. Only hooked
      // leaves are committed early; a backward that throws later keeps their gradient.
      if (m.pending_grad.defined()) {
        accumulate(m.grad, std::move(m.pending_grad), true);
        m.pending_grad = Tensor();
      }
      m.post_accumulate_grad_hook();
    });
  };
  const std::ptrdiff_t start = it - entries.begin();
  // Leaf gradients wait in pending_grad until every node has run: a backward that throws
  // (anomaly, in-place modification, another thread's graph) leaves no gradient behind,
  // on the leaves or on the live graph, for a later backward to pick up.
  thread_local std::vector<std::shared_ptr<AutogradMeta>> pending;
  auto* outer = g_pending_leaves;
  const std::size_t pending_base = pending.size();  // a backward run from inside a backward
  g_pending_leaves = &pending;
  try {
    for (std::ptrdiff_t i = start; i >= 0; --i) {
      std::shared_ptr<Node> node = entries[static_cast<std::size_t>(i)].node.lock();
      if (!node) continue;
      if (!node->grad.defined()) {
        count_down(*node);
        continue;
      }
      if (node->freed)
        throw std::logic_error(std::string("backward: trying to backward through the graph a second time (node '") +
                               node->name + "' was freed by an earlier backward); pass retain_graph=true to the first");
      check_versions(*node);
      Tensor g = std::move(node->grad);
      node->grad = Tensor();
      GradSink sink(node.get(), g_tape.id);
      node->apply(g, sink);
      node->reached = true;
      count_down(*node);
      if (!retain_graph) {
        node->freed = true;
        node->release();  // drops the saved tensors
      }
    }
  } catch (...) {
    g_pending_leaves = outer;
    for (std::size_t k = pending_base; k < pending.size(); ++k) pending[k]->pending_grad = Tensor();
    pending.resize(pending_base);
    for (std::ptrdiff_t i = std::min<std::ptrdiff_t>(start, static_cast<std::ptrdiff_t>(entries.size()) - 1); i >= 0;
         --i)
      if (auto node = entries[static_cast<std::size_t>(i)].node.lock()) node->grad = Tensor();
    throw;
  }
  g_pending_leaves = outer;
  for (std::size_t k = pending_base; k < pending.size(); ++k) {
    AutogradMeta& m = *pending[k];
    if (!m.pending_grad.defined()) continue;  // a hooked leaf, committed when it was final
    accumulate(m.grad, std::move(m.pending_grad), true);
    m.pending_grad = Tensor();
  }
  pending.resize(pending_base);
  if (!retain_graph) g_tape.compact();
}

}  // namespace autograd
}  // namespace tapegrad
