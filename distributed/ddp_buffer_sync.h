#pragma once
// Internal: DistributedDataParallel's buffer broadcast. Copies rank 0's buffers (running
// statistics) into every rank's with one MPI_Ibcast of their packed bytes on DDP's
// communicator; posting and completing are separate so the copy can overlap the backward.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <tapegrad/distributed/comm.h>
#include <tapegrad/distributed/ddp_profile.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::distributed::detail {

class BufferSync {
 public:
  /// The buffers of `module`, over `comm`; MPI time is added to `seconds.comm`.
  BufferSync(layers::Module& module, MPI_Comm comm, CommSeconds& seconds);

  /// Posts the broadcast of rank 0's buffers as they are now (fetched again, in case the
  /// forward replaced a buffer's tensor). A deferred one sends the byte count checked before
  /// the forward (set_deferred) and every rank's own count beside it. Clears deferred().
  void post();
  /// Completes a posted broadcast and copies rank 0's buffers into this rank's; a no-op
  /// when none is in flight. When a deferred broadcast's counts differ (one rank's forward
  /// registered a buffer the others did not), copies nothing and throws std::runtime_error
  /// on every rank naming each side's buffers (check_same_across_ranks); when every rank's
  /// count changed alike, broadcasts the buffers again as they are now.
  void complete();
  /// Whether a posted broadcast is still to be completed.
  bool in_flight() const { return in_flight_; }
  /// Whether this step's buffers are still to be posted (a training step posts them from
  /// its first gradient hook, or in finish()).
  bool deferred() const { return deferred_; }
  /// Sets deferred(); `checked_bytes`: the buffer bytes the step check agreed on (every rank's
  /// before the forward), what a deferred post() broadcasts.
  void set_deferred(bool deferred, std::size_t checked_bytes = 0) {
    deferred_ = deferred;
    checked_bytes_ = checked_bytes;
  }
  /// Waits for a posted broadcast without unpacking it (destruction; every rank posted it).
  void drain();

 private:
  layers::Module& module_;
  MPI_Comm comm_;
  CommSeconds& seconds_;
  std::vector<Tensor> buffers_;  // the module's buffers (of the step being synchronised)
  std::vector<char> bytes_;      // the buffers packed for the broadcast
  MPI_Request req_ = MPI_REQUEST_NULL;
  std::size_t checked_bytes_ = 0;  // a deferred post's count, checked before the forward
  std::size_t agreed_ = 0;         // the posted broadcast's byte count
  bool gather_ = false;            // the posted broadcast also gathers every rank's own count
  std::uint64_t mine_ = 0;         // this rank's buffer bytes at post()
  std::vector<std::uint64_t> counts_;  // every rank's, gathered
  MPI_Request gather_req_ = MPI_REQUEST_NULL;
  bool in_flight_ = false;  // posted; rank != 0 unpacks them when complete
  bool deferred_ = false;
};

}  // namespace tapegrad::distributed::detail
