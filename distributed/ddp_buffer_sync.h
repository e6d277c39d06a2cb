#pragma once
// Internal: DistributedDataParallel's buffer broadcast. Copies rank 0's buffers (running
// statistics) into every rank's with one MPI_Ibcast of their packed bytes on DDP's
// communicator; posting and completing are separate so the copy can overlap the backward.
#include <cstddef>
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
  /// forward replaced a buffer's tensor). Clears deferred().
  void post();
  /// Completes a posted broadcast and copies rank 0's buffers into this rank's; a no-op
  /// when none is in flight.
  void complete();
  /// Whether a posted broadcast is still to be completed.
  bool in_flight() const { return in_flight_; }
  /// Whether this step's buffers are still to be posted (a training step posts them from
  /// its first gradient hook, or in finish()).
  bool deferred() const { return deferred_; }
  void set_deferred(bool deferred) { deferred_ = deferred; }
  /// Waits for a posted broadcast without unpacking it (destruction; every rank posted it).
  void drain();

 private:
  layers::Module& module_;
  MPI_Comm comm_;
  CommSeconds& seconds_;
  std::vector<Tensor> buffers_;  // the module's buffers (of the step being synchronised)
  std::vector<char> bytes_;      // the buffers packed for the broadcast
  MPI_Request req_ = MPI_REQUEST_NULL;
  bool in_flight_ = false;  // posted; rank != 0 unpacks them when complete
  bool deferred_ = false;
};

}  // namespace tapegrad::distributed::detail
