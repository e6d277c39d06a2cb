// train_images: a CNN trained on your own images, a folder with one subfolder per class.
//
//   train_images --data DIR [--augment] [--val-split 0.1] [--epochs 10] --checkpoint m.safetensors
//                [--test DIR] [--schedule cosine] [--threads N] [--drop-last] [--val-size N]
//   train_images --predict FILE --checkpoint m.safetensors      # prints the class name
//   mpirun -np R train_images --data DIR ...                     # data parallel over R ranks
//
// DIR/<class>/*.{png,jpg,jpeg} is read by data::ImageFolder (decoded lazily, on --workers
// threads while the step runs); --val-split holds out a random part for validation; a
// per-channel Normalize is fitted on the training part; --augment adds RandomCrop(H, W,
// padding 2) and RandomHorizontalFlip; models::CNN trains under train::fit with Adam. The
// checkpoint keeps the weights (of the best validation epoch when there is a validation part,
// else the last), the class names, the normalisation and the image shape, so --predict needs
// nothing else; --test DIR evaluates those weights on another folder with the same classes.
// Under mpirun every rank reads the same folder and draws the same split; a
// distributed::DistributedSampler gives each rank its share of the training part (the
// loader's batch is --batch-size / R, decoded on --workers threads), train::fit averages the
// gradients, rank 0 prints and writes the checkpoint.
#include <CLI/CLI.hpp>
#include "cli_checks.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/wait_policy.h>
#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/tapegrad.h>
#include <tapegrad/train/data_parallel.h>
#ifdef TAPEGRAD_IMAGES_MPI
#include <tapegrad/distributed/distributed_sampler.h>
#include <tapegrad/distributed/environment.h>
#endif

using namespace tapegrad;

namespace {

struct Config {
  std::string data, predict, test, checkpoint = "train_images.safetensors", schedule = "none";
  int epochs = 10, threads = 0;
  std::int64_t batch_size = 64, workers = 1, val_size = -1;  ///< val_size -1: from val_split
  double lr = 1e-3, val_split = 0.1;
  std::uint64_t seed = 0;
  bool augment = false, drop_last = false;
  std::shared_ptr<train::DataParallel> parallel;  ///< null: one process
};

bool is_main(const Config& c) { return !c.parallel || c.parallel->rank() == 0; }

void check_config(const Config& c) {
  if (c.data.empty() == c.predict.empty()) throw std::invalid_argument("give either --data DIR or --predict FILE");
  if (c.epochs < 1) throw std::invalid_argument("--epochs: expected an integer >= 1, got " + std::to_string(c.epochs));
  if (c.batch_size < 1)
    throw std::invalid_argument("--batch-size: expected an integer >= 1, got " + std::to_string(c.batch_size));
  if (c.workers < 0 || c.workers > 1024)
    throw std::invalid_argument("--workers: expected an integer in [0, 1024], got " + std::to_string(c.workers));
  if (!(std::isfinite(c.lr) && c.lr > 0)) throw std::invalid_argument("--lr: expected a finite number > 0, got " + std::to_string(c.lr));
  if (!(c.val_split >= 0 && c.val_split < 1))
    throw std::invalid_argument("--val-split: expected a fraction in [0, 1), got " + std::to_string(c.val_split));
  if (c.val_size < -1) throw std::invalid_argument("--val-size: expected an integer >= 0, got " + std::to_string(c.val_size));
  if (c.threads < 0 || c.threads > 1024)
    throw std::invalid_argument("--threads: expected an integer in [0, 1024] (0: all cores), got " + std::to_string(c.threads));
  if (c.schedule != "none" && c.schedule != "cosine")
    throw std::invalid_argument("--schedule: expected none or cosine, got '" + c.schedule + "'");
  if (!c.test.empty() && c.data.empty()) throw std::invalid_argument("--test DIR needs --data DIR (it evaluates the trained weights)");
}

// Keeps a copy of the weights and buffers of the epoch with the best validation accuracy.
class KeepBest : public train::Callback {
 public:
  std::string name() const override { return "KeepBest"; }
  void on_epoch_end(train::TrainState& s) override {
    const double acc = s.history.back().get("val_accuracy");
    if (acc <= best_) return;
    best_ = acc;
    epoch_ = s.epoch;
    state_ = layers::StateDict();
    for (const auto& [k, v] : s.model->state_dict()) state_.insert(k, v.clone());
  }
  int epoch() const { return epoch_; }
  double accuracy() const { return best_; }
  const layers::StateDict& state() const { return state_; }

