#include "study.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include <tapegrad/layers/checkpoint.h>
#include "kit/jobs.h"
#include "kit/option_checks.h"

namespace bnexp {

using tapegrad::models::Norm;

const std::vector<std::string>& experiment_names() {
  static const std::vector<std::string> names{"convergence", "learning-rate", "depth"};
  return names;
}

Resolved resolve(const StudyOptions& o) {
  Resolved r;
  r.preset = o.preset;
  if (o.preset == "chapter") {
    r.lrs = {0.001, 0.01, 0.05};
    r.grad_clip = 5.0;
    r.act_clip = 10.0;
    r.plain_depth_grad_clip = false;
    r.policies = {EvalPolicy::Train};
  } else if (o.preset == "clean") {
    r.lrs = {0.001, 0.01, 0.05, 0.1};
    r.policies = {EvalPolicy::Eval};
  } else {
    throw std::invalid_argument("unknown preset '" + o.preset + "': expected chapter or clean");
  }
  if (o.lrs) r.lrs = *o.lrs;
  if (o.policies) r.policies = *o.policies;
  // An explicit clip replaces the preset's everywhere (0 disables it).
  if (o.grad_clip) {
    r.grad_clip = *o.grad_clip > 0 ? std::optional<double>(*o.grad_clip) : std::nullopt;
    r.plain_depth_grad_clip = true;
  }
  if (o.act_clip) r.act_clip = *o.act_clip > 0 ? std::optional<double>(*o.act_clip) : std::nullopt;
  if (r.lrs.empty()) throw std::invalid_argument("the learning-rate list is empty");
  for (double lr : r.lrs)
    if (!(lr > 0 && std::isfinite(lr)))
      throw std::invalid_argument("--lrs: learning rates must be finite and > 0, got " + fmt_g(lr));
  if (r.policies.empty()) throw std::invalid_argument("no evaluation policy");
  studies::kit::check_seeds(o.seed, o.seeds);
  studies::kit::check_at_least("--threads", o.threads, 1);
  studies::kit::check_at_least("--epochs", o.epochs, 1);
  if (o.batch < 2) throw std::invalid_argument("--batch must be >= 2 (BatchNorm refuses 1), got " + std::to_string(o.batch));
  studies::kit::check_rate("--lr", o.lr);
  studies::kit::check_rate("--depth-lr", o.depth_lr);
  if (!(o.bn_momentum >= 0 && o.bn_momentum <= 1))
    throw std::invalid_argument("--bn-momentum: expected a number in [0, 1] (PyTorch convention), got " +
                                fmt_g(o.bn_momentum));
  if (o.batch > 200)  // the chapter's 200 training samples (make_chapter_data)
    throw std::invalid_argument("--batch: expected 2 to 200 (the chapter's 200 training samples), got " +
                                std::to_string(o.batch));
  // a loss target <= 0 is never reached (an MSE is > 0): every run would read "never"
  studies::kit::check_rate("--target-loss", o.target_loss);
  return r;
}

namespace {

std::vector<std::int64_t> depth_sizes(int depth) {
  switch (depth) {
    case 5: return {50, 128, 64, 32, 16, 1};
    case 10: return {50, 128, 128, 64, 64, 32, 32, 16, 16, 8, 1};
    case 15: {
      std::vector<std::int64_t> s{50};
      for (int i = 0; i < 14; ++i) s.push_back(64);
      s.push_back(1);
      return s;
    }
    default: break;
  }
  throw std::invalid_argument("no depth-" + std::to_string(depth) + " net (expected 5, 10 or 15)");
}

std::string label(Norm n, double lr, int depth) {
  return tapegrad::models::norm_name(n) + "_lr" + fmt_g(lr) + "_d" + std::to_string(depth);
}

}  // namespace

std::vector<Job> make_jobs(const std::string& experiment, const StudyOptions& o) {
  const Resolved r = resolve(o);
  std::vector<Norm> arms{o.norm};
  if (o.norm != Norm::None) arms.push_back(Norm::None);
  struct Net {
    std::vector<std::int64_t> sizes;
    double lr;
    bool depth_exp;
  };
  std::vector<Net> nets;
  if (experiment == "convergence") {
    nets.push_back({{50, 128, 64, 32, 1}, o.lr, false});
  } else if (experiment == "learning-rate") {
    for (double lr : r.lrs) nets.push_back({{50, 128, 64, 32, 1}, lr, false});
  } else if (experiment == "depth") {
    for (int d : {5, 10, 15}) nets.push_back({depth_sizes(d), o.depth_lr, true});
  } else {
    throw std::invalid_argument("unknown experiment '" + experiment + "': expected convergence, learning-rate or depth");
  }
  std::vector<Job> jobs;
  for (const auto& net : nets)
    for (Norm arm : arms)
      for (int k = 0; k < o.seeds; ++k) {
        Job j;
        j.experiment = experiment;
        j.run.sizes = net.sizes;
        j.run.norm = arm;
        j.run.lr = net.lr;
        j.run.epochs = o.epochs;
        j.run.batch = o.batch;
        j.run.bn_momentum = o.bn_momentum;
        j.run.act_clip = r.act_clip;
        j.run.grad_clip = (net.depth_exp && arm == Norm::None && !r.plain_depth_grad_clip) ? std::nullopt : r.grad_clip;
        j.run.policies = r.policies;
        j.run.seed = o.seed + static_cast<std::uint64_t>(k);
        j.config = label(arm, net.lr, j.run.depth());
        jobs.push_back(std::move(j));
      }
  return jobs;
}

StudyResult run_study(const std::vector<std::string>& experiments, const StudyOptions& options) {
  StudyResult s;
  s.options = options;
  s.resolved = resolve(options);
  for (const auto& e : experiments) {
    auto j = make_jobs(e, options);
    s.jobs.insert(s.jobs.end(), j.begin(), j.end());
  }
  // Identical runs (the convergence nets reappear in the learning-rate sweep) train once.
  std::vector<std::size_t> unique_of(s.jobs.size());
  std::vector<std::size_t> uniques;
  std::map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < s.jobs.size(); ++i) {
    auto [it, inserted] = seen.emplace(s.jobs[i].run.key(), uniques.size());
    if (inserted) uniques.push_back(i);
    unique_of[i] = it->second;
  }
  std::map<std::uint64_t, Dataset> data;
  for (auto i : uniques) {
    const auto seed = s.jobs[i].run.seed;
    if (!data.count(seed)) data.emplace(seed, make_chapter_data(seed));
  }
  // Longest runs first, so the last runs to finish are short ones.
  std::vector<std::size_t> order(uniques.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  auto cost = [&](std::size_t k) {
    const auto& sz = s.jobs[uniques[k]].run.sizes;
    double c = 0;
    for (std::size_t i = 0; i + 1 < sz.size(); ++i) c += static_cast<double>(sz[i] * sz[i + 1] + 4 * sz[i + 1]);
    return c;
  };
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return cost(a) > cost(b); });

  std::vector<RunResult> unique_results(uniques.size());
  // Every run is single-threaded (kit::run_jobs), so its bits never depend on --threads (a
  // threaded reduction sums in another order), and OpenBLAS (the OpenMP build) does not split
  // each small product across threads that are busy with other runs.
  studies::kit::run_jobs(order.size(), options.threads, [&](std::size_t k) {
    const Job& job = s.jobs[uniques[order[k]]];
    RunResult r = train_run(job.run, data.at(job.run.seed));
    const auto& l = r.loss[0];
    const double sps = r.seconds > 0 ? static_cast<double>(r.steps) / r.seconds : 0.0;
    spdlog::info("{:<13} {:<18} seed={} epoch {:>3}/{} train {:.4g} test {:.4g} ({}){} {:.0f} steps/s",
                 job.experiment, job.config, job.run.seed, r.epochs_done(), job.run.epochs,
                 l[0].empty() ? 0.0 : l[0].back(), l[1].empty() ? 0.0 : l[1].back(),
                 policy_name(job.run.policies[0]), r.crashed ? " CRASHED: " + r.crash_reason : std::string(), sps);
    unique_results[order[k]] = std::move(r);
  });
  s.results.resize(s.jobs.size());
  for (std::size_t i = 0; i < s.jobs.size(); ++i) s.results[i] = unique_results[unique_of[i]];
  return s;
}

std::string checkpoint_name(const Job& job) {
  return job.experiment + "_" + job.config + "_seed" + std::to_string(job.run.seed) + ".safetensors";
}

std::vector<std::string> save_models(const StudyResult& s, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < s.jobs.size(); ++i) {
    if (!s.results[i].model) continue;
    const std::string p = (std::filesystem::path(dir) / checkpoint_name(s.jobs[i])).string();
    tapegrad::layers::save(*s.results[i].model, p);
    paths.push_back(p);
  }
  return paths;
}

}  // namespace bnexp
