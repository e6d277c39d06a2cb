#include "mpi/batch_size_ranks.h"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include <tapegrad/core/parallel.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/sync_batch_norm.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/sgd.h>

namespace normstudy {

using namespace tapegrad;

namespace {

void check_ranks(const BatchSizeOptions& o, const StudyData& d) {
  const int world = distributed::world_size();
  if (o.replicas != world)
    throw std::invalid_argument("batch-size under mpirun: --replicas " + std::to_string(o.replicas) +
                                " must equal the " + std::to_string(world) + " ranks (run mpirun -np " +
                                std::to_string(o.replicas) + ", or pass --replicas " + std::to_string(world) + ")");
  check_batch_size_options(o, d);
}

// One (kind, m, seed) run, this rank's replica. Mirrors batch_size.cpp's train_one with the
// replicas split over ranks instead of GhostBatchNorm / whole-batch BatchNorm.
BatchSizeRun train_one_rank(const BatchSizeOptions& o, const StudyData& d, NormKind kind, std::int64_t m,
                            std::uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  const int R = distributed::world_size(), rank = distributed::rank();
  BatchSizeRun r;
  r.kind = kind;
  r.m = m;
  r.seed = seed;
  r.lr = scaled_lr(o, m);
  Generator init(seed);
  // the in-process run's weights; this rank is one replica: plain BatchNorm / BatchRenorm on its m rows
  Model model = build_model(run_model_config(o, kind, 1), d.train.num_features(), 10, init);
  layers::ModulePtr net = model.net;
  if (kind == NormKind::Sync) {
    net = distributed::convert_sync_batchnorm(net);  // statistics over every rank's rows
    model.bns.clear();                               // (the converted layers are new modules)
  }
  distributed::DDPOptions ddp_options;
  ddp_options.broadcast_buffers = kind != NormKind::Sync;  // rank 0's running statistics persist
  distributed::DistributedDataParallel ddp(net, ddp_options);
  optim::SGD opt(net->parameters(), {.lr = r.lr, .momentum = o.sgd_momentum});
  Generator shuffle(run_shuffle_seed(seed));  // the in-process run's global batches, on every rank
  data::DataLoader loader(d.train, run_loader_options(o, m), shuffle);
  const std::int64_t total = loader.num_batches() * o.epochs;
  std::int64_t step = 0;
  net->train();
  for (int e = 0; e < o.epochs && !r.crashed; ++e) {
    double sum = 0;
    std::int64_t n = 0;
    loader.reset();
    for (std::int64_t i = 0; i < loader.num_batches(); ++i) {
      renorm_schedule(model, step++, total);
      const data::Batch b = loader.batch(i, rank * m, m);  // this replica's rows
      opt.zero_grad();
      Tensor loss = layers::cross_entropy(ddp(b.X), b.y);
      loss.backward();
      ddp.finish();
      opt.step();
      double mean = loss.item() / R;  // the global batch's mean loss, the same on every rank
      distributed::allreduce_sum(&mean, 1);
      if (crashed_loss(mean)) {
        r.crashed = true;
        break;
      }
      sum += mean;
      ++n;
    }
    r.train_loss = n ? sum / static_cast<double>(n) : std::nan("");
  }
  if (r.crashed || rank == 0) score_run(r, *net, d.test);  // rank 0's buffers are the ones kept (broadcast_buffers)
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

BatchSizeResult run_batch_size_ranks(const BatchSizeOptions& o, const StudyData& d) {
  check_ranks(o, d);
  BatchSizeResult res;
  res.options = o;
  res.options.threads = 1;  // one thread per rank
  res.options.mpi_ranks = true;
  const int before = get_num_threads();
  set_num_threads(1);
  const auto t0 = std::chrono::steady_clock::now();
  res.runs = batch_size_grid(o);
  for (BatchSizeRun& run : res.runs) {  // in grid order, every rank in step
    run = train_one_rank(o, d, run.kind, run.m, run.seed);
    spdlog::info("batch-size {:<6} m={:<3} seed={} lr={:.4g} on {} ranks: test acc {:.2f}%{} ({:.1f} s)",
                 kind_name(run.kind), run.m, run.seed, run.lr, o.replicas, 100 * run.test_accuracy,
                 run.crashed ? " CRASHED" : "", run.seconds);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  set_num_threads(before);
  return res;
}

}  // namespace normstudy
