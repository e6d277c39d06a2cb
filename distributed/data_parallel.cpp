#include <tapegrad/distributed/data_parallel.h>

#include <chrono>
#include <cstring>
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

}  // namespace

struct DistributedDataParallel::State {
  struct Bucket {
    std::vector<std::size_t> params;  // indices into `params`
    Dtype dtype = Dtype::Float32;
    std::int64_t numel = 0;
    std::vector<char> flat;
    std::size_t ready = 0;  // gradients final in this backward
    bool launched = false;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  DDPOptions options;
  std::vector<Tensor> params;
  std::vector<std::string> param_names;            // per parameter (for the step check's message)
  std::unordered_set<const TensorImpl*> param_ids;  // which optimizer steps are this DDP's
  std::vector<unsigned char> step_flags;            // the per-step check's state (reused)
  std::vector<std::size_t> bucket_of, offset_of;  // per parameter
  std::vector<char> param_ready;
  std::vector<Bucket> buckets;
  std::vector<char> buffer_bytes;  // the buffers packed for the broadcast
  std::size_t next_launch = 0;
  bool dirty = false;  // some hook fired since the last finish()
  bool no_sync = false;
  bool mpi = false;
  MPI_Comm comm = MPI_COMM_NULL;
  std::uint64_t step_hook = 0;
  double comm_s = 0, wait_s = 0;
  std::size_t in_backward = 0, in_finish = 0;

