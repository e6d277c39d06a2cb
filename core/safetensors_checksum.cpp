#include <tapegrad/core/safetensors_checksum.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <unordered_set>

#include <tapegrad/core/safetensors.h>

namespace tapegrad {

namespace {

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli
    t[i] = c;
  }
  return t;
}
constexpr std::array<std::uint32_t, 256> kTable = make_table();

std::string hex8(std::uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string safetensors_checksums(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  // Built entry by entry: ordered_json inserts by linear search (quadratic in the count).
  std::string out = "{";
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) continue;
    if (out.size() > 1) out += ',';
    out += nlohmann::json(name).dump() + ":\"" + hex8(crc32c(t.raw_data(), t.nbytes())) + "\"";
  }
  return out + "}";
}

void verify_safetensors_checksums(SafetensorsContent& c) {
  const auto it = c.metadata.find(kSafetensorsChecksumKey);
  if (it == c.metadata.end()) return;
  const std::string what = std::string("__metadata__ '") + kSafetensorsChecksumKey + "'";
  nlohmann::json sums;
  try {
    sums = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(what + " is not valid JSON: " + e.what());
  }
  if (!sums.is_object()) throw std::runtime_error(what + " is not a JSON object");
  for (const auto& [name, t] : c.tensors) {
    const auto s = sums.find(name);
    if (s == sums.end()) throw std::runtime_error("tensor '" + name + "' has no checksum in " + what);
    if (!s->is_string()) throw std::runtime_error(what + ": the checksum of '" + name + "' is not a string");
    const std::string got = hex8(crc32c(t.raw_data(), t.nbytes()));
    if (s->get<std::string>() != got)
      throw std::runtime_error("tensor '" + name + "': its data does not match its checksum (stored crc32c " +
                               s->get<std::string>() + ", the data gives " + got +
                               "): the file is corrupted");
  }
  if (sums.size() != c.tensors.size()) {  // every tensor has one: some name no tensor
    std::unordered_set<std::string> names;
    for (const auto& [name, t] : c.tensors) names.insert(name);
    for (const auto& [name, v] : sums.items())
      if (!names.count(name)) throw std::runtime_error(what + " names a tensor '" + name + "' the file does not hold");
  }
  c.metadata.erase(it);
}

}  // namespace tapegrad
