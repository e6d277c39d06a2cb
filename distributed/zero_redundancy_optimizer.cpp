#include <tapegrad/distributed/zero_redundancy_optimizer.h>

#include <stdexcept>

namespace tapegrad::distributed {
namespace {
[[noreturn]] void no_state_dict() {
  throw std::logic_error(
      "ZeroRedundancyOptimizer: state_dict / load_state_dict are not supported: each rank holds only its shard's "
      "optimizer state (checkpoint the model, or train without the sharded optimizer)");
}
}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(DistributedDataParallel& ddp, const Factory& make_optimizer)
    : ddp_(ddp) {
  if (!make_optimizer) throw std::invalid_argument("ZeroRedundancyOptimizer: the optimizer factory is empty");
  for (auto& p : ddp.module().parameters())
    if (p.requires_grad()) params_.push_back(p);
  std::vector<Tensor> shard;
  for (auto& [piece, grad] : ddp.enable_sharding()) {
    shard.push_back(piece);
    shard_numel_ += piece.numel();
  }
  inner_ = make_optimizer(shard);
  if (!inner_) throw std::invalid_argument("ZeroRedundancyOptimizer: the optimizer factory returned null");
}

void ZeroRedundancyOptimizer::step() {
  run_step_hooks();  // DistributedDataParallel: a step before finish() throws
  if (!ddp_.shard_gradients_ready()) return;
  inner_->step();
  ddp_.allgather_parameters();
}

std::string ZeroRedundancyOptimizer::type_name() const { return "ZeroRedundancyOptimizer(" + inner_->type_name() + ")"; }

const std::vector<Tensor>& ZeroRedundancyOptimizer::group_params(std::size_t group) const {
  if (group != 0) throw std::out_of_range("ZeroRedundancyOptimizer: group " + std::to_string(group) + " of 1");
  return params_;
}

double ZeroRedundancyOptimizer::lr(std::size_t group) const {
  if (group != 0) throw std::out_of_range("ZeroRedundancyOptimizer: group " + std::to_string(group) + " of 1");
  return inner_->lr(0);
}

void ZeroRedundancyOptimizer::set_lr(std::size_t group, double lr) {
  if (group != 0) throw std::out_of_range("ZeroRedundancyOptimizer: group " + std::to_string(group) + " of 1");
  for (std::size_t g = 0; g < inner_->num_param_groups(); ++g) inner_->set_lr(g, lr);
}

std::vector<std::pair<std::string, double>> ZeroRedundancyOptimizer::group_options(std::size_t) const { no_state_dict(); }
std::string ZeroRedundancyOptimizer::check_group_options(std::size_t, const std::map<std::string, double>&) const {
  no_state_dict();
}
void ZeroRedundancyOptimizer::set_group_options(std::size_t, const std::map<std::string, double>&) { no_state_dict(); }

}  // namespace tapegrad::distributed
