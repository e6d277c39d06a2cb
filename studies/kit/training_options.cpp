#include "kit/training_options.h"

namespace studies::kit {

std::string seed_range(const SeedOptions& o) {
  return std::to_string(o.seed) + ".." + std::to_string(o.seed + static_cast<std::uint64_t>(o.seeds) - 1);
}

std::string mlp_layers(const std::vector<std::int64_t>& hidden) {
  std::string out = "784";
  for (auto h : hidden) out += "-" + std::to_string(h);
  return out + "-10";
}

}  // namespace studies::kit
