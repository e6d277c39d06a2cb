#include <tapegrad/core/autograd.h>
#include <tapegrad/core/autograd_tape.h>
#include <tapegrad/core/mode_checks.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <cmath>
#include <stdexcept>

namespace tapegrad {
namespace autograd::detail {
namespace {
std::uint64_t new_tape_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

Tape::Tape() : id(new_tape_id()) {}

void Tape::compact() {
  if (running > 0) {
    compact_deferred = true;
    return;
  }
  compact_deferred = false;
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [](const TapeEntry& e) {
                                 auto n = e.node.lock();
                                 return !n || n->freed;
                               }),
                entries.end());
  compact_at = std::max<std::size_t>(4096, 2 * entries.size());
}

Tape& tape() {
  thread_local Tape t;
  return t;
}

Pass*& current_pass() {
  thread_local Pass* p = nullptr;
  return p;
}

std::atomic<std::int64_t>& hooked_leaves() {
  static std::atomic<std::int64_t> n{0};
  return n;
}

namespace {
bool unique_owner(const Tensor& t) {
  return t.impl().use_count() == 1 && t.impl()->storage.use_count() == 1;
}
}  // namespace

namespace {
// a + b for two gradients of one shape and dtype, out of place; recorded when either has a
// graph (its backward hands g to both). The engine's own op: no dependency on core/ops.
Tensor sum_of(const Tensor& a, const Tensor& b) {
  Tensor out = a.clone();
  {
    NoGradGuard ng;
    out.add_(b);
  }
  if (autograd::needs_grad({&a, &b}))
    autograd::record("accumulate_grad", out, {a, b}, [](const Tensor& g, GradSink& gs) {
      gs.add(0, g);
      gs.add(1, g);
    }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}
}  // namespace

void accumulate(Tensor& slot, Tensor g, bool leaf, bool create_graph) {
  if (create_graph) {  // recorded, out of place: the sum carries both graphs
    const EnableGradGuard eg;
    if (!slot.defined())
      slot = (leaf && !g.requires_grad() && !unique_owner(g)) ? g.clone() : std::move(g);
    else
      slot = sum_of(slot, g);
    return;
  }
  NoGradGuard ng;
  if (!slot.defined()) {
    slot = (leaf && !unique_owner(g)) ? g.clone() : std::move(g);
    if (slot.requires_grad()) slot = slot.detach();
    return;
  }
  if (slot.requires_grad()) {  // a gradient with a graph (an earlier create_graph pass): out of place, plain
    slot = sum_of(slot, g);
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
}  // namespace autograd::detail

namespace {
using autograd::detail::tape;

thread_local bool g_grad_mode = true;
thread_local bool g_anomaly = false;
thread_local std::string g_site;

// Iterative teardown: nodes whose last handle went away while another node was being
// destroyed wait here (an intrusive list, no allocation) instead of being destroyed
// inside it. Both are trivially destructible, so they stay usable during thread exit.
thread_local Node* g_dead_head = nullptr;
thread_local bool g_tearing_down = false;

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
  // a graph dropped while an exception unwinds (a rejected step) is not the mistake watched
  if (!train_forward_who.empty() && !reached && std::uncaught_exceptions() == 0) {
    try {
      report_train_forward_unreached(train_forward_who, train_forward_channels);
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

}  // namespace

// Like PyTorch's saved-tensor version check: an input or output whose storage is still
// alive (the backward closure holds it) must be at the version it had when recorded.
void autograd::detail::check_versions(Node& node) {
  for (std::size_t i = 0; i < node.num_inputs(); ++i) {
    Edge& e = node.input(i);
    if (auto st = e.storage.lock(); st && st->version() != e.version)
      throw_modified(node, "input " + std::to_string(i), e.shape(), e.dtype, e.version, st->version());
  }
  if (auto st = node.out_storage.lock(); st && st->version() != node.out_version)
    throw_modified(node, "output 0", node.grad.defined() ? node.grad.shape() : Shape{},
                   node.grad.defined() ? node.grad.dtype() : Dtype::Float32, node.out_version, st->version());
}

bool GradSink::needs(std::size_t i) const {
  if (i >= node_->num_inputs() || !node_->input(i).meta) return false;
  return !pass_ || !pass_->wanted || pass_->wanted->count(node_->input(i).meta.get()) != 0;
}

Tensor GradSink::output(const Tensor& saved) const {
  if (!pass_ || !pass_->create_graph || !owner_) return saved;
  auto impl = std::make_shared<TensorImpl>(*saved.impl());
  impl->autograd = std::shared_ptr<AutogradMeta>(*owner_, &node_->out_meta);  // holding it holds the node
  return Tensor(std::move(impl));
}

Shape GradSink::input_shape(std::size_t i) const { return node_->input(i).shape(); }

void GradSink::add(std::size_t i, Tensor g) {
  if (!needs(i)) return;
  Edge& edge = node_->input(i);
  if (!edge.same_shape(g.shape()) || g.dtype() != edge.dtype)
    throw std::logic_error(std::string("backward of '") + node_->name + "' produced a gradient of shape " +
                           shape_str(g.shape()) + " " + dtype_name(g.dtype()) + " for input " + std::to_string(i) +
                           " of shape " + shape_str(edge.shape()) + " " + dtype_name(edge.dtype));
  if (g_anomaly && !autograd::detail::all_finite(g))
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
  using autograd::detail::accumulate;
  const autograd::detail::Pass* pass = pass_;
  const bool create = pass && pass->create_graph;
  if (meta.grad_fn) {
    accumulate(meta.grad_fn->grad, std::move(g), false, create);
  } else if (pass && pass->targets) {  // autograd::grad: the leaf's share goes to the caller, not to .grad
    auto it = pass->targets->find(&meta);
    if (it != pass->targets->end()) accumulate((*pass->captured)[it->second], std::move(g), false, create);
  } else if (pass && pass->pending_leaves) {  // committed to meta.grad once the backward succeeds
    if (!meta.pending_grad.defined()) pass->pending_leaves->push_back(edge.meta);
    accumulate(meta.pending_grad, std::move(g), false, create);
  } else {
    accumulate(meta.grad, std::move(g), true, create);
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
  node->second_order = (saves & kSecondOrder) != 0;
  node->set_inputs(inputs, n, (saves & kSavesInputs) != 0);
  auto& g_tape = tape();
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
  autograd::detail::hooked_leaves() += (m.post_accumulate_grad_hook ? 1 : 0) - (had ? 1 : 0);
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

void watch_train_forward(const Tensor& output, const std::string& who, std::int64_t channels) {
  if (!output.defined() || !output.impl()->autograd || !output.impl()->autograd->grad_fn) return;
  Node& node = *output.impl()->autograd->grad_fn;
  node.train_forward_who = who;
  node.train_forward_channels = channels;
}

std::size_t tape_size() {
  std::size_t n = 0;
  for (auto& e : tape().entries) {
    auto p = e.node.lock();
    if (p && !p->freed) ++n;
  }
  return n;
}

}  // namespace autograd
}  // namespace tapegrad