  void launch(Bucket& b) {
    const std::size_t es = dtype_size(b.dtype);
    for (std::size_t i : b.params) {
      const Tensor g = params[i].grad();
      char* dst = b.flat.data() + offset_of[i] * es;
      if (g.defined())
        std::memcpy(dst, g.raw_data(), g.nbytes());
      else
        std::memset(dst, 0, params[i].nbytes());
    }
    b.launched = true;
    if (!mpi) return;
    const double t0 = now();
    detail::check(MPI_Iallreduce(MPI_IN_PLACE, b.flat.data(), static_cast<int>(b.numel),
                                 b.dtype == Dtype::Float64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, comm, &b.request),
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
    if (mpi && next_launch > 0) {  // lets MPI progress the reductions already in flight
      const double t0 = now();
      for (std::size_t k = 0; k < next_launch; ++k) {
        int done = 0;
        if (buckets[k].request != MPI_REQUEST_NULL) MPI_Test(&buckets[k].request, &done, MPI_STATUS_IGNORE);
      }
      comm_s += now() - t0;
    }
  }

  // What this rank is about to do in a step, compared across ranks before the step's first
  // collective: mode, gradient sync (no_sync), requires_grad of every parameter, and the
  // bytes of buffers broadcast. A rank that differs would post other collectives than the
  // others (a hang, or reductions of mismatched buffers): every rank throws instead.
  void check_step(const layers::Module& module, std::size_t broadcast_bytes) {
    step_flags.clear();
    step_flags.push_back(module.is_training() ? 1 : 0);
    step_flags.push_back(no_sync ? 1 : 0);
    for (const Tensor& p : params) step_flags.push_back(p.requires_grad() ? 1 : 0);
    const std::uint64_t h = fnv1a(&broadcast_bytes, sizeof broadcast_bytes, fnv1a(step_flags.data(), step_flags.size()));
    check_same_across_ranks(
        h,
        [&] {
          std::ostringstream os;
          os << "mode " << (module.is_training() ? "train()" : "eval()") << "\n";
          os << "gradient averaging " << (no_sync ? "off (inside no_sync())" : "on") << "\n";
          for (std::size_t k = 0; k < params.size(); ++k)
            os << "param " << param_names[k] << (params[k].requires_grad() ? " requires grad" : " frozen (requires_grad = false)")
               << "\n";
          os << "buffers broadcast " << broadcast_bytes << " bytes\n";
          return os.str();
        },
        "DistributedDataParallel: the ranks disagree on what this step does (every rank must use the same mode, "
        "no_sync and requires_grad)");
  }

  void on_grad_final(std::size_t i) {
    if (no_sync) return;
    if (param_ready[i])
      throw std::logic_error(
          "DistributedDataParallel: a parameter's gradient was produced by a second backward before finish(); call "
          "finish() after each backward, or accumulate inside no_sync()");
    param_ready[i] = 1;
    dirty = true;
    ++buckets[bucket_of[i]].ready;
    launch_ready(false);
  }
};

DistributedDataParallel::DistributedDataParallel(layers::ModulePtr module, DDPOptions options)
    : module_(std::move(module)), s_(std::make_unique<State>()) {
  if (!module_) throw std::invalid_argument("DistributedDataParallel: the module is null");
  if (options.bucket_cap_bytes == 0) throw std::invalid_argument("DistributedDataParallel: bucket_cap_bytes must be > 0");
  State& s = *s_;
  s.options = options;
  s.mpi = is_initialized() && world_size() > 1;
  // What the ranks will communicate must agree: the layout (parameters and buffers: names,
  // shapes, dtypes), which parameters are reduced (requires_grad) and the bucket capacity
  // (together they fix the buckets). Throws on every rank on a mismatch, before any transfer.
  if (s.mpi) {
    std::ostringstream os;
    os << layout_description(*module_);
    for (auto& [name, p] : module_->named_parameters())
      os << "param " << name << (p.requires_grad() ? " requires grad" : " frozen (requires_grad = false)") << "\n";
    os << "bucket_cap_bytes " << options.bucket_cap_bytes << "\n";
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
    if (s.buckets.empty() || s.buckets.back().dtype != p.dtype() ||
        static_cast<std::size_t>(s.buckets.back().numel) * dtype_size(p.dtype()) >= options.bucket_cap_bytes) {
      s.buckets.emplace_back();
      s.buckets.back().dtype = p.dtype();
    }
    State::Bucket& b = s.buckets.back();
    s.bucket_of[k] = s.buckets.size() - 1;
    s.offset_of[k] = static_cast<std::size_t>(b.numel);
    b.params.push_back(k);
    b.numel += p.numel();
  }
  for (auto& b : s.buckets) b.flat.resize(static_cast<std::size_t>(b.numel) * dtype_size(b.dtype));
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
  optim::hooks::remove_step_hook(s.step_hook);
  for (auto& p : s.params) autograd::set_post_accumulate_grad_hook(p, {});
  int finalized = 0;
  if (s.mpi) MPI_Finalized(&finalized);
  if (s.mpi && !finalized) {  // (after MPI_Finalize there is nothing left to free)
    for (auto& b : s.buckets)
      if (b.request != MPI_REQUEST_NULL) MPI_Wait(&b.request, MPI_STATUS_IGNORE);
    MPI_Comm_free(&s.comm);
  }
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  State& s = *s_;
  if (s.dirty)
    throw std::logic_error("DistributedDataParallel: forward() while the last backward's gradients are not averaged; "
                           "call finish() after loss.backward()");
  const bool broadcast = s.options.broadcast_buffers && module_->is_training();
  std::vector<Tensor> buffers;
  std::size_t total = 0;
  if (broadcast) {
    buffers = module_->buffers();
    for (const auto& b : buffers) total += b.nbytes();
  }
  // A forward that can lead to collectives (the broadcast below in train mode; gradient
  // reductions in a backward whenever grad mode is on) first checks that every rank agrees
  // on them. An eval() forward under NoGradGuard communicates nothing and checks nothing.
  if (s.mpi && (module_->is_training() || grad_mode_enabled())) s.check_step(*module_, total);
  if (broadcast && s.mpi) {
    // Every buffer in one message: one latency per forward instead of one per buffer.
    s.buffer_bytes.resize(total);
    std::size_t at = 0;
    if (rank() == 0)
      for (const auto& b : buffers) {
        std::memcpy(s.buffer_bytes.data() + at, b.raw_data(), b.nbytes());
        at += b.nbytes();
      }
    const double t0 = now();
    detail::check(MPI_Bcast(s.buffer_bytes.data(), static_cast<int>(total), MPI_BYTE, 0, detail::world_comm()),
                  "MPI_Bcast");
    s.comm_s += now() - t0;
    at = 0;
    if (rank() != 0)
      for (auto& b : buffers) {
        std::memcpy(b.raw_data(), s.buffer_bytes.data() + at, b.nbytes());
        at += b.nbytes();
      }
  }
  return (*module_)(x);
}

void DistributedDataParallel::finish() {
  State& s = *s_;
  if (s.no_sync || !s.dirty) return;
  s.launch_ready(true);
  const double inv = 1.0 / static_cast<double>(world_size());
  for (auto& b : s.buckets) {
    if (s.mpi && b.request != MPI_REQUEST_NULL) {
      const double t0 = now();
      detail::check(MPI_Wait(&b.request, MPI_STATUS_IGNORE), "MPI_Wait");
      const double dt = now() - t0;
      s.comm_s += dt;
      s.wait_s += dt;
    }
    const std::size_t es = dtype_size(b.dtype);
    for (std::size_t i : b.params) {
      Tensor& p = s.params[i];
      if (!p.requires_grad()) continue;  // frozen since construction (on every rank: check_step)
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
  }
  std::fill(s.param_ready.begin(), s.param_ready.end(), 0);
  s.next_launch = 0;
  s.dirty = false;
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
