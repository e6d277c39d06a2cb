#pragma once
// The autograd engine's internal state, shared by its source files (autograd.cpp records,
// autograd_engine.cpp runs backward passes, autograd_grad.cpp answers autograd::grad).
// Everything here is in autograd::detail: not part of the API.
#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <tapegrad/core/autograd.h>

namespace tapegrad::autograd::detail {

// One recorded node, weakly: a node lives as long as the tensor it produced (or a later
// node that consumes it).
struct TapeEntry {
  std::uint64_t seq;
  std::weak_ptr<Node> node;
};

// The calling thread's tape, in recording order; dead entries are compacted away. While a
// backward runs, compaction waits for the outermost one to end (entries are only appended,
// so every index a running backward holds stays valid).
struct Tape {
  std::uint64_t id;  // unique over the process's life (addresses are reused)
  std::vector<TapeEntry> entries;
  std::uint64_t next_seq = 1;
  std::size_t compact_at = 4096;
  int running = 0;  // backwards running on this thread (nested ones from hooks or closures)
  bool compact_deferred = false;
  Tape();
  void compact();
};

// What a backward pass in progress asks of GradSink (one per pass; nested passes stack).
struct Pass {
  bool create_graph = false;  // record the backward (grad mode on in the closures)
  // autograd::grad: the states through which a requested gradient flows (null: all), and
  // the requested inputs with the gradients collected for them (leaves route there).
  const std::unordered_set<const AutogradMeta*>* wanted = nullptr;
  std::unordered_map<const AutogradMeta*, std::size_t>* targets = nullptr;
  std::vector<Tensor>* captured = nullptr;
  // Leaves that received a gradient in this pass (committed to .grad at its end).
  std::vector<std::shared_ptr<AutogradMeta>>* pending_leaves = nullptr;
};

Tape& tape();                                // this thread's
Pass*& current_pass();                       // this thread's pass in progress (or null)
std::atomic<std::int64_t>& hooked_leaves();  // leaves with a post-accumulate-grad hook
// slot += g without writing into memory someone else can still see; in a create_graph
// pass, out of place and recorded.
void accumulate(Tensor& slot, Tensor g, bool leaf, bool create_graph);
bool all_finite(const Tensor& t);
// The saved-tensor version check of a node about to run (throws std::logic_error).
void check_versions(Node& node);

// autograd::grad's request: the inputs whose gradients are collected (instead of .grad).
struct Request {
  std::vector<const AutogradMeta*> inputs;  // one per requested input
  bool allow_unused = false;
  std::vector<Tensor> captured;  // filled by execute(), one per input (undefined if unreached)
};

// One backward pass from the n `roots` seeded with `seeds` (shapes checked by the caller):
// into the leaves' .grad, or into request->captured when a request is given.
void execute(const Tensor* roots, const Tensor* seeds, std::size_t n, bool retain_graph, bool create_graph,
             Request* request);

}  // namespace tapegrad::autograd::detail
