// The silent mistakes of a first hour, made more than once each, with the library's defaults:
// its stderr (captured into a file) must hold exactly one warning of each mode-check kind.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/data/csv.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/train/train.h>

using namespace tapegrad;

namespace {

// The user's own validation after each epoch, eval() forgotten: once under no-grad, once
// with grad on (a validation loss whose graph is dropped without backward).
struct MyValidation : train::Callback {
  const data::Dataset* val;
  explicit MyValidation(const data::Dataset* v) : val(v) {}
  std::string name() const override { return "my_validation"; }
  void on_epoch_end(train::TrainState& st) override {
    {
      NoGradGuard no_grad;
      (*st.model)(val->X);
    }
    const double loss = layers::CrossEntropyLoss{}((*st.model)(val->X), val->y).item();
    if (!(loss >= 0)) std::printf("validation loss %g\n", loss);
  }
};

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

int main() {
  ::unsetenv("TAPEGRAD_MODE_CHECKS");  // the defaults
  std::fflush(stderr);
  const int saved_stderr = ::dup(2);
  std::FILE* capture = std::fopen(STDERR_FILE, "w");
  ::dup2(::fileno(capture), 2);

  const data::Dataset iris = data::read_csv(IRIS_CSV, {.label = "species"});
  Generator gen(0);
  const auto [train_raw, val_raw] = data::train_val_split(iris, 30, gen);
  const data::Standardizer scaler = data::Standardizer::fit(train_raw.X);
  const data::Dataset train_ds = scaler.transform(train_raw), val = scaler.transform(val_raw);
  models::MLP model({4, 16, 3}, {.norm = models::Norm::Batch}, gen);
  optim::Adam opt(model.parameters(), {.lr = 0.01});
  data::DataLoader loader(train_ds, {.batch_size = 16, .shuffle = true, .drop_last = true}, gen);
  const train::FitResult r = train::fit(model, loader, layers::CrossEntropyLoss{}, opt, nullptr,
                                        {.epochs = 3, .generator = &gen}, {std::make_shared<MyValidation>(&val)});

  layers::save(model, WEIGHTS_FILE, /*include_buffers=*/false);  // a weights-only file
  double accuracy = 0;
  for (int i = 0; i < 2; ++i) {
    models::MLP fresh({4, 16, 3}, {.norm = models::Norm::Batch}, gen);
    layers::load(fresh, WEIGHTS_FILE, /*strict=*/false);
    accuracy = train::evaluate(fresh, val).accuracy();
  }

  std::fflush(stderr);
  ::dup2(saved_stderr, 2);
  std::fclose(capture);
  std::ifstream in(STDERR_FILE);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::printf("captured stderr:\n%s", text.c_str());
  std::printf("fit counted bn_train_no_grad x%lld; accuracy after the weights-only load %.3f\n",
              static_cast<long long>(r.mode_issues.count("bn_train_no_grad") ? r.mode_issues.at("bn_train_no_grad") : 0),
              accuracy);
  const int warnings = count(text, "[tapegrad] [warning]");
  const int no_grad = count(text, "BatchNorm1d(16) ran forward in train mode under NoGradGuard");
  const int not_loaded = count(text, "load_state_dict (strict=false): the state dict lacks the running statistics");
  const int never = count(text, "BatchNorm1d(16) ran forward in eval mode on running statistics that were never updated");
  const int unreached = count(text, "BatchNorm1d(16) ran forward in train mode with gradients on, and its graph was "
                                    "freed without a backward");
  const auto fit_count = [&](const char* kind) {
    return r.mode_issues.count(kind) ? r.mode_issues.at(kind) : std::int64_t{0};
  };
  if (warnings != 4 || no_grad != 1 || not_loaded != 1 || never != 1 || unreached != 1 ||
      fit_count("bn_train_no_grad") != 3 || fit_count("bn_train_no_backward") != 3) {
    std::printf("FAILED: expected 4 warnings, one of each kind, and 3 of each train-mode kind in fit; got %d (train/no-grad "
                "%d, train/no-backward %d, not loaded %d, never updated %d; fit: %lld, %lld)\n", warnings, no_grad,
                unreached, not_loaded, never, static_cast<long long>(fit_count("bn_train_no_grad")),
                static_cast<long long>(fit_count("bn_train_no_backward")));
    return 1;
  }
  std::printf("ok: one warning of each kind\n");
  return 0;
}
