#include <tapegrad/distributed/ddp_reducer.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include <tapegrad/distributed/environment.h>

namespace tapegrad::distributed::detail {

Reducer::Reducer(std::vector<Tensor> params, const DDPOptions& options, bool mpi, MPI_Comm comm,
                 CommSeconds& seconds, Profile& profile)
    : params_(std::move(params)), mpi_(mpi), comm_(comm), seconds_(seconds), profile_(profile) {
  const std::size_t P = params_.size();
  bucket_of_.assign(P, 0);
  offset_of_.assign(P, 0);
  param_ready_.assign(P, 0);
  // reverse parameter order, a new bucket at the capacity or a dtype change
  for (std::size_t k = P; k-- > 0;) {
    const Tensor& p = params_[k];
    const bool inplace = p.nbytes() >= options.inplace_min_bytes;
    if (buckets_.empty() || buckets_.back().dtype != p.dtype() || buckets_.back().inplace || inplace ||
        static_cast<std::size_t>(buckets_.back().numel) * dtype_size(p.dtype()) >= options.bucket_cap_bytes) {
      buckets_.emplace_back();
      buckets_.back().dtype = p.dtype();
      buckets_.back().inplace = inplace;
    }
    Bucket& b = buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    offset_of_[k] = static_cast<std::size_t>(b.numel);
    b.params.push_back(k);
    b.numel += p.numel();
  }
  for (auto& b : buckets_)
    if (!b.inplace) b.flat.resize(static_cast<std::size_t>(b.numel) * dtype_size(b.dtype));
}

void Reducer::launch(Bucket& b) {
  const std::size_t es = dtype_size(b.dtype);
  void* data = nullptr;
  if (b.inplace) {
    // A large gradient is reduced where it is, without the two copies through `flat`,
    // when only this parameter holds its memory (the engine gives every leaf gradient its
    // own storage; anything else, or an unused parameter, takes the packed path).
    const Tensor& p = params_[b.params[0]];
    Tensor g = p.grad();  // (a parameter frozen since construction keeps its stale gradient: packed path)
    if (p.requires_grad() && g.defined() && g.dtype() == b.dtype && g.numel() == b.numel &&
        g.impl()->storage.use_count() == 1) {
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
    const Tensor g = params_[i].grad();
    char* dst = b.flat.data() + offset_of_[i] * es;
    if (g.defined())
      std::memcpy(dst, g.raw_data(), g.nbytes());
    else
      std::memset(dst, 0, params_[i].nbytes());
  }
  b.launched = true;
  if (sharded_ && !mpi_) {  // a world of one: this rank's chunk is everything
    std::memcpy(b.shard_grad.raw_data(), data, static_cast<std::size_t>(b.numel) * es);
    return;
  }
  if (!mpi_) return;
  ScopedTimer t(seconds_.comm);
  const MPI_Datatype type = b.dtype == Dtype::Float64 ? MPI_DOUBLE : MPI_FLOAT;
  if (sharded_)
    check(MPI_Ireduce_scatter(data, b.shard_grad.raw_data(), b.counts.data(), type, MPI_SUM, comm_, &b.request),
          "MPI_Ireduce_scatter");
  else
    check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(b.numel), type, MPI_SUM, comm_, &b.request),
          "MPI_Iallreduce");
}

void Reducer::mark_final(std::size_t i) {
  if (param_ready_[i])
    throw std::logic_error(
        "DistributedDataParallel: a parameter's gradient was produced by a second backward before finish(); call "
        "finish() after each backward, or accumulate inside no_sync()");
  param_ready_[i] = 1;
  ++buckets_[bucket_of_[i]].ready;
}

void Reducer::launch_ready(bool all) {
  {
    PhaseTimer phase(profile_, Profile::Launch);
    while (next_launch_ < buckets_.size()) {
      Bucket& b = buckets_[next_launch_];
      if (!all && b.ready < b.params.size()) break;
      launch(b);
      ++(all ? in_finish_ : in_backward_);
      ++next_launch_;
    }
  }
  PhaseTimer phase(profile_, Profile::Progress);
  if (mpi_ && next_launch_ > 0) {  // lets MPI progress the reductions already in flight
    ScopedTimer t(seconds_.comm);
    for (std::size_t k = 0; k < next_launch_; ++k) {
      int done = 0;
      if (buckets_[k].request != MPI_REQUEST_NULL) MPI_Test(&buckets_[k].request, &done, MPI_STATUS_IGNORE);
    }
  }
}

