#pragma once
// The instruction-set level of tapegrad's hot kernels, chosen once per process.
//
// The default (portable) build compiles the libraries for x86-64-v2 and the hot kernels
// (the norm kernels, the element-wise loops, the optimizer updates, Eigen's GEMM; the list
// is in docs/isa.md) three times: baseline (x86-64-v2),
// avx2 (x86-64-v3: AVX2 + FMA + BMI2) and avx512 (x86-64-v4: AVX-512 F/BW/CD/DQ/VL).
// The first kernel call picks the highest variant the CPU and the OS support, or the
// level forced by the environment variable TAPEGRAD_ISA=baseline|avx2|avx512, or by
// set_isa() before that first call; the level then stays fixed for the process.
// libxsmm and oneDNN (JIT) are capped at the same level (libxsmm "wsm"/"hsw", oneDNN
// set_max_cpu_isa) unless LIBXSMM_TARGET / ONEDNN_MAX_CPU_ISA say otherwise; OpenBLAS reads
// OPENBLAS_CORETYPE at load time, so a forced run sets it in the environment (docs/isa.md).
//
// A build compiled entirely for one level (cmake -DTAPEGRAD_ISA=native|avx2|avx512) carries
// one variant: its level is the build's, and forcing another one is refused.
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad {

/// Instruction-set levels, lowest first: Baseline = x86-64-v2 (SSE4.2, POPCNT),
/// Avx2 = x86-64-v3 (AVX2, FMA, BMI1/2, F16C, MOVBE), Avx512 = x86-64-v4 (AVX512F/BW/CD/DQ/VL).
enum class Isa {
  Baseline = 0,  ///< x86-64-v2: SSE4.2, SSSE3, POPCNT (every x86-64 CPU since 2009)
  Avx2 = 1,      ///< x86-64-v3: AVX2, FMA, BMI1/2, F16C, MOVBE
  Avx512 = 2,    ///< x86-64-v4: AVX512F, BW, CD, DQ, VL
};

/// "baseline", "avx2" or "avx512".
const char* isa_name(Isa level);

/// Parses "baseline", "avx2" or "avx512" (exact, lower case). Throws std::invalid_argument
/// naming the accepted values and the text given.
Isa parse_isa(std::string_view text);

/// The highest level this CPU and its OS support (cpuid through __builtin_cpu_supports, which
/// checks XCR0 for the OS saving the ymm/zmm state).
Isa cpu_isa();

/// The levels whose kernels this build carries, lowest first: {Baseline, Avx2, Avx512} in the
/// portable build (up to the build machine's level with cmake -DTAPEGRAD_ISA_UP_TO_HOST=ON),
/// the build's one level in a native / TAPEGRAD_ISA build.
std::vector<Isa> isa_variants();

/// The level the kernels run at. On the first call (the first kernel call does it) the level
/// is fixed: set_isa()'s if it was called, else the TAPEGRAD_ISA environment variable's, else
/// the highest variant the CPU supports. Throws std::invalid_argument when TAPEGRAD_ISA is not
/// a level name, or names a level above cpu_isa() or one this build does not carry (another
/// level than a single-level build's own); the message names the value and the limit.
Isa isa();

/// Forces the kernels' level. Call before any kernel call (before isa() fixed it); setting the
/// level already fixed is a no-op. Throws std::invalid_argument when `level` is above
/// cpu_isa() (naming both) or not carried by this build, std::logic_error when the level was
/// already fixed to another one (naming both).
void set_isa(Isa level);

namespace detail {
/// Throws std::invalid_argument unless `level` can run on a CPU whose highest level is
/// `cpu` in a build carrying `variants`; `what` names the source ("TAPEGRAD_ISA", "set_isa").
/// The check isa() and set_isa() make, exposed for tests.
void check_isa_runnable(Isa level, Isa cpu, const std::vector<Isa>& variants, const char* what);
}  // namespace detail

}  // namespace tapegrad
