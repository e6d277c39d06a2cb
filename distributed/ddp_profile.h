#pragma once
// Internal: DistributedDataParallel's timing. Scoped timers add the seconds of a block to a
// counter when they go out of scope, so the timing stays out of the logic it measures.

namespace tapegrad::distributed::detail {

/// Seconds on the steady clock.
double wall_seconds();
/// CPU seconds of the calling thread.
double thread_cpu_seconds();

/// RAII: adds the wall seconds from construction to destruction to `counter` (and, when
/// given, the same amount to `also`), also when the block is left by an exception.
class ScopedTimer {
 public:
  explicit ScopedTimer(double& counter, double* also = nullptr)
      : counter_(counter), also_(also), start_(wall_seconds()) {}
  ~ScopedTimer() {
    const double dt = wall_seconds() - start_;
    counter_ += dt;
    if (also_) *also_ += dt;
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  double& counter_;
  double* also_;
  double start_;
};

/// The seconds DistributedDataParallel spends in MPI calls (comm: gradient reductions'
/// launch, test and wait, the step check, the buffer broadcast, ZeRO's allgather) and, of
/// those, blocked in finish() (wait). Shared by the reducer, the step check and the buffer sync.
struct CommSeconds {
  double comm = 0;
  double wait = 0;
};

/// TAPEGRAD_DDP_PROFILE=1: where a rank's step time goes, wall and CPU seconds per phase,
/// printed to stderr by ~DistributedDataParallel. Phases: "sync" the step check and buffer
/// broadcast (posting them in the forward; completing the check and posting the broadcast at
/// the first gradient hook); "compute" forward + loss + backward (hooks' own work excluded);
/// "launch" packing gradients into buckets and starting their reductions (from hooks and
/// finish); "progress" MPI_Test calls in hooks; "wait" blocked in finish(); "unpack" writing
/// the averaged gradients back; "outside" from finish() to the next forward (the optimizer
/// step, zero_grad, loss.item(), data loading) except "allgather", ZeroRedundancyOptimizer's
/// allgather of the parameters (packing, MPI, waiting, unpacking).
/// A PhaseTimer charges its block to its phase; the time between blocks goes to `current`
/// (compute from a forward to finish(), outside from finish() to the next forward).
struct Profile {
  enum Phase { Sync, Compute, Launch, Progress, Wait, Unpack, Outside, Gather, kPhases };
  static constexpr const char* kNames[kPhases] = {"sync",   "compute", "launch",  "progress",
                                                  "wait",   "unpack",  "outside", "allgather"};
  bool on = false;
  double wall[kPhases] = {}, cpu[kPhases] = {};
  long steps = 0;
  Phase current = Compute;  // the phase the time since the last mark belongs to
  /// Forgets the time since the last mark (it belongs to no phase).
  void restart();
  /// Adds the time since the last mark to `current` and restarts the mark.
  void charge();
  /// One line on stderr, ms per step wall/CPU of every phase; nothing when off or no step ran.
  void print(int rank) const;

 private:
  double mark_wall_ = 0, mark_cpu_ = 0;
};

/// RAII: the time from construction to destruction goes to `phase` (what ran before it, to
/// the phase in progress, which is current again afterwards). Does nothing when the profile
/// is off or `active` is false.
class PhaseTimer {
 public:
  PhaseTimer(Profile& profile, Profile::Phase phase, bool active = true)
      : profile_(profile), active_(profile.on && active), prev_(profile.current) {
    if (!active_) return;
    profile_.charge();
    profile_.current = phase;
  }
  ~PhaseTimer() {
    if (!active_) return;
    profile_.charge();
    profile_.current = prev_;
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  Profile& profile_;
  bool active_;
  Profile::Phase prev_;
};

}  // namespace tapegrad::distributed::detail
