#include <tapegrad/distributed/data_parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include <tapegrad/core/autograd.h>
#include <tapegrad/distributed/comm.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/module_sync.h>
#include <tapegrad/optim/step_hooks.h>

namespace tapegrad::distributed {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// TAPEGRAD_DDP_PROFILE=1: where a rank's step time goes, wall and CPU seconds per phase,
// printed to stderr by ~DistributedDataParallel. Phases: "sync" the step check and buffer
// broadcast (posting them in the forward; completing the check and posting the broadcast at
// the first gradient hook); "compute" forward + loss + backward (hooks' own work excluded);
// "launch" packing gradients into buckets and starting their reductions (from hooks and
// finish); "progress" MPI_Test calls in hooks; "wait" blocked in finish(); "unpack" writing
// the averaged gradients back; "outside" from finish() to the next forward (the optimizer
// step, zero_grad, loss.item(), data loading) except "allgather", ZeroRedundancyOptimizer's
// allgather of the parameters (packing, MPI, waiting, unpacking).
struct Profile {
  enum Phase { Sync, Compute, Launch, Progress, Wait, Unpack, Outside, Gather, kPhases };
  static constexpr const char* kNames[kPhases] = {"sync",   "compute", "launch",  "progress",
                                                  "wait",   "unpack",  "outside", "allgather"};
  bool on = false;
  double wall[kPhases] = {}, cpu[kPhases] = {};
  double mark_wall = 0, mark_cpu = 0;  // start of the phase in progress
  long steps = 0;
  void start() {
    mark_wall = now();
    mark_cpu = thread_cpu();
  }
  // Adds the time since the last mark to `p` and restarts the mark.
  void add(Phase p) {
    const double w = now(), c = thread_cpu();
    wall[p] += w - mark_wall;
    cpu[p] += c - mark_cpu;
    mark_wall = w;
    mark_cpu = c;
  }
  void print(int rank) const {
    if (!on || steps == 0) return;
    std::string line = "rank " + std::to_string(rank) + ": DDP profile over " + std::to_string(steps) +
                       " steps, ms per step wall/CPU:";
    char buf[96];
    for (int k = 0; k < kPhases; ++k) {
      std::snprintf(buf, sizeof buf, " %s %.3f/%.3f", kNames[k], 1e3 * wall[k] / steps, 1e3 * cpu[k] / steps);
      line += buf;
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
};

}  // namespace

struct DistributedDataParallel::State {
  struct Bucket {
    std::vector<std::size_t> params;  // indices into `params`
    Dtype dtype = Dtype::Float32;
    std::int64_t numel = 0;
    std::vector<char> flat;  // the packed gradients (allocated on first use by an in-place bucket)
    bool inplace = false;    // one parameter of >= DDPOptions::inplace_min_bytes
    Tensor inflight;         // the gradient being reduced in its own memory (inplace, this step)
    std::size_t ready = 0;  // gradients final in this backward
    bool launched = false;
    MPI_Request request = MPI_REQUEST_NULL;
    // ZeRO-1 (enable_sharding): the bucket's flat range is cut into world_size contiguous
    // chunks (counts, displs in elements); rank r receives the sum of chunk r in shard_grad.
    std::vector<int> counts, displs;
    Tensor shard_grad;
  };
  DDPOptions options;
  layers::Module* module = nullptr;  // the wrapped module (DistributedDataParallel::module_)
  std::vector<Tensor> params;
  std::vector<std::string> param_names;            // per parameter (for the step check's message)
  std::unordered_set<const TensorImpl*> param_ids;  // which optimizer steps are this DDP's
  std::vector<unsigned char> step_flags;            // the per-step check's state (reused)
  std::vector<std::size_t> bucket_of, offset_of;  // per parameter
  std::vector<char> param_ready;
  std::vector<Bucket> buckets;
  // The step check (an 8-byte allgather of step_hash on `comm`, posted by every forward that
  // can lead to collectives) and the buffer broadcast (MPI_Ibcast of rank 0's buffers on
  // `comm`). A training step (train mode, grad mode, outside no_sync) waits for neither in
  // its forward: the check completes at the step's first gradient hook or before any other
  // collective of this process (detail::run_pending_checks), the broadcast is posted from
  // that hook with rank 0's buffers as its forward left them and completes in finish().
  MPI_Request check_req = MPI_REQUEST_NULL;
  std::uint64_t check_hash = 0;
  std::size_t check_total = 0;              // buffer bytes of the checked step (its description)
  std::vector<std::uint64_t> check_recv;    // every rank's hash
  bool check_pending = false;               // posted, not yet compared
  bool buffers_deferred = false;            // this step's buffers are still to be posted
  std::vector<Tensor> buffers;              // the module's buffers (of the step being synchronised)
  std::vector<char> buffer_bytes;           // the buffers packed for the broadcast
  MPI_Request buffer_req = MPI_REQUEST_NULL;
  bool buffers_in_flight = false;           // posted; rank != 0 unpacks them when complete
  std::size_t next_launch = 0;
  bool sharded = false;       // ZeRO-1: buckets are reduce-scattered into shard_grad
  bool shard_fresh = false;   // finish() wrote this step's averaged shard gradients
  bool dirty = false;  // some hook fired since the last finish()
  bool no_sync = false;
  bool mpi = false;
  MPI_Comm comm = MPI_COMM_NULL;
  std::uint64_t step_hook = 0;
  double comm_s = 0, wait_s = 0;
  std::size_t in_backward = 0, in_finish = 0;
  Profile prof;
  bool in_step = false;  // a profiled forward started and finish() has not ended it

