#include <tapegrad/optim/lr_scheduler.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include <tapegrad/core/counter.h>

namespace tapegrad::optim {

namespace {
void check_gamma(const char* who, double gamma) {
  if (!(gamma >= 0 && std::isfinite(gamma)))
    throw std::invalid_argument(std::string(who) + ": expected a finite gamma >= 0, got " + detail::num(gamma));
}
}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (std::size_t g = 0; g < optimizer.num_param_groups(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

void LRScheduler::step() {
  saturating_increment(last_epoch_);
  std::vector<double> lrs;
  for (std::size_t g = 0; g < base_lrs_.size(); ++g) lrs.push_back(next_lr(g, optimizer_.lr(g)));
  for (std::size_t g = 0; g < lrs.size(); ++g) optimizer_.set_lr(g, lrs[g]);
  last_lr_ = std::move(lrs);
}

OptimizerState LRScheduler::state_dict() const {
  OptimizerState s;
  const auto n = static_cast<std::int64_t>(base_lrs_.size());
  s.insert("last_epoch", Tensor::from_int64({last_epoch_}, {}));
  s.insert("base_lrs", Tensor::from_vector(base_lrs_, {n}, Dtype::Float64));
  s.insert("last_lr", Tensor::from_vector(last_lr_, {n}, Dtype::Float64));
  return s;
}

void LRScheduler::load_state_dict(const OptimizerState& s) {
  const auto n = static_cast<std::int64_t>(base_lrs_.size());
  std::vector<std::string> problems;
  const Tensor* e = s.find("last_epoch");
  if (!e || !e->defined() || e->dtype() != Dtype::Int64 || e->numel() != 1)
    problems.push_back("'last_epoch' must be an int64 scalar");
  for (const char* key : {"base_lrs", "last_lr"}) {
    const Tensor* t = s.find(key);
    if (!t || !t->defined() || !is_floating(t->dtype()) || t->shape() != Shape{n})
      problems.push_back(std::string("'") + key + "' must be a float tensor of shape [" + std::to_string(n) +
                         "] (one lr per parameter group)" +
                         (t && t->defined() ? ", got " + shape_str(t->shape()) : std::string(", missing")));
  }
  for (auto& [k, v] : s)
    if (k != "last_epoch" && k != "base_lrs" && k != "last_lr") problems.push_back("unexpected key '" + k + "'");
  // the values, not only the shapes: an epoch before the first (-1 is "not started") or a
  // negative or non-finite lr would fail later, at a step, far from the file
  if (problems.empty()) {
    if (const std::int64_t v = e->data<std::int64_t>()[0]; v < -1 || v > 1000000000)  // as a checkpoint's epoch
      problems.push_back("'last_epoch' must be >= -1 and <= 1000000000, got " + std::to_string(v));
    for (const char* key : {"base_lrs", "last_lr"}) {
      const auto v = s.at(key).to_vector();
      for (std::size_t g = 0; g < v.size(); ++g)
        if (!(v[g] >= 0 && std::isfinite(v[g]))) {
          problems.push_back(std::string("'") + key + "' must hold finite lrs >= 0, got " + detail::num(v[g]) +
                             " for group " + std::to_string(g));
          break;
        }
    }
  }
  if (!problems.empty()) {
    std::string msg = type_name() + "::load_state_dict: nothing was loaded.";
    for (auto& p : problems) msg += " " + p + ";";
    throw std::invalid_argument(msg);
  }
  last_epoch_ = e->data<std::int64_t>()[0];
  base_lrs_ = s.at("base_lrs").to_vector();
  last_lr_ = s.at("last_lr").to_vector();
}

// ---- StepLR -----------------------------------------------------------------------------

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size < 1) throw std::invalid_argument("StepLR: expected step_size >= 1, got " + std::to_string(step_size));
  check_gamma("StepLR", gamma);
  initial_step();
}

double StepLR::next_lr(std::size_t, double current) const {
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return current;
  return current * gamma_;
}

// ---- MultiStepLR ------------------------------------------------------------------------

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  for (auto m : milestones_)
    if (m < 0) throw std::invalid_argument("MultiStepLR: expected milestones >= 0, got " + std::to_string(m));
  check_gamma("MultiStepLR", gamma);
  initial_step();
}

double MultiStepLR::next_lr(std::size_t, double current) const {
  const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (hits == 0) return current;
  return current * std::pow(gamma_, static_cast<double>(hits));
}

// ---- ExponentialLR ----------------------------------------------------------------------

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) {
  check_gamma("ExponentialLR", gamma);
  initial_step();
}

double ExponentialLR::next_lr(std::size_t, double current) const {
  return last_epoch_ == 0 ? current : current * gamma_;
}

// ---- CosineAnnealingLR ------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  if (T_max < 1) throw std::invalid_argument("CosineAnnealingLR: expected T_max >= 1, got " + std::to_string(T_max));
  if (!(eta_min >= 0 && std::isfinite(eta_min)))
    throw std::invalid_argument("CosineAnnealingLR: expected a finite eta_min >= 0, got " + detail::num(eta_min));
  initial_step();
}

double CosineAnnealingLR::next_lr(std::size_t g, double current) const {
  constexpr double pi = std::numbers::pi;
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  if (last_epoch_ == 0) return current;
  // Python's % is never negative.
  const std::int64_t period = 2 * T_max_;
  const std::int64_t phase = (((last_epoch_ - 1 - T_max_) % period) + period) % period;
  if (phase == 0) return current + (base_lrs_[g] - eta_min_) * (1 - std::cos(pi / T)) / 2;
  return (1 + std::cos(pi * e / T)) / (1 + std::cos(pi * (e - 1) / T)) * (current - eta_min_) + eta_min_;
}

// ---- LinearWarmup (LinearLR) ------------------------------------------------------------

LinearWarmup::LinearWarmup(Optimizer& optimizer, double start_factor, double end_factor, std::int64_t total_iters)
    : LRScheduler(optimizer), start_(start_factor), end_(end_factor), total_(total_iters) {
  if (!(start_factor > 0 && start_factor <= 1))
    throw std::invalid_argument("LinearWarmup: expected 0 < start_factor <= 1, got " + detail::num(start_factor));
  if (!(end_factor >= 0 && end_factor <= 1))
    throw std::invalid_argument("LinearWarmup: expected 0 <= end_factor <= 1, got " + detail::num(end_factor));
  if (total_iters < 1)
    throw std::invalid_argument("LinearWarmup: expected total_iters >= 1, got " + std::to_string(total_iters));
  initial_step();
}

double LinearWarmup::next_lr(std::size_t, double current) const {
  if (last_epoch_ == 0) return current * start_;
  if (last_epoch_ > total_) return current;
  const double t = static_cast<double>(total_), e = static_cast<double>(last_epoch_);
  return current * (1. + (end_ - start_) / (t * start_ + (e - 1) * (end_ - start_)));
}

void LRScheduler::save_to(Archive& archive, const std::string& prefix) const {
  for (const auto& [k, v] : state_dict()) archive.write(prefix + k, v);
}

void LRScheduler::load_from(const Archive& archive, const std::string& prefix) {
  load_state_dict(layers::state_dict_under(archive, prefix));
}

}  // namespace tapegrad::optim
