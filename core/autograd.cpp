#include "core/autograd.h"

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
struct Tape {
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

Edge::Edge(const Tensor& t) {
  if (!t.defined()) return;  // an absent input (no bias): no edge
  if (t.requires_grad()) meta = t.impl()->autograd;
  dtype = t.dtype();
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

void Node::set_inputs(const Tensor* inputs, std::size_t n) {
  n_inputs_ = n;
  if (n > kInlineInputs) more_.resize(n - kInlineInputs);
  for (std::size_t i = 0; i < n; ++i) input(i) = Edge(inputs[i]);
}

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
  if (meta.grad_fn && meta.grad_fn->freed)  // a new head on a graph an earlier backward freed
    throw std::logic_error(std::string("backward: trying to backward through the graph a second time (node '") +
                           meta.grad_fn->name + "', input " + std::to_string(i) + " of '" + node_->name +
                           "', was freed by an earlier backward); pass retain_graph=true to the first");
  if (meta.grad_fn)
    accumulate(meta.grad_fn->grad, std::move(g), false);
  else
    accumulate(meta.grad, std::move(g), true);
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
void attach(const char* name, Tensor& out, const Tensor* inputs, std::size_t n, std::shared_ptr<Node> node) {
  node->name = name;
  node->set_inputs(inputs, n);
  node->seq = g_tape.next_seq++;
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
      if (--m.hook_pending == 0) m.post_accumulate_grad_hook();
    });
  };
  for (std::ptrdiff_t i = it - entries.begin(); i >= 0; --i) {
    std::shared_ptr<Node> node = entries[static_cast<std::size_t>(i)].node.lock();
    if (!node) continue;
    if (!node->grad.defined()) {
      count_down(*node);
      continue;
    }
    if (node->freed)
      throw std::logic_error(std::string("backward: trying to backward through the graph a second time (node '") +
                             node->name + "' was freed by an earlier backward); pass retain_graph=true to the first");
    Tensor g = std::move(node->grad);
    node->grad = Tensor();
    GradSink sink(node.get());
    node->apply(g, sink);
    count_down(*node);
    if (!retain_graph) {
      node->freed = true;
      node->release();  // drops the saved tensors
    }
  }
  if (!retain_graph) g_tape.compact();
}

}  // namespace autograd
}  // namespace tapegrad
