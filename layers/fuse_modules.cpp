#include <tapegrad/layers/fuse_modules.h>

#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm_relu.h>
#include <tapegrad/layers/clamp.h>
#include <tapegrad/layers/identity.h>
#include <tapegrad/layers/relu_clamp.h>
#include <tapegrad/layers/sequential.h>

namespace tapegrad::layers {

namespace {

// Exactly class T (a subclass may change the forward, so it is never fused).
template <class T>
bool is_exactly(const Sequential& seq, std::size_t i) {
  return i < seq.size() && typeid(*seq[i]) == typeid(T);
}

// The bounds of child i when it is exactly a Clamp with lo <= 0 <= hi, which relu_clamp covers.
std::optional<std::pair<double, double>> clip_after_relu(const Sequential& seq, std::size_t i) {
  if (!is_exactly<Clamp>(seq, i)) return std::nullopt;
  const auto& c = static_cast<const Clamp&>(*seq[i]);
  if (!(c.lo <= 0 && c.hi >= 0)) return std::nullopt;
  return std::pair<double, double>{c.lo, c.hi};
}

// Replaces child i by `m`, in the mode of the module it replaces (so an eval-mode model stays
// in eval mode throughout).
void put(Sequential& seq, std::size_t i, ModulePtr m) {
  m->train(seq[i]->is_training());
  seq.replace_child(std::to_string(i), std::move(m));
}

void fuse_children(Sequential& seq, FuseModulesReport& report) {
  for (std::size_t i = 0; i < seq.size(); ++i) {
    if (is_exactly<BatchNorm1d>(seq, i) && is_exactly<ReLU>(seq, i + 1)) {
      const auto clip = clip_after_relu(seq, i + 2);
      put(seq, i, BatchNorm1dReLU::sharing(static_cast<const BatchNorm1d&>(*seq[i]), clip));
      const std::size_t span = clip ? 3 : 2;
      for (std::size_t j = i + 1; j < i + span; ++j) put(seq, j, std::make_shared<Identity>());
      ++report.batch_norm_relu;
      i += span - 1;
    } else if (is_exactly<ReLU>(seq, i)) {
      if (const auto clip = clip_after_relu(seq, i + 1)) {
        put(seq, i, std::make_shared<ReLUClamp>(clip->first, clip->second));
        put(seq, i + 1, std::make_shared<Identity>());
        ++report.relu_clamp;
        ++i;
      }
    }
  }
}

}  // namespace

FuseModulesReport fuse_modules(Module& model) {
  // every Sequential first: replacing children frees the replaced ones, which named_modules()
  // listed too; Sequentials themselves are never replaced
  std::vector<Sequential*> seqs;
  for (const auto& [path, m] : model.named_modules())
    if (auto* seq = dynamic_cast<Sequential*>(m)) seqs.push_back(seq);
  FuseModulesReport report;
  for (Sequential* seq : seqs) fuse_children(*seq, report);
  return report;
}

}  // namespace tapegrad::layers
