#include <tapegrad/debug/mode_report.h>

#include <algorithm>
#include <sstream>

namespace tapegrad::debug {
namespace {

std::string entries_str(const std::vector<TensorEntry>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].name + " " + shape_str(v[i].shape);
  return s;
}

bool differs_from(const Tensor& t, double init) {
  for (double v : t.to_vector())
    if (v != init) return true;
  return false;
}

}  // namespace

ModeReport mode_report(layers::Module& model) {
  ModeReport r;
  for (auto& [path, m] : model.named_modules()) {
    ModuleMode mm;
    mm.path = path;
    mm.type = m->type_name();
    mm.training = m->is_training();
    for (auto& [n, t] : m->named_parameters(false)) mm.parameters.push_back({n, t.shape(), t.dtype()});
    Tensor rm, rv, nbt;
    for (auto& [n, t] : m->named_buffers(false)) {
      mm.buffers.push_back({n, t.shape(), t.dtype()});
      if (n == "running_mean") rm = t;
      if (n == "running_var") rv = t;
      if (n == "num_batches_tracked") nbt = t;
    }
    mm.has_running_stats = rm.defined() || rv.defined();
    if (nbt.defined() && nbt.numel() == 1) mm.num_batches_tracked = static_cast<std::int64_t>(nbt.item());
    if (mm.has_running_stats)
      mm.stats_updated = mm.num_batches_tracked > 0 || (rm.defined() && differs_from(rm, 0.0)) ||
                         (rv.defined() && differs_from(rv, 1.0));
    r.modules.push_back(std::move(mm));
  }
  return r;
}

bool ModeReport::all_training() const {
  for (auto& m : modules)
    if (!m.training) return false;
  return true;
}

bool ModeReport::all_eval() const {
  for (auto& m : modules)
    if (m.training) return false;
  return true;
}

std::vector<std::string> ModeReport::modules_in_mode(bool training) const {
  std::vector<std::string> out;
  for (auto& m : modules)
    if (m.training == training) out.push_back(m.path);
  return out;
}

std::vector<std::string> ModeReport::never_updated() const {
  std::vector<std::string> out;
  for (auto& m : modules)
    if (m.has_running_stats && !m.stats_updated) out.push_back(m.path);
  return out;
}

std::string ModeReport::to_string() const {
  std::ostringstream os;
  std::size_t width = 6;
  for (auto& m : modules) width = std::max(width, m.path.size() + m.type.size() + 2);
  std::size_t n_train = 0;
  for (auto& m : modules) {
    std::string head = (m.path.empty() ? "(root)" : m.path) + "  " + m.type;
    os << head << std::string(width + 8 > head.size() ? width + 8 - head.size() : 1, ' ')
       << (m.training ? "train" : "eval ");
    if (!m.parameters.empty()) os << "  params: " << entries_str(m.parameters);
    if (!m.buffers.empty()) os << "  buffers: " << entries_str(m.buffers);
    if (m.has_running_stats) {
      os << "  stats: " << (m.stats_updated ? "updated" : "NEVER UPDATED (init values)");
      if (m.num_batches_tracked >= 0) os << " (num_batches_tracked = " << m.num_batches_tracked << ")";
    }
    os << "\n";
    n_train += m.training ? 1 : 0;
  }
  const std::size_t n_eval = modules.size() - n_train;
  if (n_train && n_eval)
    os << "mixed modes: " << n_train << " train, " << n_eval << " eval\n";
  else
    os << "all " << modules.size() << " modules in " << (n_eval ? "eval" : "train") << " mode\n";
  const auto never = never_updated();
  if (!never.empty()) os << never.size() << " module(s) with running statistics never updated\n";
  return os.str();
}

}  // namespace tapegrad::debug
