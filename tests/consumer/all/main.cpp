// Trains a Linear -> BatchNorm1d -> ReLU -> Linear net for a few SGD steps through an installed
// tapegrad and checks the things a user relies on: the loss falls, the running statistics move,
// and eval() gives a batch-independent prediction.
#include <cmath>
#include <cstdio>

#include <tapegrad/tapegrad.h>

using namespace tapegrad;

int main() {
  // the kernel levels the package's config announced (tapegrad_ISA_VARIANTS) are the ones it carries
  if (static_cast<int>(isa_variants().size()) != TAPEGRAD_EXPECTED_ISA_VARIANTS) {
    std::printf("FAIL: the package announces %d ISA variants, the library carries %zu\n", TAPEGRAD_EXPECTED_ISA_VARIANTS,
                isa_variants().size());
    return 1;
  }
  Generator gen(1);
  Tensor x = randn({64, 4}, Dtype::Float32, gen);
  Tensor w = Tensor::from_vector({1, -1, 0.5, 0}, {4, 1}, Dtype::Float32);
  Tensor y = matmul(x, w);

  models::MLPOptions mo;
  mo.norm = models::Norm::Batch;
  models::MLP model({4, 16, 1}, mo, gen);
  optim::SGD opt(model.parameters(), {.lr = 0.1});
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    model.train();
    opt.zero_grad();
    Tensor loss = layers::mse_loss(model(x), y);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item();
  }
  model.eval();
  NoGradGuard no_grad;
  const double whole = narrow(model(x), 0, 0, 1).item();
  const double alone = model(narrow(x, 0, 0, 1)).item();
  std::printf("loss %.5f -> %.5f; eval prediction of row 0: %.6f (batch of 64), %.6f (alone)\n", first, last,
              whole, alone);
  if (!(last < 0.5 * first)) return 1;
  if (std::abs(whole - alone) > 1e-5) return 2;
  return 0;
}
