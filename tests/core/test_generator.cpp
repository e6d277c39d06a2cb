// Generator: a state read back with set_state is checked before anything changes
// (docs/errors.md, "Checkpoints").
#include <catch2/catch.hpp>

#include <string>

#include <tapegrad/core/core.h>
#include "test_errors_support.h"

using namespace tapegrad;

TEST_CASE("errors: Generator::set_state refuses the all-zero state and trailing text, changing nothing",
          "[errors][reliability]") {
  Generator g(7);
  const std::string good = g.get_state();
  std::string zeros;
  for (int i = 0; i < 312; ++i) zeros += "0 ";
  zeros += "312";
  CHECK_THAT(tapegrad::test::thrown<std::invalid_argument>([&] { g.set_state(zeros); }),
             Catch::Matchers::Contains("set_state") && Catch::Matchers::Contains("non-zero word"));
  CHECK_THAT(tapegrad::test::thrown<std::invalid_argument>([&] { g.set_state(good + " 5"); }),
             Catch::Matchers::Contains("set_state") && Catch::Matchers::Contains("text after"));
  CHECK(g.get_state() == good);
  g.set_state(good + "\n");  // trailing blanks are fine
  CHECK(g.get_state() == good);
}
