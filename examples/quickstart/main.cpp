// Quick start: train a small BatchNorm MLP from C++, evaluate it the right way
// (eval() + NoGradGuard), save it with its running statistics, and load it back.
#include <cstdio>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/optim.h>

using namespace tapegrad;

int main() {
  Generator gen(0);
  // y = x0 - 2·x1 + noise, 256 samples of 8 features
  Tensor x = randn({256, 8}, Dtype::Float32, gen);
  Tensor w_true = Tensor::from_vector({1, -2, 0, 0, 0, 0, 0, 0}, {8, 1}, Dtype::Float32);
  Tensor y = matmul(x, w_true) + 0.1 * randn({256, 1}, Dtype::Float32, gen);

  models::MLPOptions mo;
  mo.norm = models::Norm::Batch;  // Linear -> BatchNorm1d -> ReLU per hidden layer
  models::MLP model({8, 32, 16, 1}, mo, gen);
  optim::Adam opt(model.parameters(), {.lr = 1e-2});

  for (int step = 0; step < 300; ++step) {
    Tensor xb = narrow(x, 0, (step * 32) % 256, 32), yb = narrow(y, 0, (step * 32) % 256, 32);
    model.train();
    opt.zero_grad();
    Tensor loss = layers::mse_loss(model(xb), yb);
    loss.backward();  // walks the tape in reverse
    opt.step();       // updates parameters only; running stats changed in the forward
    if (step % 100 == 0) std::printf("step %3d  train loss %.4f\n", step, loss.item());
  }

  model.eval();  // running statistics, no dependence on batch companions
  NoGradGuard no_grad;
  const double eval_loss = layers::mse_loss(model(x), y).item();
  std::printf("eval loss %.4f\n", eval_loss);

  layers::save(model, "quickstart.safetensors");  // weights + running_mean/var + num_batches_tracked
  models::MLP restored({8, 32, 16, 1}, mo);
  layers::load(restored, "quickstart.safetensors");  // strict: every key, shape and dtype checked
  restored.eval();
  const double restored_loss = layers::mse_loss(restored(x), y).item();
  std::printf("restored eval loss %.4f\n", restored_loss);
  return restored_loss == eval_loss ? 0 : 1;
}
