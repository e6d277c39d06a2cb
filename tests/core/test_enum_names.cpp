// core/enum_names.h: one table of (value, name) rows read both ways, and the names the
// library's tables give (dtype_name, isa_name / parse_isa).
#include <catch2/catch.hpp>

#include <optional>
#include <stdexcept>

#include <tapegrad/core/core.h>
#include <tapegrad/core/enum_names.h>
#include <tapegrad/core/isa.h>

using namespace tapegrad;

namespace {
enum class Colour { Red, Green, Blue, Unnamed };
constexpr NamedValue<Colour> kColours[] = {{Colour::Red, "red"}, {Colour::Green, "green"}, {Colour::Blue, "blue"}};
constexpr NamedValue<Colour> kOne[] = {{Colour::Red, "red"}};
}  // namespace

TEST_CASE("enum_names: name_of and value_named read one table both ways", "[enum_names]") {
  for (const auto& row : kColours) {
    REQUIRE(std::string(name_of(kColours, row.value)) == row.name);
    REQUIRE(value_named(kColours, row.name) == row.value);
  }
  REQUIRE(std::string(name_of(kColours, Colour::Unnamed)) == "?");
  REQUIRE(std::string(name_of(kColours, Colour::Unnamed, "unknown")) == "unknown");
  REQUIRE(value_named(kColours, "Red") == std::nullopt);  // exact match only
  REQUIRE(value_named(kColours, "") == std::nullopt);
  static_assert(*value_named(kColours, "blue") == Colour::Blue);
}

TEST_CASE("enum_names: parse_named refuses other names, listing the table's", "[enum_names]") {
  REQUIRE(parse_named(kColours, "green", "colour") == Colour::Green);
  REQUIRE_THROWS_MATCHES(parse_named(kColours, "pink", "colour"), std::invalid_argument,
                         Catch::Message("unknown colour 'pink': expected red, green or blue"));
  REQUIRE_THROWS_MATCHES(parse_named(kOne, "blue", "colour"), std::invalid_argument,
                         Catch::Message("unknown colour 'blue': expected red"));
}

TEST_CASE("enum_names: the dtype and ISA names", "[enum_names]") {
  REQUIRE(std::string(dtype_name(Dtype::Float32)) == "float32");
  REQUIRE(std::string(dtype_name(Dtype::Float64)) == "float64");
  REQUIRE(std::string(dtype_name(Dtype::Int64)) == "int64");
  for (Isa level : {Isa::Baseline, Isa::Avx2, Isa::Avx512}) REQUIRE(parse_isa(isa_name(level)) == level);
  REQUIRE_THROWS_MATCHES(parse_isa("sse"), std::invalid_argument,
                         Catch::Message("ISA level: expected baseline, avx2 or avx512, got 'sse'"));
}
