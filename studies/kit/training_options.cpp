#include "kit/training_options.h"

namespace studies::kit {

std::string seed_range(const SeedOptions& o) {
  std::string out = std::to_string(o.seed);
  out += "..";
  out += std::to_string(o.seed + static_cast<std::uint64_t>(o.seeds) - 1);
  return out;
}

std::string mlp_layers(const std::vector<std::int64_t>& hidden) {
  std::string out = "784";
  for (auto h : hidden) {
    out += '-';
    out += std::to_string(h);
  }
  out += "-10";
  return out;
}

}  // namespace studies::kit
