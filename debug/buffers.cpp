#include <tapegrad/debug/buffers.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <tapegrad/core/autograd.h>

namespace tapegrad::debug {

layers::StateDict snapshot_buffers(const layers::Module& module) {
  layers::StateDict out;
  for (auto& [name, t] : module.named_buffers(true)) out.insert(name, t.clone());
  return out;
}

layers::StateDict snapshot_state(const layers::Module& module) {
  layers::StateDict out;
  for (auto& [name, t] : module.state_dict()) out.insert(name, t.clone());
  return out;
}

void restore_buffers(layers::Module& module, const layers::StateDict& snapshot) {
  auto live = module.named_buffers(true);
  std::vector<std::pair<Tensor, Tensor>> writes;
  for (auto& [key, src] : snapshot) {
    auto it = std::find_if(live.begin(), live.end(), [&](auto& e) { return e.first == key; });
    if (it == live.end()) throw std::invalid_argument("restore_buffers: the module has no buffer '" + key + "'");
    if (it->second.shape() != src.shape())
      throw std::invalid_argument("restore_buffers: buffer '" + key + "' has shape " + shape_str(it->second.shape()) +
                                  ", the snapshot has " + shape_str(src.shape()));
    writes.emplace_back(it->second, src);
  }
  NoGradGuard ng;
  for (auto& [dst, src] : writes) Tensor(dst).copy_(src);
}

std::vector<BufferChange> buffers_changed(const layers::StateDict& before, const layers::StateDict& after,
                                          double tol) {
  std::vector<BufferChange> out;
  for (auto& [key, b] : before) {
    BufferChange c;
    c.key = key;
    c.numel = b.numel();
    const Tensor* a = after.find(key);
    if (!a || !a->defined()) {
      c.note = "missing after";
      c.max_abs_change = std::numeric_limits<double>::infinity();
      out.push_back(c);
      continue;
    }
    if (a->shape() != b.shape()) {
      c.note = "shape " + shape_str(b.shape()) + " -> " + shape_str(a->shape());
      c.max_abs_change = std::numeric_limits<double>::infinity();
      out.push_back(c);
      continue;
    }
    const std::vector<double> vb = b.to_vector(), va = a->to_vector();
    for (std::size_t i = 0; i < vb.size(); ++i) {
      const double d = std::fabs(va[i] - vb[i]);
      const bool nan_change = std::isnan(va[i]) != std::isnan(vb[i]);
      if (nan_change || d > tol) ++c.changed_elements;
      if (nan_change || std::isnan(d)) c.max_abs_change = std::numeric_limits<double>::quiet_NaN();
      else if (!std::isnan(c.max_abs_change)) c.max_abs_change = std::max(c.max_abs_change, d);
    }
    if (c.changed_elements > 0) out.push_back(c);
  }
  return out;
}

std::string to_string(const std::vector<BufferChange>& changes) {
  if (changes.empty()) return "no buffer changed\n";
  std::ostringstream os;
  for (auto& c : changes) {
    os << c.key << ": ";
    if (!c.note.empty())
      os << c.note;
    else
      os << "max |change| = " << c.max_abs_change << " (" << c.changed_elements << "/" << c.numel << " changed)";
    os << "\n";
  }
  return os.str();
}

}  // namespace tapegrad::debug