// Writes bucket b's reduced sum times `inv` where it belongs (the shard gradient, the
// gradient it was reduced in, or every parameter's .grad) and readies b for the next backward.
void Reducer::average(Bucket& b, double inv) {
  const std::size_t es = dtype_size(b.dtype);
  if (sharded_) {  // only this rank's chunk was reduced: average it; .grad stays local
    b.shard_grad.mul_(inv);
    b.inflight = Tensor();
    b.ready = 0;
    b.launched = false;
    return;
  }
  const bool reduced_in_place = b.inflight.defined();
  if (reduced_in_place) {  // reduced in the gradient's own memory: divide in place
    Tensor& p = params_[b.params[0]];
    b.inflight.mul_(inv);  // the whole gradient: the bucket's only parameter
    if (!p.grad().defined() || p.grad().raw_data() != b.inflight.raw_data()) p.set_grad(b.inflight);
    b.inflight = Tensor();
  }
  for (std::size_t i : b.params) {
    if (reduced_in_place) break;  // nothing was packed
    Tensor& p = params_[i];
    if (!p.requires_grad()) continue;  // frozen since construction (on every rank: the step check)
    Tensor g = p.grad();
    if (!g.defined()) {
      g = Tensor::zeros(p.shape(), p.dtype());
      p.set_grad(g);
      g = p.grad();
    }
    const char* src = b.flat.data() + offset_of_[i] * es;
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

void Reducer::wait_and_average() {
  const double inv = 1.0 / static_cast<double>(world_size());
  for (auto& b : buckets_) {
    {
      PhaseTimer phase(profile_, Profile::Wait);
      if (mpi_ && b.request != MPI_REQUEST_NULL) {
        ScopedTimer t(seconds_.comm, &seconds_.wait);
        wait(b.request, "MPI_Iallreduce");
      }
    }
    PhaseTimer phase(profile_, Profile::Unpack);
    average(b, inv);
  }
  std::fill(param_ready_.begin(), param_ready_.end(), 0);
  next_launch_ = 0;
  shard_fresh_ = sharded_;
}

void Reducer::reset() {
  std::fill(param_ready_.begin(), param_ready_.end(), 0);
  for (auto& b : buckets_) b.ready = 0;
  next_launch_ = 0;
}

void Reducer::drain() {
  for (auto& b : buckets_)
    if (b.request != MPI_REQUEST_NULL) MPI_Wait(&b.request, MPI_STATUS_IGNORE);  // never throws here
}

std::vector<std::pair<Tensor, Tensor>> Reducer::enable_sharding() {
  const int R = world_size(), me = rank();
  std::vector<std::pair<Tensor, Tensor>> pieces;
  for (auto& b : buckets_) {
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
      const std::int64_t off = static_cast<std::int64_t>(offset_of_[i]), n = params_[i].numel();
      const std::int64_t a = std::max(lo, off), e = std::min(hi, off + n);
      if (a >= e) continue;
      Tensor piece = alias_with_shape(params_[i], {e - a}, static_cast<std::size_t>(a - off) * es);
      piece.requires_grad_();
      Tensor g = alias_with_shape(b.shard_grad, {e - a}, static_cast<std::size_t>(a - lo) * es);
      piece.set_grad(g);
      pieces.emplace_back(piece, g);
    }
  }
  sharded_ = true;
  shard_fresh_ = false;
  return pieces;
}

void Reducer::allgather_parameters() {
  shard_fresh_ = false;
  if (!mpi_) return;  // a world of one updated every element in place
  const int me = rank();
  ScopedTimer t(seconds_.comm);
  std::vector<MPI_Request> reqs(buckets_.size(), MPI_REQUEST_NULL);
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    auto& b = buckets_[k];
    const MPI_Datatype type = b.dtype == Dtype::Float64 ? MPI_DOUBLE : MPI_FLOAT;
    const std::size_t es = dtype_size(b.dtype);
    void* data = nullptr;
    if (b.inplace) {
      data = params_[b.params[0]].raw_data();  // one parameter: its memory is the bucket
    } else {  // this rank's chunk of the values, packed at its place in the bucket
      const std::int64_t lo = b.displs[static_cast<std::size_t>(me)], hi = lo + b.counts[static_cast<std::size_t>(me)];
      for (std::size_t i : b.params) {
        const std::int64_t off = static_cast<std::int64_t>(offset_of_[i]), n = params_[i].numel();
        const std::int64_t a = std::max(lo, off), e = std::min(hi, off + n);
        if (a < e)
          std::memcpy(b.flat.data() + static_cast<std::size_t>(a) * es,
                      static_cast<const char*>(params_[i].raw_data()) + static_cast<std::size_t>(a - off) * es,
                      static_cast<std::size_t>(e - a) * es);
      }
      data = b.flat.data();
    }
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, b.counts.data(), b.displs.data(), type, comm_,
                          &reqs[k]),
          "MPI_Iallgatherv");
  }
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    wait(reqs[k], "MPI_Iallgatherv");
    auto& b = buckets_[k];
    if (b.inplace) continue;
    const std::size_t es = dtype_size(b.dtype);
    for (std::size_t i : b.params)
      std::memcpy(params_[i].raw_data(), b.flat.data() + offset_of_[i] * es, params_[i].nbytes());
  }
}

std::vector<std::vector<std::size_t>> Reducer::layout() const {
  std::vector<std::vector<std::size_t>> out;
  for (auto& b : buckets_) out.push_back(b.params);
  return out;
}

}  // namespace tapegrad::distributed::detail
