// The process's kernel level (core/isa.h): CPU detection, TAPEGRAD_ISA, set_isa.
#include <tapegrad/core/isa.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

#include <tapegrad/core/enum_names.h>
#include <tapegrad/core/kernels/isa_dispatch.h>

namespace tapegrad {
namespace {

std::mutex g_mutex;
int g_forced = -1;            // set_isa's level before the level was fixed, else -1
std::atomic<int> g_fixed{-1};  // the fixed level, -1 until the first isa()

Isa lowest_variant() { return isa_variants().front(); }

constexpr NamedValue<Isa> kIsaNames[] = {{Isa::Baseline, "baseline"}, {Isa::Avx2, "avx2"}, {Isa::Avx512, "avx512"}};

}  // namespace

const char* isa_name(Isa level) { return name_of(kIsaNames, level); }

Isa parse_isa(std::string_view text) {
  if (const std::optional<Isa> level = value_named(kIsaNames, text)) return *level;
  throw std::invalid_argument("ISA level: expected baseline, avx2 or avx512, got '" + std::string(text) + "'");
}

Isa cpu_isa() {
  static const Isa level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"))
      return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
        __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("movbe"))
      return Isa::Avx2;
    return Isa::Baseline;
  }();
  return level;
}

std::vector<Isa> isa_variants() {
#if TAPEGRAD_ISA_PORTABLE
  std::vector<Isa> v{Isa::Baseline, Isa::Avx2, Isa::Avx512};
  v.resize(TAPEGRAD_ISA_PORTABLE_TOP + 1);  // cmake -DTAPEGRAD_ISA_UP_TO_HOST=ON: up to the build machine's
  return v;
#else
  return {static_cast<Isa>(TAPEGRAD_ISA_BUILD_LEVEL)};
#endif
}

namespace detail {
void clear_upper_state() {
#if TAPEGRAD_ISA_PORTABLE
  // AVX's vzeroupper, written as an instruction so that this baseline file stays compiled
  // for x86-64-v2; run only when the level (hence the CPU) has AVX
  static const bool wide = isa() != Isa::Baseline;
  if (wide) __asm__ volatile("vzeroupper");
#endif
}

void check_isa_runnable(Isa level, Isa cpu, const std::vector<Isa>& variants, const char* what) {
  if (level > cpu)
    throw std::invalid_argument(std::string(what) + ": ISA level " + isa_name(level) + " is above this CPU's (" +
                                isa_name(cpu) + ")");
  if (level > variants.back())
    throw std::invalid_argument(std::string(what) + ": ISA level " + isa_name(level) +
                                " is above this build's highest variant (" + isa_name(variants.back()) +
                                "; see cmake -DTAPEGRAD_ISA and -DTAPEGRAD_ISA_UP_TO_HOST)");
  if (level < variants.front())
    throw std::invalid_argument(std::string(what) + ": ISA level " + isa_name(level) +
                                " is below this build's lowest variant (" + isa_name(variants.front()) +
                                "; the build was compiled for one level, see cmake -DTAPEGRAD_ISA)");
}
}  // namespace detail

Isa isa() {
  const int fixed = g_fixed.load(std::memory_order_acquire);
  if (fixed >= 0) return static_cast<Isa>(fixed);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_fixed.load(std::memory_order_relaxed) >= 0) return static_cast<Isa>(g_fixed.load());
  Isa level;
  if (g_forced >= 0) {
    level = static_cast<Isa>(g_forced);
  } else if (const char* env = std::getenv("TAPEGRAD_ISA"); env && *env) {
    try {
      level = parse_isa(env);
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument(std::string("TAPEGRAD_ISA: expected baseline, avx2 or avx512, got '") + env + "'");
    }
    detail::check_isa_runnable(level, cpu_isa(), isa_variants(), "TAPEGRAD_ISA");
  } else {
    // the highest variant the CPU runs; a single-level build runs its own level (its
    // non-kernel code already needs that level, so a lower CPU cannot get here)
    level = lowest_variant();
    for (Isa v : isa_variants())
      if (v <= cpu_isa()) level = v;
  }
  g_fixed.store(static_cast<int>(level), std::memory_order_release);
  return level;
}

void set_isa(Isa level) {
  detail::check_isa_runnable(level, cpu_isa(), isa_variants(), "set_isa");
  std::lock_guard<std::mutex> lock(g_mutex);
  const int fixed = g_fixed.load(std::memory_order_relaxed);
  if (fixed >= 0 && fixed != static_cast<int>(level))
    throw std::logic_error(std::string("set_isa(") + isa_name(level) + "): the ISA level is already fixed to " +
                           isa_name(static_cast<Isa>(fixed)) +
                           " (by the first kernel call); call set_isa before any tensor work, or set TAPEGRAD_ISA");
  g_forced = static_cast<int>(level);
}

}  // namespace tapegrad