 private:
  double best_ = -1;
  int epoch_ = 0;
  layers::StateDict state_;
};

models::CNNOptions cnn_for(const Shape& image, std::int64_t classes) {
  models::CNNOptions o;  // the reference net, sized to the images and the classes
  o.in_channels = image[0];
  o.height = image[1];
  o.width = image[2];
  o.num_classes = classes;
  return o;
}

int train_folder(const Config& c) {
  if (is_main(c)) check_output_file(c.checkpoint);
  if (c.threads > 0) set_num_threads(c.threads);
  Generator gen(c.seed), init(c.seed + 1);
  auto folder = std::make_shared<const data::ImageFolder>(c.data);
  const Shape shape = folder->sample_shape();
  const auto classes = static_cast<std::int64_t>(folder->classes().size());
  std::shared_ptr<const data::ImageFolder> test_folder;
  if (!c.test.empty()) {  // read before training: a wrong folder is reported before the work
    data::ImageFolderOptions io;
    io.size = {shape[1], shape[2]};
    io.channels = shape[0];
    test_folder = std::make_shared<const data::ImageFolder>(c.test, io);
    if (test_folder->classes() != folder->classes())
      throw std::invalid_argument("--test " + c.test + ": expected the " + std::to_string(classes) + " classes of --data " +
                                  c.data + ", got " + std::to_string(test_folder->classes().size()) +
                                  " class folders that differ (first: '" + test_folder->classes().front() + "')");
  }
  if (is_main(c))
    std::printf("%s: %lld images of (%lld, %lld, %lld), %lld classes\n", c.data.c_str(), static_cast<long long>(folder->size()),
              static_cast<long long>(shape[0]), static_cast<long long>(shape[1]), static_cast<long long>(shape[2]),
              static_cast<long long>(classes));
  // a random held-out part, as torch's random_split: the first N - V of one permutation train
  const std::int64_t n_val = c.val_size >= 0
                                 ? c.val_size
                                 : static_cast<std::int64_t>(std::floor(c.val_split * static_cast<double>(folder->size())));
  if (n_val >= folder->size())
    throw std::invalid_argument("--val-size " + std::to_string(n_val) + ": expected fewer than the " +
                                std::to_string(folder->size()) + " images of " + c.data);
  std::vector<std::int64_t> perm = data::randperm(folder->size(), gen);
  std::vector<std::int64_t> train_idx(perm.begin(), perm.end() - n_val), val_idx(perm.end() - n_val, perm.end());
  if (train_idx.empty()) throw std::invalid_argument("--val-split leaves no training image");
  auto train_part = std::make_shared<const data::Subset>(folder, train_idx);
  const data::Normalize norm = data::Normalize::fit(*train_part);

  data::DataLoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.shuffle = true;
  lo.drop_last = c.drop_last;
  lo.num_workers = c.workers;
#ifdef TAPEGRAD_IMAGES_MPI
  if (c.parallel) {  // each rank batches, decodes and prefetches its own share only
    const int world = c.parallel->world_size();
    distributed::DistributedSamplerOptions so;
    so.seed = c.seed;  // the same permutation on every rank, reshuffled per epoch by fit's set_epoch
    auto sampler = std::make_shared<distributed::DistributedSampler>(train_part->size(), world, c.parallel->rank(), so);
    lo.shuffle = false;  // the sampler shuffles
    lo.batch_size = c.batch_size / world;
    if (is_main(c))
      std::printf("each rank: %lld of %lld training images an epoch (DistributedSampler), %lld worker threads\n",
                  static_cast<long long>(sampler->num_samples()), static_cast<long long>(train_part->size()),
                  static_cast<long long>(c.workers));
    lo.sampler = std::move(sampler);
  }
#endif
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

  auto model = std::make_shared<models::CNN>(cnn_for(shape, classes), init);
  if (c.parallel) c.parallel->prepare(model);  // before the optimizer
  const auto make_adam = [&](std::vector<Tensor> p) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions{c.lr});
  };
  std::unique_ptr<optim::Optimizer> opt =
      c.parallel ? c.parallel->make_optimizer(model->parameters(), make_adam) : make_adam(model->parameters());
  std::unique_ptr<optim::LRScheduler> sched;
  if (c.schedule == "cosine") sched = std::make_unique<optim::CosineAnnealingLR>(*opt, c.epochs);
  train::FitOptions fo;
  fo.epochs = c.epochs;
  fo.generator = &gen;
  fo.parallel = c.parallel;
  if (n_val > 0) fo.validation = &val;
  auto best = std::make_shared<KeepBest>();
  std::vector<train::CallbackPtr> callbacks;
  if (n_val > 0) callbacks.push_back(best);
  const train::FitResult r = train::fit(*model, loader, layers::CrossEntropyLoss{}, *opt, sched.get(), fo, callbacks);
  if (is_main(c))
    for (const train::EpochLogs& e : r.history) {
      std::printf("epoch %2d  loss %.4f", e.epoch, e.get("loss"));
      if (n_val > 0) std::printf("  val_loss %.4f  val_accuracy %.2f%%", e.get("val_loss"), 100 * e.get("val_accuracy"));
      std::printf("  %.0f images/s  %.2f s (CPU %.2f s)\n", e.get("samples_per_second"), e.get("seconds"),
                  e.get("cpu_seconds"));
    }
  if (best->epoch() > 0) {  // the checkpoint and the test see the best validation epoch
    model->load_state_dict(best->state());
    if (is_main(c))
      std::printf("best validation accuracy %.2f%% at epoch %d\n", 100 * best->accuracy(), best->epoch());
  }
  if (test_folder) {
    data::Dataset test = test_folder->load();
    test.X = norm(test.X);
    train::EvalOptions eo;
    eo.parallel = c.parallel.get();
    const train::Evaluation e = train::evaluate(*model, test, eo);
    if (is_main(c))
      std::printf("test accuracy %.2f%% (%lld images of %s)\n", 100 * e.accuracy(), static_cast<long long>(e.count),
                  c.test.c_str());
  }
  if (!is_main(c)) return 0;

  layers::SaveOptions so;
  for (const auto& [name, t] : norm.state_dict()) so.extra_tensors.push_back({"normalize." + name, t});
  so.extra_tensors.push_back({"image.shape", Tensor::from_int64({shape[0], shape[1], shape[2]}, {3})});
  so.metadata = data::class_names_metadata(folder->classes());
  layers::save(*model, c.checkpoint, so);
  std::printf("saved %s (weights, %lld class names, normalisation)\n", c.checkpoint.c_str(), static_cast<long long>(classes));
  return 0;
}