  void launch(Bucket& b) {
    const std::size_t es = dtype_size(b.dtype);
    void* data = nullptr;
    if (b.inplace) {
      // A large gradient is reduced where it is, without the two copies through `flat`,
      // when only this parameter holds its memory (the engine gives every leaf gradient its
      // own storage; anything else, or an unused parameter, takes the packed path).
      const Tensor& p = params[b.params[0]];
      Tensor g = p.grad();  // (a parameter frozen since construction keeps its stale gradient: packed path)
      if (p.requires_grad() && g.defined() && g.dtype() == b.dtype && g.numel() == b.numel && g.impl()->storage.use_count() == 1) {
        b.inflight = std::move(g);
        data = b.inflight.raw_data();
      }
    }
    if (!data) {
      b.flat.resize(static_cast<std::size_t>(b.numel) * es);
      data = b.flat.data();
    }
    for (std::size_t i : b.params) {
      if (b.inflight.defined()) break;
      const Tensor g = params[i].grad();
      char* dst = b.flat.data() + offset_of[i] * es;
      if (g.defined())
        std::memcpy(dst, g.raw_data(), g.nbytes());
      else
        std::memset(dst, 0, params[i].nbytes());
    }
    b.launched = true;
    if (sharded && !mpi) {  // a world of one: this rank's chunk is everything
      std::memcpy(b.shard_grad.raw_data(), data, static_cast<std::size_t>(b.numel) * es);
      return;
    }
    if (!mpi) return;
    const double t0 = now();
    const MPI_Datatype type = b.dtype == Dtype::Float64 ? MPI_DOUBLE : MPI_FLOAT;
    if (sharded)
      detail::check(MPI_Ireduce_scatter(data, b.shard_grad.raw_data(), b.counts.data(), type, MPI_SUM, comm, &b.request),
                    "MPI_Ireduce_scatter");
    else
      detail::check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(b.numel), type, MPI_SUM, comm, &b.request),
                    "MPI_Iallreduce");
    comm_s += now() - t0;
  }

  // Launches, in bucket order, every bucket that is ready (or all, when `all`).
  void launch_ready(bool all) {
    while (next_launch < buckets.size()) {
      Bucket& b = buckets[next_launch];
      if (!all && b.ready < b.params.size()) break;
      launch(b);
      ++(all ? in_finish : in_backward);
      ++next_launch;
    }
    if (prof.on) prof.add(Profile::Launch);
    if (mpi && next_launch > 0) {  // lets MPI progress the reductions already in flight
      const double t0 = now();
      for (std::size_t k = 0; k < next_launch; ++k) {
        int done = 0;
        if (buckets[k].request != MPI_REQUEST_NULL) MPI_Test(&buckets[k].request, &done, MPI_STATUS_IGNORE);
      }
      comm_s += now() - t0;
    }
    if (prof.on) prof.add(Profile::Progress);
  }

