#pragma once
// Workloads shared by the benchmark programs: the chapter's nets and training step, the
// large-net step, and the streaming triad that calibrates every bandwidth figure.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/sgd.h>

namespace tgbench {

using tapegrad::Tensor;

/// The chapter's net, models::MLP: for each hidden width Linear -> [BatchNorm1d(momentum)] ->
/// ReLU -> [Clamp(-c, c)], then a plain Linear.
std::shared_ptr<tapegrad::layers::Sequential> make_net(const std::vector<std::int64_t>& sizes, bool batchnorm,
                                                       double bn_momentum, std::optional<double> act_clip,
                                                       tapegrad::Generator& gen);

/// One SGD step (forward, MSE loss, backward, update) on a fixed batch (N, sizes[0]).
class TrainStep {
 public:
  TrainStep(const std::vector<std::int64_t>& sizes, bool batchnorm, std::int64_t batch, double lr = 0.01,
            std::uint64_t seed = 0);
  /// Returns the loss.
  double step();

  std::shared_ptr<tapegrad::layers::Sequential> net;

 private:
  std::unique_ptr<tapegrad::optim::SGD> sgd_;
  Tensor x_, y_;
};

/// The chapter's full workload (Experiments 1-3 as the chapter's code runs them), each
/// training through studies::kit::train_run: 14 trainings x epochs x floor(200/batch) SGD steps,
/// train-mode evaluation of the train and test sets after each epoch. Returns the number of
/// SGD steps taken.
struct ChapterOptions {
  int epochs = 200;
  std::int64_t batch = 32;
  std::uint64_t seed = 0;
};
std::int64_t run_chapter(const ChapterOptions& o);

/// "CPU <model> | build ISA <AVX-512|AVX2+FMA|...> | libxsmm <target>": the machine and the
/// instruction set the build targets, for every benchmark's header line.
std::string machine_line();

/// a[i] = b[i] + s·c[i] over n floats on tapegrad's threads; STREAM counts 12 bytes/element.
void triad(float* a, const float* b, const float* c, float s, std::int64_t n);

}  // namespace tgbench