// The "image.shape" extra checked against the file's weights before the CNN is built from it:
// its first Conv2d takes C input channels, its first Linear C_last · (H / 2^k) · (W / 2^k)
// inputs after k pooled blocks. An edited shape ([1, 100000, 100000]) would otherwise make us
// allocate that Linear layer (std::bad_alloc) before the weights were compared.
void check_image_shape(const Archive& file, const Shape& shape, const models::CNNOptions& o) {
  for (auto d : shape)
    if (d < 1) return;  // the CNN refuses it, naming the size
  std::int64_t h = shape[1], w = shape[2];
  for (std::size_t i = 0; i < o.channels.size(); ++i) h /= 2, w /= 2;
  const Shape flat{o.channels.back(), h, w};
  if (h < 1 || w < 1 || numel_overflows(flat)) return;  // the CNN refuses it, naming the size
  const Tensor *conv = nullptr, *fc = nullptr;
  std::string conv_key, fc_key;
  for (const auto& [k, t] : file.tensors()) {  // file order = the model's layer order
    if (k.rfind(kArchiveExtraPrefix, 0) == 0 || k.size() < 7 || k.compare(k.size() - 7, 7, ".weight") != 0) continue;
    if (!conv && t.dim() == 4) conv = &t, conv_key = k;
    if (!fc && t.dim() == 2) fc = &t, fc_key = k;
  }
  const std::string where = file.source() + ": its \"image.shape\" " + shape_str(shape) + " does not match its weights: ";
  if (!conv || conv->shape()[1] != shape[0])
    throw std::invalid_argument(where + "expected a first Conv2d weight with " + std::to_string(shape[0]) +
                                " input channels, got " + (conv ? conv_key + " " + shape_str(conv->shape()) : "none"));
  const std::int64_t inputs = numel_of(flat);
  if (!fc || fc->shape()[1] != inputs)
    throw std::invalid_argument(where + "expected a first Linear weight with " + std::to_string(inputs) + " inputs (" +
                                std::to_string(flat[0]) + " x " + std::to_string(h) + " x " + std::to_string(w) +
                                "), got " + (fc ? fc_key + " " + shape_str(fc->shape()) : "none"));
}

