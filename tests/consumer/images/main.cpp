// A PNG folder -> a small CNN -> a checkpoint -> a prediction naming the class.
#include <cstdio>
#include <memory>

#include <tapegrad/tapegrad.h>

using namespace tapegrad;

int main() {
  Generator gen(0);
  auto folder = std::make_shared<const data::ImageFolder>("fmnist_png/train");  // <class>/*.png
  data::DataLoader loader(folder, {.batch_size = 8, .shuffle = true, .num_workers = 1}, gen);
  models::CNN model({.num_classes = static_cast<std::int64_t>(folder->classes().size())}, gen);
  optim::Adam opt(model.parameters(), optim::AdamOptions{3e-3});
  train::fit(model, loader, layers::CrossEntropyLoss{}, opt, nullptr, {.epochs = 15});
  layers::save(model, "images.safetensors", {.metadata = data::class_names_metadata(folder->classes())});

  models::CNN loaded({.num_classes = 10});  // a fresh model: everything comes from the file
  layers::LoadedCheckpoint ck = layers::load_checkpoint(loaded, "images.safetensors");
  loaded.eval();
  NoGradGuard no_grad;
  Tensor x = unsqueeze(data::read_image("fmnist_png/train/Trouser/00016.png"), 0);  // (1, 1, 28, 28)
  std::int64_t k = argmax(loaded(x), 1).data<std::int64_t>()[0];
  std::printf("class: %s\n", data::class_names_from_metadata(ck.extras.metadata)[k].c_str());
}
