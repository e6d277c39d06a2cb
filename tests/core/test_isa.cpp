// The kernels' ISA level (core/isa.h): parsing, the refusal of a level above the CPU's or
// below a single-level build's, the level chosen (the environment's TAPEGRAD_ISA when the
// ctest entries isa_forced_* set it), and that set_isa cannot change a fixed level.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/isa.h>

using namespace tapegrad;

TEST_CASE("isa: names round-trip and bad names are refused with the text given", "[isa]") {
  for (Isa l : {Isa::Baseline, Isa::Avx2, Isa::Avx512}) CHECK(parse_isa(isa_name(l)) == l);
  CHECK(std::string(isa_name(Isa::Avx2)) == "avx2");
  for (const char* bad : {"", "AVX2", "avx", "avx-512", "sse4", "native", "avx2 "}) {
    try {
      parse_isa(bad);
      FAIL("parse_isa accepted '" << bad << "'");
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains("expected baseline, avx2 or avx512") &&
                               Catch::Contains(std::string("'") + bad + "'"));
    }
  }
}

TEST_CASE("isa: the CPU's level follows its cpuid flags", "[isa]") {
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (cpu_isa() == Isa::Avx512) CHECK((avx512 && avx2));
  if (cpu_isa() == Isa::Avx2) CHECK((avx2 && !avx512));
  if (cpu_isa() == Isa::Baseline) CHECK(!avx2);
}

TEST_CASE("isa: a level above the CPU's or below the build's is refused, naming both", "[isa]") {
  const std::vector<Isa> all{Isa::Baseline, Isa::Avx2, Isa::Avx512};
  CHECK_NOTHROW(detail::check_isa_runnable(Isa::Avx2, Isa::Avx2, all, "TAPEGRAD_ISA"));
  CHECK_NOTHROW(detail::check_isa_runnable(Isa::Baseline, Isa::Avx512, all, "set_isa"));
  CHECK_THROWS_WITH(detail::check_isa_runnable(Isa::Avx512, Isa::Avx2, all, "TAPEGRAD_ISA"),
                    "TAPEGRAD_ISA: ISA level avx512 is above this CPU's (avx2)");
  CHECK_THROWS_WITH(detail::check_isa_runnable(Isa::Avx2, Isa::Baseline, all, "set_isa"),
                    "set_isa: ISA level avx2 is above this CPU's (baseline)");
  CHECK_THROWS_WITH(detail::check_isa_runnable(Isa::Avx2, Isa::Avx512, {Isa::Avx512}, "set_isa"),
                    Catch::StartsWith("set_isa: ISA level avx2 is below this build's lowest variant (avx512"));
  CHECK_THROWS_WITH(detail::check_isa_runnable(Isa::Avx512, Isa::Avx512, {Isa::Avx2}, "TAPEGRAD_ISA"),
                    Catch::StartsWith("TAPEGRAD_ISA: ISA level avx512 is above this build's highest variant (avx2"));
  if (cpu_isa() < Isa::Avx512) CHECK_THROWS_AS(set_isa(Isa::Avx512), std::invalid_argument);
}

TEST_CASE("isa: the chosen level is the environment's, else the highest the CPU and build run", "[isa]") {
  const std::vector<Isa> variants = isa_variants();
  REQUIRE(!variants.empty());
  const Isa level = isa();
  CHECK(level <= cpu_isa());
  CHECK(level >= variants.front());
  const char* env = std::getenv("TAPEGRAD_ISA");
  if (env && *env) {
    CHECK(std::string(isa_name(level)) == env);
  } else if (variants.size() == 3) {  // the portable build: the CPU's own level
    CHECK(level == cpu_isa());
  }
  INFO("cpu " << isa_name(cpu_isa()) << ", kernels " << isa_name(level));
  // the level is fixed now: setting it again is a no-op, another level is refused
  CHECK_NOTHROW(set_isa(level));
  for (Isa other : {Isa::Baseline, Isa::Avx2, Isa::Avx512}) {
    if (other == level || other > cpu_isa() || other < variants.front() || other > variants.back()) continue;
    CHECK_THROWS_AS(set_isa(other), std::logic_error);
    try {
      set_isa(other);
    } catch (const std::logic_error& e) {
      CHECK_THAT(e.what(), Catch::Contains(std::string("already fixed to ") + isa_name(level)));
    }
  }
  CHECK(isa() == level);
}
