// What the per-ISA kernel tests share: a variant's namespace as a level name, the variants
// this build carries that the test machine runs (as copied tables with their level), and the
// float64 reference statistics of strided values.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <tapegrad/core/isa.h>

// TEST_ISA_NAME(avx2) -> "avx2" (the macro argument expanded first).
#define TEST_ISA_NAME_(ns) #ns
#define TEST_ISA_NAME(ns) TEST_ISA_NAME_(ns)

namespace tapegrad::test {

/// The variants (each with an `isa level` member) whose level this CPU runs.
template <class Variant>
std::vector<Variant> runnable_on_this_cpu(const std::vector<Variant>& all) {
  std::vector<Variant> out;
  for (const auto& x : all)
    if (x.level <= cpu_isa()) out.push_back(x);
  return out;
}

/// One level's table of a kernel family, copied, with its level.
template <class Table>
struct LevelTable : Table {
  Isa level;
};

/// The tables of TAPEGRAD_KERNEL_LEVELS(ns, family, T) whose level this CPU runs.
template <class Table, class Level>
std::vector<LevelTable<Table>> runnable_tables(const std::vector<Level>& levels) {
  std::vector<LevelTable<Table>> v;
  for (const auto& l : runnable_on_this_cpu(levels)) v.push_back(LevelTable<Table>{{*l.table}, l.level});
  return v;
}

/// The mean and the biased variance, summed in double in order, of the `count` values
/// p[0], p[stride], p[2·stride], ...
template <class T>
std::pair<double, double> mean_var(const T* p, std::int64_t count, std::int64_t stride) {
  double m = 0, v = 0;
  for (std::int64_t i = 0; i < count; ++i) m += double(p[i * stride]);
  m /= double(count);
  for (std::int64_t i = 0; i < count; ++i) {
    const double d = double(p[i * stride]) - m;
    v += d * d;
  }
  v /= double(count);
  return {m, v};
}

}  // namespace tapegrad::test
