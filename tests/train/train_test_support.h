#pragma once
// Shared by the tests of train/: class-index tensors, a small separable classification set,
// the networks and optimizers the fit tests train, and a scratch folder.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/data/dataset.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/adam.h>

#include "temp_dir_support.h"

namespace train_test {

/// The int64 tensor of shape (n) holding v: class indices for the metrics.
inline tapegrad::Tensor labels(const std::vector<std::int64_t>& v) {
  return tapegrad::Tensor::from_int64(v, {static_cast<std::int64_t>(v.size())});
}

/// n rows of 8 features in 3 classes: class c is centred at +2 on features 2c and 2c+1
/// (unit Gaussian noise), so an MLP separates them well but not trivially.
inline tapegrad::data::Dataset blobs(std::int64_t n, std::uint64_t seed) {
  using namespace tapegrad;
  Generator g(seed);
  std::vector<double> x;
  std::vector<std::int64_t> y;
  const Tensor noise = randn({n, 8}, Dtype::Float64, g);
  const std::vector<double> z = noise.to_vector();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t c = g.randint(3);
    y.push_back(c);
    for (std::int64_t j = 0; j < 8; ++j)
      x.push_back(z[static_cast<std::size_t>(i * 8 + j)] + (j / 2 == c ? 2.0 : 0.0));
  }
  return data::Dataset::make(Tensor::from_vector(x, {n, 8}, Dtype::Float32), Tensor::from_int64(y, {n}));
}

/// 8 -> 16 -> BatchNorm -> ReLU -> Dropout(0.2) -> 3, weights from `init`, masks from `drop`.
inline std::shared_ptr<tapegrad::models::MLP> mlp(tapegrad::Generator& init, tapegrad::Generator* drop) {
  tapegrad::models::MLPOptions o;
  o.norm = tapegrad::models::Norm::Batch;
  o.dropout = 0.2;
  o.dropout_gen = drop;
  return std::make_shared<tapegrad::models::MLP>(std::vector<std::int64_t>{8, 16, 3}, o, init);
}

/// The fit tests' setup, rebuilt identically from the same seeds: blobs(n_train, 1) to train
/// on and blobs(n_val, 2) to validate on, mlp() (init seed 8, dropout from gen, seed 7),
/// Adam at lr 0.01 and a shuffling loader of `batch` rows that drops the last short batch.
struct BlobsSetup {
  BlobsSetup(std::int64_t n_train, std::int64_t n_val, std::int64_t batch = 32)
      : train_ds(blobs(n_train, 1)),
        val_ds(blobs(n_val, 2)),
        model(mlp(init, &gen)),
        opt{model->parameters(), tapegrad::optim::AdamOptions{0.01}},
        loader{train_ds, {batch, true, true}, gen} {}
  tapegrad::Generator gen{7}, init{8};
  tapegrad::data::Dataset train_ds, val_ds;
  std::shared_ptr<tapegrad::models::MLP> model;
  tapegrad::optim::Adam opt;
  tapegrad::data::DataLoader loader;
};

using tapegrad::test::TempDir;

}  // namespace train_test
