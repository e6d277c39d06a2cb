// A callback that throws on rank 1 only, inside a data-parallel fit whose main has no
// run_guarded but catches and returns: fit must end the whole job with rank 1's message
// (ctest checks the message and bounds the run with a timeout); before, rank 0 waited in the
// next step's collectives and rank 1 in MPI_Finalize, forever. With argument "evaluate": a
// label outside the classes in rank 1's batches only, inside a data-parallel evaluate.
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/train/callback.h>
#include <tapegrad/train/data_parallel.h>
#include <tapegrad/train/evaluate.h>
#include <tapegrad/train/fit.h>

using namespace tapegrad;

namespace {
class ThrowOnRankOne : public train::Callback {
 public:
  std::string name() const override { return "ThrowOnRankOne"; }
  void on_batch_end(train::TrainState& st) override {
    if (distributed::rank() == 1 && st.batch == 1) throw std::runtime_error("deliberate callback failure on rank 1");
  }
};
}  // namespace

int main(int argc, char** argv) {
  distributed::Environment env(&argc, &argv);
  Generator gen(1);
  std::vector<std::int64_t> y;
  for (int i = 0; i < 128; ++i) y.push_back(gen.randint(3));
  const data::Dataset ds = data::Dataset::make(randn({128, 4}, Dtype::Float32, gen), Tensor::from_int64(y, {128}));
  auto model = std::make_shared<layers::Linear>(4, 3, true, Dtype::Float32, gen);
  if (argc > 1 && std::string(argv[1]) == "evaluate") {  // a label only rank 1's batch has
    auto par = train::make_mpi_data_parallel(false);
    std::vector<std::int64_t> labels(16, 0);
    labels[5] = 7;  // row 5: batch 1 of 4 rows, rank 1's
    const data::Dataset bad = data::Dataset::make(randn({16, 4}, Dtype::Float32, gen), Tensor::from_int64(labels, {16}));
    train::EvalOptions eo;
    eo.batch_size = 4;
    eo.parallel = par.get();
    try {
      train::evaluate(*model, bad, eo);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "caught on rank %d: %s\n", env.rank(), e.what());
      return 1;
    }
    std::printf("unreachable: evaluate completed on rank %d\n", env.rank());
    return 0;
  }
  train::FitOptions o;
  o.epochs = 2;
  o.parallel = train::make_mpi_data_parallel(false);
  o.parallel->prepare(model);
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  data::DataLoader loader(ds, {32, true, true}, gen);
  try {  // what a program does with an error it does not expect: report it and return
    train::fit(*model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o, {std::make_shared<ThrowOnRankOne>()});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "caught on rank %d: %s\n", env.rank(), e.what());
    return 1;  // (~Environment's MPI_Finalize would wait for the other rank)
  }
  std::printf("unreachable: fit completed on rank %d\n", env.rank());
  return 0;
}
