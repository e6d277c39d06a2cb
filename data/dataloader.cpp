// DataLoader: the epoch order (from the sampler), and batches gathered from a Dataset or
// built from a SampleSource with per-sample transforms. The worker threads are in prefetch.cpp.
#include <tapegrad/data/dataloader.h>
#include <tapegrad/core/shape.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace tapegrad::data {

DataLoader::DataLoader(Dataset dataset, DataLoaderOptions options, Generator& gen)
    : dataset_(std::move(dataset)), options_(std::move(options)), gen_(&gen) {
  check_options();
  if (!options_.transform.transforms.empty() && (!dataset_.X.defined() || dataset_.X.dim() != 4))
    throw std::invalid_argument("DataLoader: a transform needs images X (N, C, H, W), got " +
                                (dataset_.X.defined() ? "X of rank " + std::to_string(dataset_.X.dim())
                                                      : std::string("an empty dataset")));
  init_sampler();
}

DataLoader::DataLoader(std::shared_ptr<const SampleSource> source, DataLoaderOptions options, Generator& gen)
    : source_(std::move(source)), options_(std::move(options)), gen_(&gen) {
  if (!source_) throw std::invalid_argument("DataLoader: the sample source is null");
  check_options();
  init_sampler();
}

DataLoader::DataLoader(const DataLoader& o)
    : dataset_(o.dataset_), source_(o.source_), options_(o.options_), gen_(o.gen_), sampler_(o.sampler_),
      order_(o.order_), epoch_seed_(o.epoch_seed_) {}

DataLoader& DataLoader::operator=(const DataLoader& o) {
  if (this == &o) return *this;
  stop_workers();
  dataset_ = o.dataset_;
  source_ = o.source_;
  options_ = o.options_;
  gen_ = o.gen_;
  sampler_ = o.sampler_;
  order_ = o.order_;
  epoch_seed_ = o.epoch_seed_;
  return *this;
}

void DataLoader::check_options() const {
  if (options_.batch_size < 1)
    throw std::invalid_argument("DataLoader: expected batch_size >= 1, got " + std::to_string(options_.batch_size));
  if (options_.num_workers < 0)
    throw std::invalid_argument("DataLoader: expected num_workers >= 0, got " + std::to_string(options_.num_workers));
  if (options_.prefetch_factor < 1)
    throw std::invalid_argument("DataLoader: expected prefetch_factor >= 1, got " +
                                std::to_string(options_.prefetch_factor));
  if (options_.sampler && options_.shuffle)
    throw std::invalid_argument("DataLoader: shuffle and sampler are mutually exclusive: got shuffle = true and a "
                                "sampler (the sampler orders the indices; shuffle through it, e.g. "
                                "DistributedSamplerOptions::shuffle)");
}

void DataLoader::init_sampler() {
  const std::int64_t n = dataset_size();
  if (!options_.sampler) {  // the loader's own order, 0..N-1 until the first reset()
    if (options_.shuffle)
      sampler_ = std::make_shared<RandomSampler>(n, *gen_);
    else
      sampler_ = std::make_shared<SequentialSampler>(n);
    order_.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) order_[static_cast<std::size_t>(i)] = i;
    return;
  }
  if (const std::optional<std::int64_t> m = options_.sampler->dataset_size(); m && *m != n)
    throw std::invalid_argument("DataLoader: the sampler was made for a dataset of " + std::to_string(*m) +
                                " samples, this one has " + std::to_string(n));
  sampler_ = options_.sampler;  // the order comes at reset()
}

std::int64_t DataLoader::dataset_size() const { return source_ ? source_->size() : dataset_.size(); }

std::int64_t DataLoader::size() const { return sampler_->size(); }

std::int64_t DataLoader::num_batches() const {
  const std::int64_t n = size(), b = options_.batch_size;
  return options_.drop_last ? n / b : ceil_div(n, b);
}

void DataLoader::reset() {
  stop_workers();
  std::vector<std::int64_t> order = sampler_->epoch_indices();
  if (options_.sampler) {  // a given sampler's order is checked before it is used
    const std::int64_t n = dataset_size();
    if (static_cast<std::int64_t>(order.size()) != size())
      throw std::logic_error("DataLoader: the sampler gave " + std::to_string(order.size()) +
                             " indices for the epoch, expected its size() " + std::to_string(size()));
    for (std::size_t k = 0; k < order.size(); ++k)
      if (order[k] < 0 || order[k] >= n)
        throw std::out_of_range("DataLoader: the sampler's index " + std::to_string(order[k]) + " (position " +
                                std::to_string(k) + " of the epoch) is outside 0 .. " + std::to_string(n - 1) +
                                " (the dataset's " + std::to_string(n) + " samples)");
  }
  order_ = std::move(order);
  if (!options_.transform.transforms.empty()) epoch_seed_ = gen_->next_u64();
  if (options_.num_workers > 0 && num_batches() > 0) start_workers();
}

std::int64_t DataLoader::batch_rows(std::int64_t i) const {
  const std::int64_t b = options_.batch_size;
  return std::min(i * b + b, size()) - i * b;
}

