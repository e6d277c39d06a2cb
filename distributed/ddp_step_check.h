#pragma once
// Internal: DistributedDataParallel's cross-rank step check. Each forward that can lead to
// collectives posts an 8-byte MPI_Iallgather of a hash of what this rank is about to do in
// the step; completing it compares the hashes, and ranks that disagree all throw, naming the
// first difference, before any gradient of the step is communicated.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/distributed/comm.h>
#include <tapegrad/distributed/ddp_profile.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::distributed::detail {

class StepCheck {
 public:
  /// `params`/`names`: the reduced parameters (their requires_grad is part of the check);
  /// `comm`: DDP's communicator; MPI time is added to `seconds.comm`.
  StepCheck(std::vector<Tensor> params, std::vector<std::string> names, MPI_Comm comm, CommSeconds& seconds);

  /// Posts the check of a step: mode, grad mode, `no_sync`, whether the buffers are copied
  /// `before` the forward, requires_grad of every parameter, `sharded` (reduce-scatter for
  /// ZeRO-1, or allreduce) and the `broadcast_bytes` of buffers. Every rank posts one per
  /// forward that can lead to collectives, whatever it then does, so the checks always match.
  void post(const layers::Module& module, bool no_sync, bool sharded, std::size_t broadcast_bytes, bool before);
  /// Whether a posted check is still to be completed.
  bool pending() const { return pending_; }
  /// Completes the posted check: true when every rank posted the same hash. On false, call
  /// throw_mismatch() (every rank saw the same hashes, so all of them do).
  bool complete();
  /// Collective (on the world communicator): throws std::runtime_error on every rank naming
  /// the first difference of the checked step ("rank 1 has 'mode eval()'").
  [[noreturn]] void throw_mismatch();
  /// Waits for a posted check without looking at it (destruction; every rank posted it).
  void drain();

 private:
  std::uint64_t hash(const layers::Module& module, bool no_sync, bool sharded, std::size_t broadcast_bytes,
                     bool before);
  std::vector<Tensor> params_;
  std::vector<std::string> names_;  // per parameter (for the message)
  MPI_Comm comm_;
  CommSeconds& seconds_;
  std::vector<unsigned char> flags_;  // the checked step, as hash() left it (reused)
  std::uint64_t hash_ = 0;
  std::size_t total_ = 0;               // buffer bytes of the checked step
  std::vector<std::uint64_t> recv_;     // every rank's hash
  MPI_Request req_ = MPI_REQUEST_NULL;
  bool pending_ = false;  // posted, not yet compared
};

}  // namespace tapegrad::distributed::detail
