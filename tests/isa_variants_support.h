// What the per-ISA kernel tests share: a variant's namespace as a level name, and the variants
// this build carries that the test machine runs.
#pragma once

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

}  // namespace tapegrad::test