void DataLoader::check_batch(std::int64_t i) const {
  if (i < 0 || i >= num_batches())
    throw std::out_of_range("DataLoader::batch: index " + std::to_string(i) + " out of range for " +
                            std::to_string(num_batches()) + " batches");
  if (static_cast<std::int64_t>(order_.size()) != size())
    throw std::logic_error("DataLoader::batch: no epoch started: call reset() (or begin()) first, which takes the "
                           "epoch's order from the sampler");
}

Batch DataLoader::batch(std::int64_t i) const {
  check_batch(i);
  if (std::optional<Batch> b = take_prefetched(i)) return std::move(*b);
  return build(i, 0, batch_rows(i));
}

Batch DataLoader::batch(std::int64_t i, std::int64_t row_begin, std::int64_t rows) const {
  check_batch(i);
  const std::int64_t size = batch_rows(i);
  if (row_begin < 0 || rows < 0 || row_begin > size || rows > size - row_begin)  // no sum: it could overflow
    throw std::out_of_range("DataLoader::batch: rows [" + std::to_string(row_begin) + ", " +
                            (rows > INT64_MAX - std::max<std::int64_t>(row_begin, 0)
                                 ? std::to_string(row_begin) + " + " + std::to_string(rows)
                                 : std::to_string(row_begin + rows)) +
                            ") outside batch " + std::to_string(i) + " of " + std::to_string(size) + " rows");
  return build(i, row_begin, rows);
}

Batch DataLoader::build(std::int64_t i, std::int64_t row_begin, std::int64_t rows) const {
  const std::int64_t begin = i * options_.batch_size + row_begin;
  auto index = [&](std::int64_t r) { return order_[static_cast<std::size_t>(begin + r)]; };
  const bool transformed = !options_.transform.transforms.empty();
  if (!source_ && !transformed) {  // in-memory rows, gathered as stored
    auto gather = [&](const Tensor& t) {
      Shape s = t.shape();
      s[0] = rows;
      Tensor out = Tensor::empty(s, t.dtype());
      std::size_t rb = dtype_size(t.dtype());
      for (std::int64_t d = 1; d < t.dim(); ++d) rb *= static_cast<std::size_t>(t.size(d));
      const auto* src = static_cast<const std::uint8_t*>(t.raw_data());
      auto* dst = static_cast<std::uint8_t*>(out.raw_data());
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto from = static_cast<std::size_t>(index(r));
        if (rb) std::memcpy(dst + static_cast<std::size_t>(r) * rb, src + from * rb, rb);
      }
      return out;
    };
    return Batch{gather(dataset_.X), gather(dataset_.y)};
  }
  // one sample at a time: from the source or a row of X, through the transform
  std::vector<Tensor> xs;
  xs.reserve(static_cast<std::size_t>(rows));
  Tensor y = source_ ? Tensor::empty({rows}, Dtype::Int64) : Tensor();
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t k = index(r);
    Tensor x;
    if (source_) {
      x = source_->get(k);
    } else {
      x = Tensor::empty(dataset_.sample_shape(), Dtype::Float32);
      const std::int64_t per = x.numel();
      std::memcpy(x.data<float>(), dataset_.X.data<float>() + k * per, static_cast<std::size_t>(per) * sizeof(float));
    }
    if (transformed) {
      Generator g = sample_generator(epoch_seed_, 0, k);
      x = options_.transform(x, g);
    }
    if (source_) y.data<std::int64_t>()[r] = source_->target(k);
    if (!xs.empty() && x.shape() != xs.front().shape())
      throw std::runtime_error("DataLoader: sample " + std::to_string(k) + " has another shape than sample " +
                               std::to_string(index(0)) + " of the same batch after the transform");
    xs.push_back(std::move(x));
  }
  Shape s{rows};
  if (!xs.empty()) s.insert(s.end(), xs.front().shape().begin(), xs.front().shape().end());
  Tensor X = Tensor::empty(s, Dtype::Float32);
  const std::int64_t per = xs.empty() ? 0 : xs.front().numel();
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(X.data<float>() + r * per, xs[static_cast<std::size_t>(r)].data<float>(),
                static_cast<std::size_t>(per) * sizeof(float));
  if (!source_) {  // the targets of in-memory rows, gathered
    Shape ys = dataset_.y.shape();
    ys[0] = rows;
    y = Tensor::empty(ys, dataset_.y.dtype());
    std::size_t rb = dtype_size(dataset_.y.dtype());
    for (std::int64_t d = 1; d < dataset_.y.dim(); ++d) rb *= static_cast<std::size_t>(dataset_.y.size(d));
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<std::uint8_t*>(y.raw_data()) + static_cast<std::size_t>(r) * rb,
                  static_cast<const std::uint8_t*>(dataset_.y.raw_data()) + static_cast<std::size_t>(index(r)) * rb, rb);
  }
  return Batch{X, y};
}

DataLoader::iterator DataLoader::begin() {
  reset();
  return iterator(this, 0);
}

}  // namespace tapegrad::data