  // What this rank is about to do in a step, compared across ranks before the step's first
  // gradient reduction: mode, grad mode, gradient sync (no_sync), whether the buffers are
  // copied before the forward, requires_grad of every parameter, reduce-scatter (ZeRO-1) or
  // allreduce, and the bytes of buffers broadcast. A rank that differs would post other
  // collectives than the others (a hang, or reductions of mismatched buffers): every rank
  // throws instead. Leaves the flags in step_flags (the description of a mismatch).
  std::uint64_t step_hash(const layers::Module& module, std::size_t broadcast_bytes, bool before) {
    step_flags.clear();
    step_flags.push_back(module.is_training() ? 1 : 0);
    step_flags.push_back(grad_mode_enabled() ? 1 : 0);
    step_flags.push_back(no_sync ? 1 : 0);
    step_flags.push_back(before ? 1 : 0);
    for (const Tensor& p : params) step_flags.push_back(p.requires_grad() ? 1 : 0);
    step_flags.push_back(sharded ? 1 : 0);
    return fnv1a(&broadcast_bytes, sizeof broadcast_bytes, fnv1a(step_flags.data(), step_flags.size()));
  }
  // Collective (on the world communicator); throws on every rank naming the differences of
  // the checked step (step_flags as step_hash left them).
  [[noreturn]] void throw_step_mismatch() {
    check_same_across_ranks(
        check_hash,
        [&] {
          std::ostringstream os;
          os << "mode " << (step_flags[0] ? "train()" : "eval()") << "\n";
          os << "grad mode " << (step_flags[1] ? "on" : "off (NoGradGuard)") << "\n";
          os << "gradient averaging " << (step_flags[2] ? "off (inside no_sync())" : "on") << "\n";
          os << "buffers copied " << (step_flags[3] ? "before the forward" : "in finish()") << "\n";
          for (std::size_t k = 0; k < params.size(); ++k)
            os << "param " << param_names[k] << (step_flags[4 + k] ? " requires grad" : " frozen (requires_grad = false)")
               << "\n";
          os << "gradients "
             << (step_flags[4 + params.size()] ? "reduce-scattered (ZeroRedundancyOptimizer)" : "allreduced") << "\n";
          os << "buffers broadcast " << check_total << " bytes\n";
          return os.str();
        },
        "DistributedDataParallel: the ranks disagree on what this step does (every rank must use the same mode, "
        "grad mode, no_sync, requires_grad and ZeroRedundancyOptimizer)");
    throw std::logic_error("DistributedDataParallel: step hashes differ across ranks");  // not reached
  }

