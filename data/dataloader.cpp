#include <tapegrad/data/dataloader.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace tapegrad::data {

DataLoader::DataLoader(Dataset dataset, DataLoaderOptions options, Generator& gen)
    : dataset_(std::move(dataset)), options_(options), gen_(&gen) {
  if (options_.batch_size < 1)
    throw std::invalid_argument("DataLoader: expected batch_size >= 1, got " + std::to_string(options_.batch_size));
  order_.resize(static_cast<std::size_t>(dataset_.size()));
  for (std::int64_t i = 0; i < dataset_.size(); ++i) order_[static_cast<std::size_t>(i)] = i;
}

std::int64_t DataLoader::num_batches() const {
  const std::int64_t n = dataset_.size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::reset() {
  if (options_.shuffle) {
    order_ = randperm(dataset_.size(), *gen_);
  } else {
    for (std::int64_t i = 0; i < dataset_.size(); ++i) order_[static_cast<std::size_t>(i)] = i;
  }
}

Batch DataLoader::batch(std::int64_t i) const {
  if (i < 0 || i >= num_batches())
    throw std::out_of_range("DataLoader::batch: index " + std::to_string(i) + " out of range for " +
                            std::to_string(num_batches()) + " batches");
  const std::int64_t begin = i * options_.batch_size;
  return batch(i, 0, std::min(begin + options_.batch_size, dataset_.size()) - begin);
}

Batch DataLoader::batch(std::int64_t i, std::int64_t row_begin, std::int64_t rows) const {
  if (i < 0 || i >= num_batches())
    throw std::out_of_range("DataLoader::batch: index " + std::to_string(i) + " out of range for " +
                            std::to_string(num_batches()) + " batches");
  const std::int64_t b = options_.batch_size;
  const std::int64_t size = std::min(i * b + b, dataset_.size()) - i * b;
  if (row_begin < 0 || rows < 0 || row_begin + rows > size)
    throw std::out_of_range("DataLoader::batch: rows [" + std::to_string(row_begin) + ", " +
                            std::to_string(row_begin + rows) + ") outside batch " + std::to_string(i) + " of " +
                            std::to_string(size) + " rows");
  const std::int64_t begin = i * b + row_begin;
  auto gather = [&](const Tensor& t) {
    Shape s = t.shape();
    s[0] = rows;
    Tensor out = Tensor::empty(s, t.dtype());
    std::size_t rb = dtype_size(t.dtype());
    for (std::int64_t d = 1; d < t.dim(); ++d) rb *= static_cast<std::size_t>(t.size(d));
    const auto* src = static_cast<const std::uint8_t*>(t.raw_data());
    auto* dst = static_cast<std::uint8_t*>(out.raw_data());
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto from = static_cast<std::size_t>(order_[static_cast<std::size_t>(begin + r)]);
      if (rb) std::memcpy(dst + static_cast<std::size_t>(r) * rb, src + from * rb, rb);
    }
    return out;
  };
  return Batch{gather(dataset_.X), gather(dataset_.y)};
}

DataLoader::iterator DataLoader::begin() {
  reset();
  return iterator(this, 0);
}

}  // namespace tapegrad::data
