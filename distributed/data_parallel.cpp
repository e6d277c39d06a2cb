// DistributedDataParallel: the wrapper that drives its parts per step. The reducer
// (ddp_reducer.h) buckets and averages the gradients, the step check (ddp_step_check.h)
// compares what every rank is about to do, the buffer sync (ddp_buffer_sync.h) copies rank
// 0's buffers, and scoped timers (ddp_profile.h) measure them. This file decides when each
// runs: in forward(), from the gradient hooks, in finish().
#include <tapegrad/distributed/data_parallel.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include <tapegrad/core/autograd.h>
#include <tapegrad/distributed/comm.h>
#include <tapegrad/distributed/ddp_buffer_sync.h>
#include <tapegrad/distributed/ddp_profile.h>
#include <tapegrad/distributed/ddp_reducer.h>
#include <tapegrad/distributed/ddp_step_check.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/module_sync.h>
#include <tapegrad/optim/step_hooks.h>

namespace tapegrad::distributed {

// The step check and the buffer broadcast run on DDP's own communicator. A training step
// (train mode, grad mode, outside no_sync) waits for neither in its forward: the check
// completes at the step's first gradient hook or before any other collective of this
// process (detail::run_pending_checks), the broadcast is posted from that hook with rank 0's
// buffers as its forward left them and completes in finish().
struct DistributedDataParallel::State {
  State(layers::Module& m, std::vector<Tensor> reduced, std::vector<std::string> names, const DDPOptions& opts,
        bool is_mpi, MPI_Comm c)
      : options(opts),
        module(&m),
        params(reduced),
        mpi(is_mpi),
        comm(c),
        reducer(reduced, opts, is_mpi, c, seconds, prof),
        check(reduced, std::move(names), c, seconds),
        buffers(m, c, seconds) {
    for (const Tensor& p : params) param_ids.insert(p.impl().get());
  }
  DDPOptions options;
  layers::Module* module;                           // the wrapped module (DistributedDataParallel::module_)
  std::vector<Tensor> params;                       // the reduced ones (requires_grad at construction)
  std::unordered_set<const TensorImpl*> param_ids;  // which optimizer steps are this DDP's
  bool dirty = false;  // some hook fired since the last finish()
  bool no_sync = false;
  bool mpi;
  MPI_Comm comm;
  std::uint64_t step_hook = 0;
  detail::CommSeconds seconds;
  detail::Profile prof;
  bool in_step = false;  // a profiled forward started and finish() has not ended it
  detail::Reducer reducer;
  detail::StepCheck check;
  detail::BufferSync buffers;

