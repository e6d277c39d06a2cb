// How a rank waits for MPI (distributed/comm.h): the TAPEGRAD_MPI_WAIT and
// TAPEGRAD_MPI_SPIN_US values, parsed without MPI ("[single]": no mpirun needed).
#include <catch2/catch.hpp>

#include <stdexcept>

#include <tapegrad/distributed/comm.h>

namespace detail = tapegrad::distributed::detail;

TEST_CASE("MPI wait settings: defaults, spin, a spin time in microseconds", "[single][errors]") {
  const detail::WaitSettings d = detail::parse_wait_settings(nullptr, nullptr);
  CHECK(d.policy == detail::WaitPolicy::Backoff);
  CHECK(d.spin_seconds == 500e-6);
  CHECK(detail::parse_wait_settings("", "").policy == detail::WaitPolicy::Backoff);
  CHECK(detail::parse_wait_settings("spin", nullptr).policy == detail::WaitPolicy::Spin);
  const detail::WaitSettings b = detail::parse_wait_settings("backoff", "200");
  CHECK(b.policy == detail::WaitPolicy::Backoff);
  CHECK(b.spin_seconds == Approx(200e-6).epsilon(1e-12));
  CHECK(detail::parse_wait_settings(nullptr, "0").spin_seconds == 0.0);
}

TEST_CASE("MPI wait settings: a bad value names the variable, what it expects and the value", "[single][errors]") {
  CHECK_THROWS_MATCHES(detail::parse_wait_settings("busy", nullptr), std::invalid_argument,
                       Catch::Message("TAPEGRAD_MPI_WAIT: expected backoff or spin, got 'busy'"));
  for (const char* bad : {"-1", "fast", "10us", "1e8", "nan"})
    CHECK_THROWS_MATCHES(detail::parse_wait_settings(nullptr, bad), std::invalid_argument,
                         Catch::Message(std::string("TAPEGRAD_MPI_SPIN_US: expected microseconds in [0, 1e7], got '") +
                                        bad + "'"));
}
