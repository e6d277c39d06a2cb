// A user's program: a WGAN-GP gradient penalty and a Hessian-vector product, both checked
// against central differences of first-order gradients (float64). Exits 1 on a mismatch.
#include <cmath>
#include <cstdio>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/linear.h>

using namespace tapegrad;

namespace {
layers::Linear make_critic() {
  Generator gen(3);
  return layers::Linear(3, 1, true, Dtype::Float64, gen);
}

// penalty(θ) = mean over rows of (||d out/d x_row|| - 1)², out = Σ tanh(critic(x))
Tensor penalty(layers::Linear& critic, const Tensor& x0, bool create_graph) {
  Tensor x = x0.clone();
  x.requires_grad_();
  Tensor out = sum(tanh(critic.forward(x)));
  autograd::GradOptions o;
  o.create_graph = create_graph;
  Tensor g = autograd::grad({out}, {x}, {}, o)[0];
  return mean(square(add(sqrt(sum(square(g), {1})), -1.0)));
}

bool close(double got, double want, const char* what) {
  const bool ok = std::abs(got - want) <= 1e-6 + 1e-5 * std::abs(want);
  std::printf("%s: %.9f vs finite differences %.9f %s\n", what, got, want, ok ? "ok" : "MISMATCH");
  return ok;
}
}  // namespace

int main() {
  Generator gen(7);
  const Tensor x = randn({5, 3}, Dtype::Float64, gen);
  layers::Linear critic = make_critic();
  Tensor p = penalty(critic, x, true);
  p.backward();
  bool ok = true;
  const double eps = 1e-6;
  for (std::int64_t i = 0; i < critic.weight.numel(); ++i) {  // d penalty / d weight_i
    double* w = critic.weight.data<double>();
    const double w0 = w[i];
    w[i] = w0 + eps;
    const double up = penalty(critic, x, false).item();
    w[i] = w0 - eps;
    const double down = penalty(critic, x, false).item();
    w[i] = w0;
    ok &= close(critic.weight.grad().at(i), (up - down) / (2 * eps), "gradient penalty d/dw");
  }
  // H·v of a mean squared error through the critic, against differences of gradients
  const Tensor target = randn({5, 1}, Dtype::Float64, gen);
  auto loss = [&] { return mean(square(sub(tanh(critic.forward(x)), target))); };
  const Tensor vw = randn(critic.weight.shape(), Dtype::Float64, gen), vb = randn({1}, Dtype::Float64, gen);
  std::vector<Tensor> hv = autograd::hessian_vector_product(loss(), {critic.weight, critic.bias}, {vw, vb});
  auto grads_at = [&](double s) {
    Tensor w0 = critic.weight.clone(), b0 = critic.bias.clone();
    for (std::int64_t i = 0; i < vw.numel(); ++i) critic.weight.data<double>()[i] = w0.at(i) + s * vw.at(i);
    critic.bias.data<double>()[0] = b0.at(0) + s * vb.at(0);
    std::vector<Tensor> g = autograd::grad({loss()}, {critic.weight, critic.bias});
    for (std::int64_t i = 0; i < vw.numel(); ++i) critic.weight.data<double>()[i] = w0.at(i);
    critic.bias.data<double>()[0] = b0.at(0);
    return g;
  };
  const std::vector<Tensor> up = grads_at(eps), down = grads_at(-eps);
  for (std::int64_t i = 0; i < vw.numel(); ++i)
    ok &= close(hv[0].at(i), (up[0].at(i) - down[0].at(i)) / (2 * eps), "Hessian-vector product (weight)");
  ok &= close(hv[1].at(0), (up[1].at(0) - down[1].at(0)) / (2 * eps), "Hessian-vector product (bias)");
  std::printf(ok ? "second derivatives: all match\n" : "second derivatives: MISMATCH\n");
  return ok ? 0 : 1;
}