int predict_file(const Config& c) {
  if (!std::filesystem::exists(c.checkpoint))  // the default is easy to miss
    throw std::invalid_argument("--checkpoint: no file '" + c.checkpoint + "'" +
                                (c.checkpoint == Config{}.checkpoint ? " (the default: pass the file training wrote)" : ""));
  const Archive file = Archive::load(c.checkpoint);  // read once: the extras, then the weights
  const std::vector<std::string> names = data::class_names_from_metadata(file.metadata());
  const Tensor* shape_t = file.find(std::string(kArchiveExtraPrefix) + "image.shape");
  if (!shape_t || shape_t->dtype() != Dtype::Int64 || shape_t->numel() != 3)
    throw std::invalid_argument(c.checkpoint + ": no int64 (3) \"image.shape\" extra (not written by train_images)");
  const Shape shape(shape_t->data<std::int64_t>(), shape_t->data<std::int64_t>() + 3);
  std::vector<std::pair<std::string, Tensor>> ns;
  for (const auto& [name, t] : file.extras())
    if (name.rfind("normalize.", 0) == 0) ns.push_back({name.substr(10), t});
  const data::Normalize norm = data::Normalize::from_state_dict(ns);

  const models::CNNOptions options = cnn_for(shape, static_cast<std::int64_t>(names.size()));
  check_image_shape(file, shape, options);
  models::CNN model(options);
  layers::load_checkpoint(model, file, layers::LoadOptions{.strict = true});
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
  prefer_passive_wait_policy(argv);  // OpenMP threads sleep, not spin, unless OMP_WAIT_POLICY is set
  Config c;
  bool distributed = false;
  CLI::App app{"train_images: a CNN on a folder of images, one subfolder per class; or a prediction"};
  app.add_option("--data", c.data, "the folder DIR/<class>/*.{png,jpg,jpeg}")
      ->check(tapegrad_cli::non_empty("a folder"));
  app.add_option("--predict", c.predict, "print the class of this image file (with --checkpoint)")
      ->check(tapegrad_cli::non_empty("an image file"));
  app.add_option("--checkpoint", c.checkpoint, "the checkpoint written by training, read by --predict")
      ->check(tapegrad_cli::non_empty("a file path"))->capture_default_str();
  app.add_option("--epochs", c.epochs, "training epochs")->capture_default_str();
  app.add_option("--batch-size", c.batch_size, "mini-batch images")->capture_default_str();
  app.add_option("--lr", c.lr, "Adam's learning rate")->capture_default_str();
  app.add_option("--val-split", c.val_split, "part of the images held out for validation")->capture_default_str();
  app.add_option("--val-size", c.val_size, "images held out for validation (instead of --val-split)");
  app.add_option("--test", c.test, "after training, the accuracy on this folder (the same class folders)")
      ->check(tapegrad_cli::non_empty("a folder"));
  app.add_option("--schedule", c.schedule, "learning-rate schedule over the epochs: none | cosine")->capture_default_str();
  app.add_option("--threads", c.threads, "compute threads (0: all cores)")->capture_default_str();
  app.add_flag("--drop-last", c.drop_last, "drop the last partial batch of each epoch");
  app.add_flag("--distributed", distributed, "initialise MPI even when no MPI launcher is detected");
  app.add_option("--workers", c.workers, "threads decoding the next batches")->capture_default_str();
  app.add_option("--seed", c.seed, "seed of the split, the weights, the shuffles and the augmentation")
      ->capture_default_str()
      ->check(tapegrad_cli::non_negative());
  app.add_flag("--augment", c.augment, "RandomCrop(H, W, padding 2) and RandomHorizontalFlip on the training images");
  if (const auto rc = tapegrad_cli::parse(app, argc, argv, "train_images")) return *rc;  // 2: a refused option
  try {
    check_config(c);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "train_images: %s\n", e.what());
    return 2;
  }
  int world = 1;
#ifdef TAPEGRAD_IMAGES_MPI
  std::optional<distributed::Environment> env;  // under mpirun -np R (or --distributed): R ranks
  try {
    env.emplace(&argc, &argv, distributed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_images: %s\n", e.what());
    return 1;
  }
  world = env->world_size();
  if (world > 1 && !c.predict.empty()) {
    std::fprintf(stderr, "train_images: --predict runs in one process, not under mpirun -np %d\n", world);
    return 2;
  }
  if (world > 1) c.parallel = train::make_mpi_data_parallel(/*sync_bn=*/false);
  if (world > 1 && env->rank() == 0)
    std::printf("data parallel: %d ranks x batch %lld\n", world, static_cast<long long>(c.batch_size / world));
#else
  if (distributed) {
    std::fprintf(stderr, "train_images: --distributed: this build has no MPI (install libopenmpi-dev, see scripts/setup.sh)\n");
    return 2;
  }
#endif
  if (world > 1 && c.batch_size % world != 0) {
    std::fprintf(stderr, "train_images: --batch-size %lld: expected a multiple of the %d ranks\n",
                 static_cast<long long>(c.batch_size), world);
    return 2;
  }
  int rc = 1;
  try {
    rc = c.predict.empty() ? train_folder(c) : predict_file(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_images: %s\n", e.what());
#ifdef TAPEGRAD_IMAGES_MPI
    if (world > 1) distributed::abort_job(e.what());  // the other ranks may wait in a collective
#endif
    rc = 1;
  }
  c.parallel.reset();  // its communicator goes before MPI_Finalize
  return rc;
}