  // Posts this step's check (every rank posts one per forward that can lead to collectives,
  // whatever it then does, so the check itself always matches).
  void post_check(const layers::Module& module, std::size_t total, bool before) {
    check_hash = step_hash(module, total, before);
    check_total = total;
    check_recv.resize(static_cast<std::size_t>(world_size()));
    const double t0 = now();
    detail::check(MPI_Iallgather(&check_hash, 1, MPI_UINT64_T, check_recv.data(), 1, MPI_UINT64_T, comm, &check_req),
                  "MPI_Iallgather");
    comm_s += now() - t0;
    check_pending = true;
  }
  // Completes the posted check; on a mismatch forgets the step and throws on every rank.
  void resolve_check() {
    if (!check_pending) return;
    check_pending = false;
    detail::remove_pending_check(this);
    const double t0 = now();
    detail::wait(check_req, "MPI_Iallgather");
    comm_s += now() - t0;
    for (std::uint64_t h : check_recv)
      if (h != check_hash) {
        reset_step();
        throw_step_mismatch();  // every rank saw the same hashes: all throw
      }
  }
  // Forgets a step's pending work after a failed check (nothing of it was posted).
  void reset_step() {
    buffers_deferred = false;
    dirty = false;
    std::fill(param_ready.begin(), param_ready.end(), 0);
    for (auto& b : buckets) b.ready = 0;
    next_launch = 0;
  }
  // Posts the broadcast of rank 0's buffers (as they are now: fetched again, in case the
  // forward replaced a buffer's tensor).
  void post_buffers() {
    buffers_deferred = false;
    buffers = module->buffers();
    std::size_t total = 0;
    for (const auto& b : buffers) total += b.nbytes();
    buffer_bytes.resize(total);
    if (rank() == 0) pack(buffers, buffer_bytes.data());
    const double t0 = now();
    detail::check(MPI_Ibcast(buffer_bytes.data(), static_cast<int>(total), MPI_BYTE, 0, comm, &buffer_req),
                  "MPI_Ibcast");
    comm_s += now() - t0;
    buffers_in_flight = true;
  }
  // Completes the broadcast and copies rank 0's buffers into this rank's.
  void complete_buffers() {
    if (!buffers_in_flight) return;
    const double t0 = now();
    detail::wait(buffer_req, "MPI_Ibcast");
    comm_s += now() - t0;
    buffers_in_flight = false;
    if (rank() != 0) unpack(buffers, buffer_bytes.data());
    buffers.clear();
  }
  // The step's check and buffers at its first gradient hook (or in finish()).
  void start_step_sync() {
    if (check_pending) resolve_check();
    if (buffers_deferred) post_buffers();
  }
  static void pack(const std::vector<Tensor>& buffers, char* dst) {
    for (const auto& b : buffers) {
      std::memcpy(dst, b.raw_data(), b.nbytes());
      dst += b.nbytes();
    }
  }
  static void unpack(std::vector<Tensor>& buffers, const char* src) {
    for (auto& b : buffers) {
      std::memcpy(b.raw_data(), src, b.nbytes());
      src += b.nbytes();
    }
  }

  void on_grad_final(std::size_t i) {
    if (no_sync) return;
    if (check_pending || buffers_deferred) {
      if (prof.on) prof.add(Profile::Compute);
      start_step_sync();
      if (prof.on) prof.add(Profile::Sync);
    }
    if (param_ready[i])
      throw std::logic_error(
          "DistributedDataParallel: a parameter's gradient was produced by a second backward before finish(); call "
          "finish() after each backward, or accumulate inside no_sync()");
    param_ready[i] = 1;
    dirty = true;
    ++buckets[bucket_of[i]].ready;
    if (prof.on) prof.add(Profile::Compute);
    launch_ready(false);
  }
};

