// Checkpoint headers with very many entries: writing, parsing and loading are linear in
// the header size. 200,000 entries took minutes when parsing rescanned the header object
// after every entry (and the writer and StateDict searched linearly on every insert); the
// test below then runs for hours instead of about a second. No timing is asserted.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/layers/state_dict.h>

using namespace tapegrad;

TEST_CASE("200,000 safetensors entries serialise, parse and load into a StateDict", "[checkpoint][scale]") {
  constexpr int kEntries = 200000;
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.reserve(kEntries);
  const Tensor one = Tensor::full({1}, 1.5);
  for (int i = 0; i < kEntries; ++i) tensors.emplace_back("layer." + std::to_string(i) + ".weight", one);
  const auto bytes = serialize_safetensors(tensors, {{"format", "pt"}});
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  CHECK(header > 200000u * 60);  // ~12 MB of JSON

  const SafetensorsContent c = parse_safetensors(bytes.data(), bytes.size());
  REQUIRE(c.tensors.size() == kEntries);
  CHECK(c.metadata.at("format") == "pt");
  // File order (ascending offsets) is the order written.
  CHECK(c.tensors.front().first == "layer.0.weight");
  CHECK(c.tensors.back().first == "layer.199999.weight");
  CHECK(c.tensors[123456].second.item() == 1.5);

  layers::StateDict d;
  for (const auto& [k, t] : c.tensors) d.insert(k, t);
  REQUIRE(d.size() == kEntries);
  CHECK(d.contains("layer.777.weight"));
  CHECK(d.keys()[777] == "layer.777.weight");
  d.insert("layer.5.weight", Tensor::full({1}, 2.0));  // replace keeps the position
  CHECK(d.keys()[5] == "layer.5.weight");
  CHECK(d.at("layer.5.weight").item() == 2.0);
  CHECK(d.erase("layer.3.weight"));
  CHECK(d.size() == kEntries - 1);
  CHECK(d.keys()[3] == "layer.4.weight");
  CHECK(d.at("layer.4.weight").item() == 1.5);
  CHECK(d.find("layer.3.weight") == nullptr);
}

TEST_CASE("a duplicate name is still found in a large header", "[checkpoint][scale]") {
  std::string h = "{";
  for (int i = 0; i < 50000; ++i)
    h += "\"t" + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},";
  h += "\"t123\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}";
  std::vector<std::uint8_t> f(8 + h.size());
  const std::uint64_t n = h.size();
  std::memcpy(f.data(), &n, 8);
  std::memcpy(f.data() + 8, h.data(), h.size());
  CHECK_THROWS_WITH(parse_safetensors(f.data(), f.size()), Catch::Contains("duplicate tensor name 't123'"));
}