  // Completes the posted check; on a mismatch forgets the step and throws on every rank.
  void resolve_check() {
    if (!check.pending()) return;
    detail::remove_pending_check(this);
    if (check.complete()) return;
    // forget the step's pending work (nothing of it was posted)
    buffers.set_deferred(false);
    dirty = false;
    reducer.reset();
    check.throw_mismatch();  // every rank saw the same hashes: all throw
  }
  // The step's check and buffers at its first gradient hook (or in finish()).
  void start_step_sync() {
    if (check.pending()) resolve_check();
    if (buffers.deferred()) buffers.post();
  }
  // The step check and buffer broadcast a forward posts (or completes) before it runs.
  void sync_before_forward() {
    if (!mpi) return;
    // the last forward's check when no backward completed it (this throws on a mismatch)
    resolve_check();
    buffers.complete();
    const bool training = module->is_training(), grad = grad_mode_enabled();
    // A forward that can lead to collectives (the broadcast in train mode; gradient reductions
    // in a backward whenever grad mode is on) is checked against the other ranks'.
    // An eval() forward under NoGradGuard communicates nothing and checks nothing.
    if (!training && !grad) return;
    const bool broadcast = options.broadcast_buffers && training;
    std::size_t total = 0;
    if (broadcast)
      for (const auto& b : module->buffers()) total += b.nbytes();
    // A training step (train mode, grad mode, outside no_sync) posts its check and goes on;
    // rank 0's buffers follow from its first gradient hook and are copied in finish(). Any
    // other forward completes the check before it runs, and a train-mode one copies rank 0's
    // buffers first (PyTorch's pre-forward broadcast); so does a training step after a
    // training forward that saw no backward and finish() (its buffers were never sent).
    const bool train_step = training && grad && !no_sync;
    const bool before = broadcast && (!train_step || buffers.deferred());
    buffers.set_deferred(false);
    check.post(*module, no_sync, reducer.sharded(), total, before);
    if (!train_step || before) {
      resolve_check();
      if (before) {
        buffers.post();
        buffers.complete();
      }
    } else {
      State* st = this;
      detail::add_pending_check(st, [st] { st->resolve_check(); });
    }
    if (train_step) buffers.set_deferred(broadcast, total);
  }
  void on_grad_final(std::size_t i) {
    // A gradient that carries a graph (backward with create_graph=true) would be averaged as
    // a value and lose its graph on one rank's copy: refused. autograd::grad(create_graph)
    // touches no .grad and runs no hook, so a gradient penalty built with it, then one plain
    // backward() of the total loss, is averaged as any step.
    if (params[i].grad().defined() && params[i].grad().requires_grad())
      throw std::logic_error("DistributedDataParallel: backward(create_graph=true) is not supported (parameter " +
                             std::to_string(i) + "'s gradient carries a graph); take the inner gradient with "
                             "autograd::grad(..., {.create_graph = true}) and call backward() once on the total loss");
    if (no_sync) return;
    if (check.pending() || buffers.deferred()) {
      detail::PhaseTimer phase(prof, detail::Profile::Sync);
      start_step_sync();
    }
    reducer.mark_final(i);
    dirty = true;
    reducer.launch_ready(false);
  }
};

DistributedDataParallel::DistributedDataParallel(layers::ModulePtr module, DDPOptions options)
    : module_(std::move(module)) {
  if (!module_) throw std::invalid_argument("DistributedDataParallel: the module is null");
  if (options.bucket_cap_bytes == 0) throw std::invalid_argument("DistributedDataParallel: bucket_cap_bytes must be > 0");
  const bool mpi = is_initialized() && world_size() > 1;
  // What the ranks will communicate must agree: the layout (parameters and buffers: names,
  // shapes, dtypes), which parameters are reduced (requires_grad) and the bucket capacity
  // (together they fix the buckets). Throws on every rank on a mismatch, before any transfer.
  if (mpi) {
    std::ostringstream os;
    os << layout_description(*module_);
    for (auto& [name, p] : module_->named_parameters())
      os << "param " << name << (p.requires_grad() ? " requires grad" : " frozen (requires_grad = false)") << "\n";
    os << "bucket_cap_bytes " << options.bucket_cap_bytes << "\n";
    os << "inplace_min_bytes " << options.inplace_min_bytes << "\n";
    os << "broadcast_buffers " << (options.broadcast_buffers ? "true" : "false") << "\n";
    const std::string mine = os.str();
    check_same_across_ranks(fnv1a(mine), [&] { return mine; },
                            "DistributedDataParallel: the model or its options differ across ranks (parameters, "
                            "buffers, requires_grad and DDPOptions must match)");
  }
  broadcast_state(*module_, 0);  // checks the layout first; throws on every rank on a mismatch
  std::vector<Tensor> params;
  std::vector<std::string> names;
  for (auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) {
      if (p.dtype() != Dtype::Float32 && p.dtype() != Dtype::Float64)
        throw std::invalid_argument("DistributedDataParallel: parameters must be float32 or float64");
      params.push_back(p);
      names.push_back(name);
    }
  const MPI_Comm comm = mpi ? detail::dup_world() : MPI_COMM_NULL;
  s_ = std::make_unique<State>(*module_, params, std::move(names), options, mpi, comm);
  State* st = s_.get();
  if (const char* v = std::getenv("TAPEGRAD_DDP_PROFILE"); v && *v && std::string(v) != "0") st->prof.on = true;
  for (std::size_t k = 0; k < params.size(); ++k)
    autograd::set_post_accumulate_grad_hook(params[k], [st, k] { st->on_grad_final(k); });
  // Only a step over this DDP's parameters must wait for finish(): another model's optimizer
  // may step meanwhile.
  st->step_hook = optim::hooks::add_step_hook([st](const std::vector<Tensor>& stepped) {
    if (!st->dirty) return;
    bool ours = false;
    for (const Tensor& p : stepped) ours = ours || (p.defined() && st->param_ids.count(p.impl().get()) != 0);
    if (ours)
      throw std::logic_error(
          "DistributedDataParallel: optimizer.step() before finish(): call ddp.finish() after loss.backward() so the "
          "gradients are averaged across ranks");
  });
}

DistributedDataParallel::~DistributedDataParallel() {
  State& s = *s_;
  s.prof.print(rank());
  optim::hooks::remove_step_hook(s.step_hook);
  for (auto& p : s.params) autograd::set_post_accumulate_grad_hook(p, {});
  detail::remove_pending_check(s_.get());
  int finalized = 0;
  if (s.mpi) MPI_Finalized(&finalized);
  if (s.mpi && !finalized) {  // (after MPI_Finalize there is nothing left to free)
    // every rank posted the check and the broadcast, so these complete
    s.check.drain();
    s.buffers.drain();
    s.reducer.drain();
    MPI_Comm_free(&s.comm);
  }
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  State& s = *s_;
  if (s.dirty)
    throw std::logic_error("DistributedDataParallel: forward() while the last backward's gradients are not averaged; "
                           "call finish() after loss.backward()");
  if (s.prof.on) {  // the time since the last finish() (or forward) is outside the step
    if (s.in_step) s.prof.current = detail::Profile::Outside;
    else s.prof.restart();
  }
  {
    detail::PhaseTimer phase(s.prof, detail::Profile::Sync);
    s.sync_before_forward();
  }
  if (s.prof.on) {
    s.prof.current = detail::Profile::Compute;
    s.in_step = module_->is_training() && grad_mode_enabled();
  }
  return (*module_)(x);
}

void DistributedDataParallel::finish() {
  State& s = *s_;
  if (s.no_sync) return;
  if (!s.dirty) {  // no gradient hook ran since the forward: its check and buffers are done here
    if (s.mpi) {
      s.start_step_sync();
      s.buffers.complete();
    }
    return;
  }
  s.reducer.launch_ready(true);
  if (s.mpi && s.buffers.in_flight()) {
    detail::PhaseTimer phase(s.prof, detail::Profile::Wait);
    detail::ScopedTimer t(s.seconds.wait);
    try {
      s.buffers.complete();  // every rank now holds rank 0's buffers
    } catch (...) {          // the ranks' buffers differ: every rank forgets the step and throws
      s.reducer.drain();
      s.reducer.reset();
      s.dirty = false;
      throw;
    }
  }
  s.reducer.wait_and_average();
  s.dirty = false;
  s.prof.current = detail::Profile::Outside;
  ++s.prof.steps;
}

std::vector<std::pair<Tensor, Tensor>> DistributedDataParallel::enable_sharding() {
  State& s = *s_;
  if (s.reducer.sharded())
    throw std::logic_error("DistributedDataParallel: a ZeroRedundancyOptimizer already shards this DDP");
  if (s.dirty) throw std::logic_error("DistributedDataParallel: shard between steps (after finish())");
  return s.reducer.enable_sharding();
}

bool DistributedDataParallel::shard_gradients_ready() const { return s_->reducer.shard_gradients_ready(); }

void DistributedDataParallel::allgather_parameters() {
  State& s = *s_;
  detail::PhaseTimer phase(s.prof, detail::Profile::Gather, s.mpi && s.in_step);
  s.reducer.allgather_parameters();
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.s_->no_sync) {
  ddp_.s_->no_sync = true;
}
DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.s_->no_sync = prev_; }

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_layout() const { return s_->reducer.layout(); }
double DistributedDataParallel::comm_seconds() const { return s_->seconds.comm; }
double DistributedDataParallel::wait_seconds() const { return s_->seconds.wait; }
std::size_t DistributedDataParallel::buckets_launched_in_backward() const { return s_->reducer.launched_in_backward(); }
std::size_t DistributedDataParallel::buckets_launched_in_finish() const { return s_->reducer.launched_in_finish(); }

}  // namespace tapegrad::distributed
