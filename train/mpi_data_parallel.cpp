// make_mpi_data_parallel: DataParallel over tapegrad::distributed (MPI), or a clear error in
// a build without MPI (TAPEGRAD_TRAIN_MPI unset).
#include <tapegrad/train/data_parallel.h>

#include <cstdio>
#include <stdexcept>

#if TAPEGRAD_TRAIN_MPI
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/sync_batch_norm.h>
#include <tapegrad/distributed/zero_redundancy_optimizer.h>
#endif

namespace tapegrad::train {

#if TAPEGRAD_TRAIN_MPI
namespace {

namespace dist = tapegrad::distributed;

class MpiDataParallel final : public DataParallel {
 public:
  MpiDataParallel(bool sync_bn, bool zero) : sync_bn_(sync_bn), zero_(zero) {}
  int rank() const override { return dist::rank(); }
  int world_size() const override { return dist::world_size(); }
  void prepare(std::shared_ptr<layers::Module> model) override {
    if (sync_bn_) model = dist::convert_sync_batchnorm(model);
    dist::DDPOptions o;
    o.broadcast_buffers = !sync_bn_;  // SyncBatchNorm keeps the buffers equal on every rank
    ddp_ = std::make_unique<dist::DistributedDataParallel>(model, o);
  }
  bool prepared() const override { return ddp_ != nullptr; }
  std::unique_ptr<optim::Optimizer> make_optimizer(std::vector<Tensor> params, const OptimizerFactory& make) override {
    if (!zero_ || !ddp_) return make(std::move(params));
    return std::make_unique<dist::ZeroRedundancyOptimizer>(*ddp_, make);
  }
  Tensor forward(const Tensor& x) override { return (*ddp_)(x); }
  void after_backward() override { ddp_->finish(); }
  double mean(double v) override {
    dist::allreduce_sum(&v, 1);
    return v / dist::world_size();
  }
  void sum(double* values, std::int64_t n) override { dist::allreduce_sum(values, n); }
  void sum(std::int64_t* values, std::int64_t n) override { dist::allreduce_sum(values, n); }
  void barrier() override { dist::barrier(); }
  void abort(const std::string& message) override { dist::abort_job(message); }
  double comm_seconds() const { return ddp_ ? ddp_->comm_seconds() : 0.0; }

 private:
  bool sync_bn_, zero_;
  std::unique_ptr<dist::DistributedDataParallel> ddp_;
};

}  // namespace

bool mpi_available() { return true; }

std::shared_ptr<DataParallel> make_mpi_data_parallel(bool sync_bn, bool zero_redundancy) {
  return std::make_shared<MpiDataParallel>(sync_bn, zero_redundancy);
}

std::string communication_summary(const DataParallel& dp) {
  auto* m = dynamic_cast<const MpiDataParallel*>(&dp);
  if (!m) return "";
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "rank %d: communication %.2f s (DDP gradient allreduce and buffer broadcast %.2f s, "
                "SyncBatchNorm and other blocking collectives %.2f s)",
                dp.rank(), m->comm_seconds() + dist::blocking_collective_seconds(), m->comm_seconds(),
                dist::blocking_collective_seconds());
  return buf;
}

#else

bool mpi_available() { return false; }

std::shared_ptr<DataParallel> make_mpi_data_parallel(bool, bool) {
  throw std::runtime_error("make_mpi_data_parallel: this build of tapegrad has no MPI (tapegrad_distributed was not "
                           "built; install libopenmpi-dev, see scripts/setup.sh, and reconfigure)");
}

std::string communication_summary(const DataParallel&) { return ""; }

#endif

}  // namespace tapegrad::train
