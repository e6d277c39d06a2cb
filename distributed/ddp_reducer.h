#pragma once
// Internal: DistributedDataParallel's reducer. Packs the parameters' gradients into buckets
// (reverse parameter order, as backward produces them), starts a bucket's reduction
// (MPI_Iallreduce, or MPI_Ireduce_scatter once ZeRO-1 shards it) as soon as all its gradients
// are final, and after the backward waits for every bucket and writes the averages back.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <tapegrad/distributed/comm.h>
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/ddp_profile.h>

namespace tapegrad::distributed::detail {

class Reducer {
 public:
  /// Buckets for `params` (float32 or float64; the caller checks) per `options`'
  /// bucket_cap_bytes and inplace_min_bytes. `mpi`: a world of more than one, over `comm`.
  /// MPI time goes to `seconds`, launch/progress/wait/unpack phases to `profile`.
  Reducer(std::vector<Tensor> params, const DDPOptions& options, bool mpi, MPI_Comm comm, CommSeconds& seconds,
          Profile& profile);

  /// Parameter i's gradient is final in this backward: counts it for its bucket and launches
  /// the buckets that are ready. Throws std::logic_error when it was already final in this
  /// backward (a second backward before finish()).
  void mark_final(std::size_t i);
  /// Launches, in bucket order, every bucket that is ready (or all, when `all`: from
  /// finish()), then lets MPI progress the reductions in flight.
  void launch_ready(bool all);
  /// Waits for every bucket and writes sum / world_size into every .grad (defining zero
  /// gradients where none arrived); once sharded, into the shard gradients instead. Time
  /// blocked here goes to seconds.wait as well. Readies the buckets for the next backward.
  void wait_and_average();
  /// Forgets a step's counted gradients (a failed step check: nothing of it was launched).
  void reset();
  /// Waits for the reductions in flight without looking at them (destruction).
  void drain();

  /// ZeRO-1: see DistributedDataParallel::enable_sharding.
  std::vector<std::pair<Tensor, Tensor>> enable_sharding();
  /// Whether wait_and_average() wrote this step's shard gradients since the last allgather.
  bool shard_gradients_ready() const { return shard_fresh_; }
  /// Whether a ZeroRedundancyOptimizer shards the buckets.
  bool sharded() const { return sharded_; }
  /// Collective: every rank's updated chunks to every rank (see DistributedDataParallel).
  void allgather_parameters();

  /// Buckets as parameter indices, in reduction order.
  std::vector<std::vector<std::size_t>> layout() const;
  std::size_t launched_in_backward() const { return in_backward_; }
  std::size_t launched_in_finish() const { return in_finish_; }

 private:
  struct Bucket {
    std::vector<std::size_t> params;  // indices into params_
    Dtype dtype = Dtype::Float32;
    std::int64_t numel = 0;
    std::vector<char> flat;  // the packed gradients (allocated on first use by an in-place bucket)
    bool inplace = false;    // one parameter of >= DDPOptions::inplace_min_bytes
    Tensor inflight;         // the gradient being reduced in its own memory (inplace, this step)
    std::size_t ready = 0;   // gradients final in this backward
    bool launched = false;
    MPI_Request request = MPI_REQUEST_NULL;
    // ZeRO-1 (enable_sharding): the bucket's flat range is cut into world_size contiguous
    // chunks (counts, displs in elements); rank r receives the sum of chunk r in shard_grad.
    std::vector<int> counts, displs;
    Tensor shard_grad;
  };
  void launch(Bucket& b);
  void average(Bucket& b, double inv);
  std::vector<Tensor> params_;
  std::vector<std::size_t> bucket_of_, offset_of_;  // per parameter
  std::vector<char> param_ready_;
  std::vector<Bucket> buckets_;
  std::size_t next_launch_ = 0;
  bool sharded_ = false;      // ZeRO-1: buckets are reduce-scattered into shard_grad
  bool shard_fresh_ = false;  // wait_and_average() wrote this step's averaged shard gradients
  bool mpi_;
  MPI_Comm comm_;
  CommSeconds& seconds_;
  Profile& profile_;
  std::size_t in_backward_ = 0, in_finish_ = 0;
};

}  // namespace tapegrad::distributed::detail
