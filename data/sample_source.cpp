// Subset: a part of a SampleSource by index.
#include <tapegrad/data/sample_source.h>

#include <stdexcept>
#include <string>

namespace tapegrad::data {

Subset::Subset(std::shared_ptr<const SampleSource> base, std::vector<std::int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  if (!base_) throw std::invalid_argument("Subset: the base source is null");
  const std::int64_t n = base_->size();
  for (std::size_t k = 0; k < indices_.size(); ++k)
    if (indices_[k] < 0 || indices_[k] >= n)
      throw std::out_of_range("Subset: index " + std::to_string(indices_[k]) + " (entry " + std::to_string(k) +
                              ") outside 0 .. " + std::to_string(n - 1));
}

std::int64_t Subset::base_index(std::int64_t i) const {
  if (i < 0 || i >= size())
    throw std::out_of_range("Subset: sample " + std::to_string(i) + " outside 0 .. " + std::to_string(size() - 1));
  return indices_[static_cast<std::size_t>(i)];
}

Tensor Subset::get(std::int64_t i) const { return base_->get(base_index(i)); }

std::int64_t Subset::target(std::int64_t i) const { return base_->target(base_index(i)); }

}  // namespace tapegrad::data
