// Iris from a CSV file: train an MLP with early stopping, keep the best checkpoint (input
// standardisation inside), report the metrics, then predict one raw row with a fresh model
// rebuilt from that file alone.
#include <cstdio>

#include <tapegrad/data/csv.h>
#include <tapegrad/layers/loss.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/train/train.h>

using namespace tapegrad;

int main() {
  const data::Dataset iris = data::read_csv(IRIS_CSV, {.label = "species"});
  Generator gen(0);
  const auto [train_raw, val_raw] = data::train_val_split(iris, 30, gen);
  const data::Standardizer scaler = data::Standardizer::fit(train_raw.X);  // per feature
  models::MLP model({4, 16, 3}, {.norm = models::Norm::Batch}, gen);
  optim::Adam opt(model.parameters(), {.lr = 0.01});
  data::DataLoader loader(scaler.transform(train_raw), {.batch_size = 16, .shuffle = true, .drop_last = true}, gen);
  const data::Dataset val = scaler.transform(val_raw);
  train::FitOptions o{.epochs = 300, .validation = &val, .generator = &gen};
  o.checkpoint_extras = train::standardizer_extras(scaler);
  const train::FitResult r = train::fit(
      model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o,
      {std::make_shared<train::ProgressBar>(), std::make_shared<train::EarlyStopping>(train::EarlyStoppingOptions{.patience = 15}),
       std::make_shared<train::ModelCheckpoint>(train::ModelCheckpointOptions{.path = BEST_CHECKPOINT})});
  std::printf("%d epochs%s\n", r.last_epoch, r.stopped_early ? (", " + r.stop_reason).c_str() : "");

  Generator other(42);  // a fresh model: everything it knows comes from the checkpoint
  models::MLP fresh({4, 16, 3}, {.norm = models::Norm::Batch}, other);
  const train::LoadedCheckpoint ck = train::load_model(BEST_CHECKPOINT, fresh);
  const data::Standardizer stored = train::read_standardizer(ck);
  const train::Evaluation e = train::evaluate(fresh, stored.transform(val_raw));
  std::printf("best epoch %lld: validation accuracy %.3f\n%s", static_cast<long long>(ck.epoch), e.accuracy(),
              train::format_report(train::classification_report(e.confusion), iris.class_names).c_str());
  const Tensor raw_row = Tensor::from_vector({6.7, 3.0, 5.2, 2.3}, {1, 4}, Dtype::Float32);  // a virginica
  const auto k = static_cast<std::size_t>(train::predicted_classes(train::predict(fresh, stored.transform(raw_row))).item());
  std::printf("raw row [6.7, 3.0, 5.2, 2.3] -> %s\n", iris.class_names.at(k).c_str());
  return e.accuracy() >= 0.85 && iris.class_names[k] == "virginica" ? 0 : 1;
}
