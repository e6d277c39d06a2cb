// train_images: a CNN trained on your own images, a folder with one subfolder per class.
//
//   train_images --data DIR [--augment] [--val-split 0.1] [--epochs 10] --checkpoint m.safetensors
//   train_images --predict FILE --checkpoint m.safetensors      # prints the class name
//
// DIR/<class>/*.{png,jpg,jpeg} is read by data::ImageFolder (decoded lazily, on --workers
// threads while the step runs); --val-split holds out a random part for validation; a
// per-channel Normalize is fitted on the training part; --augment adds RandomCrop(H, W,
// padding 2) and RandomHorizontalFlip; models::CNN trains under train::fit with Adam. The
// checkpoint keeps the weights, the class names, the normalisation and the image shape, so
// --predict needs nothing else.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.h>

using namespace tapegrad;

namespace {

struct Config {
  std::string data, predict, checkpoint = "train_images.safetensors";
  int epochs = 10;
  std::int64_t batch_size = 64, workers = 1;
  double lr = 1e-3, val_split = 0.1;
  std::uint64_t seed = 0;
  bool augment = false;
};

void check_config(const Config& c) {
  if (c.data.empty() == c.predict.empty()) throw std::invalid_argument("give either --data DIR or --predict FILE");
  if (c.epochs < 1) throw std::invalid_argument("--epochs: expected an integer >= 1, got " + std::to_string(c.epochs));
  if (c.batch_size < 1)
    throw std::invalid_argument("--batch-size: expected an integer >= 1, got " + std::to_string(c.batch_size));
  if (c.workers < 0) throw std::invalid_argument("--workers: expected an integer >= 0, got " + std::to_string(c.workers));
  if (!(std::isfinite(c.lr) && c.lr > 0)) throw std::invalid_argument("--lr: expected a finite number > 0, got " + std::to_string(c.lr));
  if (!(c.val_split >= 0 && c.val_split < 1))
    throw std::invalid_argument("--val-split: expected a fraction in [0, 1), got " + std::to_string(c.val_split));
}

models::CNNOptions cnn_for(const Shape& image, std::int64_t classes) {
  models::CNNOptions o;  // the reference net, sized to the images and the classes
  o.in_channels = image[0];
  o.height = image[1];
  o.width = image[2];
  o.num_classes = classes;
  return o;
}

int train_folder(const Config& c) {
  check_output_file(c.checkpoint);
  Generator gen(c.seed), init(c.seed + 1);
  auto folder = std::make_shared<const data::ImageFolder>(c.data);
  const Shape shape = folder->sample_shape();
  const auto classes = static_cast<std::int64_t>(folder->classes().size());
  std::printf("%s: %lld images of (%lld, %lld, %lld), %lld classes\n", c.data.c_str(), static_cast<long long>(folder->size()),
              static_cast<long long>(shape[0]), static_cast<long long>(shape[1]), static_cast<long long>(shape[2]),
              static_cast<long long>(classes));
  // a random held-out part, as torch's random_split: the first N - V of one permutation train
  const std::int64_t n_val = static_cast<std::int64_t>(std::floor(c.val_split * static_cast<double>(folder->size())));
  std::vector<std::int64_t> perm = data::randperm(folder->size(), gen);
  std::vector<std::int64_t> train_idx(perm.begin(), perm.end() - n_val), val_idx(perm.end() - n_val, perm.end());
  if (train_idx.empty()) throw std::invalid_argument("--val-split leaves no training image");
  auto train_part = std::make_shared<const data::Subset>(folder, train_idx);
  const data::Normalize norm = data::Normalize::fit(*train_part);

  data::DataLoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.shuffle = true;
  lo.num_workers = c.workers;
  if (c.augment) {
    lo.transform.transforms.push_back(data::RandomCrop({shape[1], shape[2]}, 2));
    lo.transform.transforms.push_back(data::RandomHorizontalFlip());
  }
  lo.transform.transforms.push_back(norm);
  data::DataLoader loader(train_part, lo, gen);
  data::Dataset val;
  if (n_val > 0) {
    val = folder->load(val_idx);
    val.X = norm(val.X);
  }

  models::CNN model(cnn_for(shape, classes), init);
  optim::Adam opt(model.parameters(), optim::AdamOptions{c.lr});
  train::FitOptions fo;
  fo.epochs = c.epochs;
  fo.generator = &gen;
  if (n_val > 0) fo.validation = &val;
  const train::FitResult r = train::fit(model, loader, layers::CrossEntropyLoss{}, opt, nullptr, fo);
  for (const train::EpochLogs& e : r.history) {
    std::printf("epoch %2d  loss %.4f", e.epoch, e.get("loss"));
    if (n_val > 0) std::printf("  val_loss %.4f  val_accuracy %.2f%%", e.get("val_loss"), 100 * e.get("val_accuracy"));
    std::printf("  %.0f images/s\n", e.get("samples_per_second"));
  }

  layers::SaveOptions so;
  for (const auto& [name, t] : norm.state_dict()) so.extra_tensors.push_back({"normalize." + name, t});
  so.extra_tensors.push_back({"image.shape", Tensor::from_int64({shape[0], shape[1], shape[2]}, {3})});
  so.metadata = data::class_names_metadata(folder->classes());
  layers::save(model, c.checkpoint, so);
  std::printf("saved %s (weights, %lld class names, normalisation)\n", c.checkpoint.c_str(), static_cast<long long>(classes));
  return 0;
}

int predict_file(const Config& c) {
  const layers::CheckpointExtras ex = layers::load_checkpoint_extras(c.checkpoint);
  const std::vector<std::string> names = data::class_names_from_metadata(ex.metadata);
  const Tensor* shape_t = ex.find("image.shape");
  if (!shape_t || shape_t->dtype() != Dtype::Int64 || shape_t->numel() != 3)
    throw std::invalid_argument(c.checkpoint + ": no int64 (3) \"image.shape\" extra (not written by train_images)");
  const Shape shape(shape_t->data<std::int64_t>(), shape_t->data<std::int64_t>() + 3);
  std::vector<std::pair<std::string, Tensor>> ns;
  for (const auto& [name, t] : ex.tensors)
    if (name.rfind("normalize.", 0) == 0) ns.push_back({name.substr(10), t});
  const data::Normalize norm = data::Normalize::from_state_dict(ns);

  models::CNN model(cnn_for(shape, static_cast<std::int64_t>(names.size())));
  layers::load(model, c.checkpoint);
  model.eval();
  NoGradGuard no_grad;
  data::ImageFolderOptions io;  // read as the training folder was, resized if needed
  io.size = {shape[1], shape[2]};
  io.channels = shape[0];
  const Tensor x = data::read_image(c.predict, io);
  const Tensor logits = model(unsqueeze(norm(x), 0));
  const std::int64_t k = argmax(logits, 1).data<std::int64_t>()[0];
  std::printf("%s: %s\n", c.predict.c_str(), names[static_cast<std::size_t>(k)].c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"train_images: a CNN on a folder of images, one subfolder per class; or a prediction"};
  app.add_option("--data", c.data, "the folder DIR/<class>/*.{png,jpg,jpeg}");
  app.add_option("--predict", c.predict, "print the class of this image file (with --checkpoint)");
  app.add_option("--checkpoint", c.checkpoint, "the checkpoint written by training, read by --predict")->capture_default_str();
  app.add_option("--epochs", c.epochs, "training epochs")->capture_default_str();
  app.add_option("--batch-size", c.batch_size, "mini-batch images")->capture_default_str();
  app.add_option("--lr", c.lr, "Adam's learning rate")->capture_default_str();
  app.add_option("--val-split", c.val_split, "part of the images held out for validation")->capture_default_str();
  app.add_option("--workers", c.workers, "threads decoding the next batches")->capture_default_str();
  const CLI::Validator non_negative(
      [](std::string& v) { return v.find('-') == std::string::npos ? std::string() : "expected an integer >= 0, got " + v; },
      "UINT");
  app.add_option("--seed", c.seed, "seed of the split, the weights, the shuffles and the augmentation")
      ->capture_default_str()
      ->check(non_negative);
  app.add_flag("--augment", c.augment, "RandomCrop(H, W, padding 2) and RandomHorizontalFlip on the training images");
  CLI11_PARSE(app, argc, argv);
  try {
    check_config(c);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "train_images: %s\n", e.what());
    return 2;
  }
  try {
    return c.predict.empty() ? train_folder(c) : predict_file(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_images: %s\n", e.what());
    return 1;
  }
}