DistributedDataParallel::DistributedDataParallel(layers::ModulePtr module, DDPOptions options)
    : module_(std::move(module)), s_(std::make_unique<State>()) {
  if (!module_) throw std::invalid_argument("DistributedDataParallel: the module is null");
  if (options.bucket_cap_bytes == 0) throw std::invalid_argument("DistributedDataParallel: bucket_cap_bytes must be > 0");
  State& s = *s_;
  s.options = options;
  s.module = module_.get();
  s.mpi = is_initialized() && world_size() > 1;
  if (const char* v = std::getenv("TAPEGRAD_DDP_PROFILE"); v && *v && std::string(v) != "0") s.prof.on = true;
  // What the ranks will communicate must agree: the layout (parameters and buffers: names,
  // shapes, dtypes), which parameters are reduced (requires_grad) and the bucket capacity
  // (together they fix the buckets). Throws on every rank on a mismatch, before any transfer.
  if (s.mpi) {
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
  for (auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) {
      s.params.push_back(p);
      s.param_names.push_back(name);
      s.param_ids.insert(p.impl().get());
    }
  const std::size_t P = s.params.size();
  s.bucket_of.assign(P, 0);
  s.offset_of.assign(P, 0);
  s.param_ready.assign(P, 0);
  // reverse parameter order, a new bucket at the capacity or a dtype change
  for (std::size_t k = P; k-- > 0;) {
    const Tensor& p = s.params[k];
    if (p.dtype() != Dtype::Float32 && p.dtype() != Dtype::Float64)
      throw std::invalid_argument("DistributedDataParallel: parameters must be float32 or float64");
    const bool inplace = p.nbytes() >= options.inplace_min_bytes;
    if (s.buckets.empty() || s.buckets.back().dtype != p.dtype() || s.buckets.back().inplace || inplace ||
        static_cast<std::size_t>(s.buckets.back().numel) * dtype_size(p.dtype()) >= options.bucket_cap_bytes) {
      s.buckets.emplace_back();
      s.buckets.back().dtype = p.dtype();
      s.buckets.back().inplace = inplace;
    }
    State::Bucket& b = s.buckets.back();
    s.bucket_of[k] = s.buckets.size() - 1;
    s.offset_of[k] = static_cast<std::size_t>(b.numel);
    b.params.push_back(k);
    b.numel += p.numel();
  }
  for (auto& b : s.buckets)
    if (!b.inplace) b.flat.resize(static_cast<std::size_t>(b.numel) * dtype_size(b.dtype));
  if (s.mpi) s.comm = detail::dup_world();
  for (std::size_t k = 0; k < P; ++k) {
    State* st = s_.get();
    autograd::set_post_accumulate_grad_hook(s.params[k], [st, k] { st->on_grad_final(k); });
  }
  // Only a step over this DDP's parameters must wait for finish(): another model's optimizer
  // may step meanwhile.
  s.step_hook = optim::hooks::add_step_hook([st = s_.get()](const std::vector<Tensor>& stepped) {
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
    if (s.check_req != MPI_REQUEST_NULL) MPI_Wait(&s.check_req, MPI_STATUS_IGNORE);
    if (s.buffer_req != MPI_REQUEST_NULL) MPI_Wait(&s.buffer_req, MPI_STATUS_IGNORE);
    for (auto& b : s.buckets)
      if (b.request != MPI_REQUEST_NULL) MPI_Wait(&b.request, MPI_STATUS_IGNORE);  // never throws here
    MPI_Comm_free(&s.comm);
  }
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  State& s = *s_;
  if (s.dirty)
    throw std::logic_error("DistributedDataParallel: forward() while the last backward's gradients are not averaged; "
                           "call finish() after loss.backward()");
  if (s.prof.on) {
    if (s.in_step) s.prof.add(Profile::Outside);  // from the last finish() to here
    else s.prof.start();
  }
  if (s.mpi) {
    // the last forward's check when no backward completed it (this throws on a mismatch)
    s.resolve_check();
    s.complete_buffers();
  }
  const bool training = module_->is_training(), grad = grad_mode_enabled();
  // A forward that can lead to collectives (the broadcast in train mode; gradient reductions
  // in a backward whenever grad mode is on) is checked against the other ranks' (step_hash).
  // An eval() forward under NoGradGuard communicates nothing and checks nothing.
  if (s.mpi && (training || grad)) {
    const bool broadcast = s.options.broadcast_buffers && training;
    std::size_t total = 0;
    if (broadcast)
      for (const auto& b : module_->buffers()) total += b.nbytes();
    // A training step (train mode, grad mode, outside no_sync) posts its check and goes on;
    // rank 0's buffers follow from its first gradient hook and are copied in finish(). Any
    // other forward completes the check before it runs, and a train-mode one copies rank 0's
    // buffers first (PyTorch's pre-forward broadcast); so does a training step after a
    // training forward that saw no backward and finish() (its buffers were never sent).
    const bool train_step = training && grad && !s.no_sync;
    const bool before = broadcast && (!train_step || s.buffers_deferred);
    s.buffers_deferred = false;
    s.post_check(*module_, total, before);
    if (!train_step || before) {
      s.resolve_check();
      if (before) {
        s.post_buffers();
        s.complete_buffers();
      }
    } else {
      State* st = s_.get();
      detail::add_pending_check(st, [st] { st->resolve_check(); });
    }
    if (train_step) s.buffers_deferred = broadcast;
  }
  if (s.prof.on) {
    s.prof.add(Profile::Sync);
    s.in_step = training && grad;
  }
  return (*module_)(x);
}

void DistributedDataParallel::finish() {
  State& s = *s_;
  if (s.no_sync) return;
  if (!s.dirty) {  // no gradient hook ran since the forward: its check and buffers are done here
    if (s.mpi) {
      s.start_step_sync();
      s.complete_buffers();
    }
    return;
  }
  if (s.prof.on) s.prof.add(Profile::Compute);
  s.launch_ready(true);
  if (s.mpi && s.buffers_in_flight) {
    const double t0 = now();
    s.complete_buffers();  // every rank now holds rank 0's buffers
    const double dt = now() - t0;
    s.wait_s += dt;
  }
  const double inv = 1.0 / static_cast<double>(world_size());
  for (auto& b : s.buckets) {
    if (s.mpi && b.request != MPI_REQUEST_NULL) {
      const double t0 = now();
      detail::wait(b.request, "MPI_Iallreduce");
      const double dt = now() - t0;
      s.comm_s += dt;
      s.wait_s += dt;
    }
    if (s.prof.on) s.prof.add(Profile::Wait);
    const std::size_t es = dtype_size(b.dtype);
    if (s.sharded) {  // only this rank's chunk was reduced: average it; .grad stays local
      b.shard_grad.mul_(inv);
      b.inflight = Tensor();
      b.ready = 0;
      b.launched = false;
      if (s.prof.on) s.prof.add(Profile::Unpack);
      continue;
    }
    const bool reduced_in_place = b.inflight.defined();
    if (reduced_in_place) {  // reduced in the gradient's own memory: divide in place
      Tensor& p = s.params[b.params[0]];
      b.inflight.mul_(inv);  // the whole gradient: the bucket's only parameter
      if (!p.grad().defined() || p.grad().raw_data() != b.inflight.raw_data()) p.set_grad(b.inflight);
      b.inflight = Tensor();
    }
    for (std::size_t i : b.params) {
      if (reduced_in_place) break;  // nothing was packed
      Tensor& p = s.params[i];
      if (!p.requires_grad()) continue;  // frozen since construction (on every rank: the step check)
      Tensor g = p.grad();
      if (!g.defined()) {
        g = Tensor::zeros(p.shape(), p.dtype());
        p.set_grad(g);
        g = p.grad();
      }
      const char* src = b.flat.data() + s.offset_of[i] * es;
      const std::int64_t n = p.numel();
      if (b.dtype == Dtype::Float64) {
        const double* a = reinterpret_cast<const double*>(src);
        double* o = g.data<double>();
        for (std::int64_t j = 0; j < n; ++j) o[j] = a[j] * inv;
      } else {
        const float* a = reinterpret_cast<const float*>(src);
        float* o = g.data<float>();
        const float f = static_cast<float>(inv);
        for (std::int64_t j = 0; j < n; ++j) o[j] = a[j] * f;
      }
    }
    b.ready = 0;
    b.launched = false;
    if (s.prof.on) s.prof.add(Profile::Unpack);
  }
  std::fill(s.param_ready.begin(), s.param_ready.end(), 0);
  s.next_launch = 0;
  s.dirty = false;
  s.shard_fresh = s.sharded;
  ++s.prof.steps;
}

std::vector<std::pair<Tensor, Tensor>> DistributedDataParallel::enable_sharding() {
  State& s = *s_;
  if (s.sharded) throw std::logic_error("DistributedDataParallel: a ZeroRedundancyOptimizer already shards this DDP");
  if (s.dirty) throw std::logic_error("DistributedDataParallel: shard between steps (after finish())");
  const int R = world_size(), me = rank();
  std::vector<std::pair<Tensor, Tensor>> pieces;
  for (auto& b : s.buckets) {
    const std::size_t es = dtype_size(b.dtype);
    b.counts.assign(static_cast<std::size_t>(R), 0);
    b.displs.assign(static_cast<std::size_t>(R), 0);
    for (int r = 0, at = 0; r < R; ++r) {
      const std::int64_t c = b.numel / R + (r < b.numel % R ? 1 : 0);
      if (c > std::numeric_limits<int>::max() - at)
        throw std::invalid_argument("DistributedDataParallel: a bucket of " + std::to_string(b.numel) +
                                    " elements exceeds MPI's int counts; lower bucket_cap_bytes");
      b.counts[static_cast<std::size_t>(r)] = static_cast<int>(c);
      b.displs[static_cast<std::size_t>(r)] = at;
      at += static_cast<int>(c);
    }
    const std::int64_t lo = b.displs[static_cast<std::size_t>(me)], hi = lo + b.counts[static_cast<std::size_t>(me)];
    b.shard_grad = Tensor::zeros({hi - lo}, b.dtype);
    for (std::size_t i : b.params) {  // this rank's piece of each parameter of the bucket
      const std::int64_t off = static_cast<std::int64_t>(s.offset_of[i]), n = s.params[i].numel();
      const std::int64_t a = std::max(lo, off), e = std::min(hi, off + n);
      if (a >= e) continue;
      Tensor piece = alias_with_shape(s.params[i], {e - a}, static_cast<std::size_t>(a - off) * es);
      piece.requires_grad_();
      Tensor g = alias_with_shape(b.shard_grad, {e - a}, static_cast<std::size_t>(a - lo) * es);
      piece.set_grad(g);
      pieces.emplace_back(piece, g);
    }
  }
  s.sharded = true;
  s.shard_fresh = false;
  return pieces;
}

bool DistributedDataParallel::shard_gradients_ready() const { return s_->shard_fresh; }

void DistributedDataParallel::allgather_parameters() {
  State& s = *s_;
  s.shard_fresh = false;
  if (!s.mpi) return;  // a world of one updated every element in place
  if (s.prof.on && s.in_step) s.prof.add(Profile::Outside);
  const int me = rank();
  const double t0 = now();
  std::vector<MPI_Request> reqs(s.buckets.size(), MPI_REQUEST_NULL);
  for (std::size_t k = 0; k < s.buckets.size(); ++k) {
    auto& b = s.buckets[k];
    const MPI_Datatype type = b.dtype == Dtype::Float64 ? MPI_DOUBLE : MPI_FLOAT;
    const std::size_t es = dtype_size(b.dtype);
    void* data = nullptr;
    if (b.inplace) {
      data = s.params[b.params[0]].raw_data();  // one parameter: its memory is the bucket
    } else {  // this rank's chunk of the values, packed at its place in the bucket
      const std::int64_t lo = b.displs[static_cast<std::size_t>(me)], hi = lo + b.counts[static_cast<std::size_t>(me)];
      for (std::size_t i : b.params) {
        const std::int64_t off = static_cast<std::int64_t>(s.offset_of[i]), n = s.params[i].numel();
        const std::int64_t a = std::max(lo, off), e = std::min(hi, off + n);
        if (a < e)
          std::memcpy(b.flat.data() + static_cast<std::size_t>(a) * es,
                      static_cast<const char*>(s.params[i].raw_data()) + static_cast<std::size_t>(a - off) * es,
                      static_cast<std::size_t>(e - a) * es);
      }
      data = b.flat.data();
    }
    detail::check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, b.counts.data(), b.displs.data(), type,
                                  s.comm, &reqs[k]),
                  "MPI_Iallgatherv");
  }
  for (std::size_t k = 0; k < s.buckets.size(); ++k) {
    detail::wait(reqs[k], "MPI_Iallgatherv");
    auto& b = s.buckets[k];
    if (b.inplace) continue;
    const std::size_t es = dtype_size(b.dtype);
    for (std::size_t i : b.params)
      std::memcpy(s.params[i].raw_data(), b.flat.data() + s.offset_of[i] * es, s.params[i].nbytes());
  }
  s.comm_s += now() - t0;
  if (s.prof.on && s.in_step) s.prof.add(Profile::Gather);
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.s_->no_sync) {
  ddp_.s_->no_sync = true;
}
DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.s_->no_sync = prev_; }

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_layout() const {
  std::vector<std::vector<std::size_t>> out;
  for (auto& b : s_->buckets) out.push_back(b.params);
  return out;
}
double DistributedDataParallel::comm_seconds() const { return s_->comm_s; }
double DistributedDataParallel::wait_seconds() const { return s_->wait_s; }
std::size_t DistributedDataParallel::buckets_launched_in_backward() const { return s_->in_backward; }
std::size_t DistributedDataParallel::buckets_launched_in_finish() const { return s_->in_finish; }

}  // namespace tapegrad::distributed
