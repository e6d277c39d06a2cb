#include <tapegrad/distributed/ddp_step_check.h>

#include <sstream>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/module_sync.h>

namespace tapegrad::distributed::detail {

StepCheck::StepCheck(std::vector<Tensor> params, std::vector<std::string> names, MPI_Comm comm, CommSeconds& seconds)
    : params_(std::move(params)), names_(std::move(names)), comm_(comm), seconds_(seconds) {}

// A rank that differs would post other collectives than the others (a hang, or reductions of
// mismatched buffers): every rank throws instead.
std::uint64_t StepCheck::hash(const layers::Module& module, bool no_sync, bool sharded, std::size_t broadcast_bytes,
                              bool before) {
  flags_.clear();
  flags_.push_back(module.is_training() ? 1 : 0);
  flags_.push_back(grad_mode_enabled() ? 1 : 0);
  flags_.push_back(no_sync ? 1 : 0);
  flags_.push_back(before ? 1 : 0);
  for (const Tensor& p : params_) flags_.push_back(p.requires_grad() ? 1 : 0);
  flags_.push_back(sharded ? 1 : 0);
  return fnv1a(&broadcast_bytes, sizeof broadcast_bytes, fnv1a(flags_.data(), flags_.size()));
}

void StepCheck::post(const layers::Module& module, bool no_sync, bool sharded, std::size_t broadcast_bytes,
                     bool before) {
  hash_ = hash(module, no_sync, sharded, broadcast_bytes, before);
  total_ = broadcast_bytes;
  recv_.resize(static_cast<std::size_t>(world_size()));
  {
    ScopedTimer t(seconds_.comm);
    check(MPI_Iallgather(&hash_, 1, MPI_UINT64_T, recv_.data(), 1, MPI_UINT64_T, comm_, &req_), "MPI_Iallgather");
  }
  pending_ = true;
}

bool StepCheck::complete() {
  pending_ = false;
  {
    ScopedTimer t(seconds_.comm);
    wait(req_, "MPI_Iallgather");
  }
  for (std::uint64_t h : recv_)
    if (h != hash_) return false;
  return true;
}

void StepCheck::throw_mismatch() {
  check_same_across_ranks(
      hash_,
      [&] {
        std::ostringstream os;
        os << "mode " << (flags_[0] ? "train()" : "eval()") << "\n";
        os << "grad mode " << (flags_[1] ? "on" : "off (NoGradGuard)") << "\n";
        os << "gradient averaging " << (flags_[2] ? "off (inside no_sync())" : "on") << "\n";
        os << "buffers copied " << (flags_[3] ? "before the forward" : "in finish()") << "\n";
        for (std::size_t k = 0; k < params_.size(); ++k)
          os << "param " << names_[k] << (flags_[4 + k] ? " requires grad" : " frozen (requires_grad = false)") << "\n";
        os << "gradients " << (flags_[4 + params_.size()] ? "reduce-scattered (ZeroRedundancyOptimizer)" : "allreduced")
           << "\n";
        os << "buffers broadcast " << total_ << " bytes\n";
        return os.str();
      },
      "DistributedDataParallel: the ranks disagree on what this step does (every rank must use the same mode, "
      "grad mode, no_sync, requires_grad and ZeroRedundancyOptimizer)");
  throw std::logic_error("DistributedDataParallel: step hashes differ across ranks");  // not reached
}

void StepCheck::drain() {
  if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);
}

}  // namespace tapegrad::distributed::detail
