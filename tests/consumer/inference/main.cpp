// Inference through the components core + layers + models only: an eval-mode MLP with
// BatchNorm1d, whose running statistics are set by hand, must give the affine map
// y = W2·relu((W1·x − μ)/√(σ² + ε)·γ + β) + b2 computed here in double.
#include <cmath>
#include <cstdio>

#include <tapegrad/core/core.h>
#include <tapegrad/models/mlp.h>

using namespace tapegrad;

int main() {
  Generator gen(3);
  models::MLPOptions mo;
  mo.norm = models::Norm::Batch;
  models::MLP model({3, 4, 2}, mo, gen);
  auto sd = model.state_dict();
  // running statistics that differ from the defaults (0, 1), so eval() must use them
  for (auto& [name, t] : sd)
    if (name.find("running_mean") != std::string::npos)
      for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.1f * static_cast<float>(i + 1);
    else if (name.find("running_var") != std::string::npos)
      for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.5f + static_cast<float>(i);
  model.eval();
  NoGradGuard ng;
  Tensor x = Tensor::from_vector({0.5, -1.0, 2.0}, {1, 3}, Dtype::Float32);
  Tensor y = model(x);

  // the same map by hand, from the state dict
  std::vector<std::string> names;
  for (auto& [name, t] : sd) names.push_back(name);
  auto get = [&](const std::string& suffix, int layer) -> Tensor {
    int seen = 0;
    for (auto& [name, t] : sd)
      if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        if (seen++ == layer) return t;
    std::fprintf(stderr, "no tensor *%s number %d\n", suffix.c_str(), layer);
    std::exit(2);
  };
  Tensor W1 = get("weight", 0), b1 = get("bias", 0), gamma = get("weight", 1), beta = get("bias", 1);
  Tensor mu = get("running_mean", 0), var = get("running_var", 0), W2 = get("weight", 2), b2 = get("bias", 2);
  const float* xv = x.data<float>();
  double h[4];
  for (int j = 0; j < 4; ++j) {
    double a = b1.data<float>()[j];
    for (int k = 0; k < 3; ++k) a += double(W1.data<float>()[j * 3 + k]) * xv[k];
    a = (a - mu.data<float>()[j]) / std::sqrt(double(var.data<float>()[j]) + 1e-5) * gamma.data<float>()[j] +
        beta.data<float>()[j];
    h[j] = a > 0 ? a : 0;
  }
  int bad = 0;
  for (int i = 0; i < 2; ++i) {
    double o = b2.data<float>()[i];
    for (int j = 0; j < 4; ++j) o += double(W2.data<float>()[i * 4 + j]) * h[j];
    const double got = y.data<float>()[i];
    std::printf("output %d: %.7f expected %.7f\n", i, got, o);
    if (std::abs(got - o) > 1e-5 * (1 + std::abs(o))) ++bad;
  }
  std::printf("%s\n", bad ? "FAIL" : "PASS");
  return bad;
}
