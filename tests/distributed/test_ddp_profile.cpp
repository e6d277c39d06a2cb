// DistributedDataParallel's scoped timers (ddp_profile.h), without mpirun ("[single]"): a
// ScopedTimer adds its block's time to its counters, also when the block throws; a
// PhaseTimer charges its block to its phase and the time between blocks to the current one.
#include <catch2/catch.hpp>

#include <chrono>
#include <stdexcept>
#include <thread>

#include <tapegrad/distributed/ddp_profile.h>

namespace detail = tapegrad::distributed::detail;

namespace {
void busy_wait(double seconds) {
  const double end = detail::wall_seconds() + seconds;
  while (detail::wall_seconds() < end) {
  }
}
}  // namespace

TEST_CASE("ScopedTimer adds the block's seconds to both counters, also when it throws", "[single][profile]") {
  double comm = 1.0, wait = 2.0;
  {
    detail::ScopedTimer t(comm, &wait);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(comm - 1.0 >= 0.019);
  CHECK(comm - 1.0 < 1.0);
  CHECK(wait - 2.0 == comm - 1.0);  // the same amount
  const double before = comm;
  CHECK_THROWS_AS(([&] {
                    detail::ScopedTimer t(comm);
                    std::this_thread::sleep_for(std::chrono::milliseconds(10));
                    throw std::runtime_error("stop");
                  })(),
                  std::runtime_error);
  CHECK(comm - before >= 0.009);
}

TEST_CASE("PhaseTimer charges its block to its phase and the gaps to the current phase", "[single][profile]") {
  using P = detail::Profile;
  P prof;
  prof.on = true;
  const double t0 = detail::wall_seconds();
  prof.restart();
  busy_wait(0.010);  // compute (the current phase)
  {
    detail::PhaseTimer launch(prof, P::Launch);
    busy_wait(0.020);
    {
      detail::PhaseTimer progress(prof, P::Progress);  // nested: excluded from launch
      busy_wait(0.030);
    }
    busy_wait(0.005);  // launch again
  }
  prof.current = P::Outside;
  busy_wait(0.015);
  { detail::PhaseTimer gather(prof, P::Gather, /*active=*/false); }  // inactive: no charge
  { detail::PhaseTimer wait(prof, P::Wait); }
  const double elapsed = detail::wall_seconds() - t0;
  CHECK(prof.current == P::Outside);
  CHECK(prof.wall[P::Compute] >= 0.010);
  CHECK(prof.wall[P::Launch] >= 0.025);
  CHECK(prof.wall[P::Progress] >= 0.030);
  CHECK(prof.wall[P::Outside] >= 0.015);
  double sum = 0;  // every second is charged once: the nested block is not in launch too
  for (int k = 0; k < P::kPhases; ++k) sum += prof.wall[k];
  CHECK(sum <= elapsed + 1e-9);
  CHECK(prof.wall[P::Gather] == 0.0);
  CHECK(prof.wall[P::Sync] == 0.0);
  CHECK(prof.cpu[P::Progress] > 0.0);  // busy: CPU time too
}

TEST_CASE("PhaseTimer does nothing while the profile is off", "[single][profile]") {
  detail::Profile prof;
  { detail::PhaseTimer t(prof, detail::Profile::Launch); }
  for (int k = 0; k < detail::Profile::kPhases; ++k) CHECK(prof.wall[k] == 0.0);
  CHECK(prof.current == detail::Profile::Compute);
}
