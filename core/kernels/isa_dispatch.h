#pragma once
// Internal: per-ISA kernel variants (core/isa.h says how the level is chosen).
//
// A kernel source listed in tapegrad_add_isa_variants() (cmake/tapegrad_library.cmake) is
// compiled once per level in the portable build: its translation unit <file>.<level>.cpp
// defines TAPEGRAD_ISA_NS (baseline, avx2, avx512) and gets that level's -march. It puts
// its entry points in namespace <...>::TAPEGRAD_ISA_NS, and every inline function or
// template it takes from a tapegrad kernel header sits in the inline namespace
// TAPEGRAD_ISA_INLINE_NS (isa_baseline, isa_avx2, isa_avx512): the linker keeps one copy
// of a symbol, so an inline function shared by an AVX-512 TU and a baseline TU would run
// AVX-512 code on every CPU. scripts/check_isa_symbols.sh verifies the libraries.
//
// Kernel families (ATen's DispatchStub form): a family's header declares its table, a struct of
// function pointers templated on the element type, and TAPEGRAD_DECLARE_KERNELS(Table, name);
// each level's variant file defines the kernels and TAPEGRAD_REGISTER_KERNELS(Table, name, ...)
// with the table's initializer; one baseline TU of the folder has TAPEGRAD_DEFINE_KERNELS(Table,
// name). Callers run `name<T>().member(...)`; tests walk TAPEGRAD_KERNEL_LEVELS(ns, name, T).
// Every kernel with variants is in such a family (layers/functional/kernels/, core/kernels/,
// optim/kernels/; each folder's variant files under kernels/cpu/).
//
// Other builds (cmake -DTAPEGRAD_ISA=native|avx2|avx512) compile everything for one level:
// the kernel source is compiled once, TAPEGRAD_ISA_NS is the build's level, and
// TAPEGRAD_ISA_SELECT names that variant directly.
#include <vector>

#include <tapegrad/core/isa.h>

#define TAPEGRAD_ISA_CAT_(a, b) a##b
#define TAPEGRAD_ISA_CAT(a, b) TAPEGRAD_ISA_CAT_(a, b)

// The level this translation unit's flags allow (0 baseline, 1 avx2, 2 avx512).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define TAPEGRAD_ISA_TU_LEVEL 2
#elif defined(__AVX2__) && defined(__FMA__)
#define TAPEGRAD_ISA_TU_LEVEL 1
#else
#define TAPEGRAD_ISA_TU_LEVEL 0
#endif

#if !defined(TAPEGRAD_ISA_PORTABLE)
#define TAPEGRAD_ISA_PORTABLE 0
#endif

#if !TAPEGRAD_ISA_PORTABLE && !defined(TAPEGRAD_ISA_BUILD_LEVEL)
#define TAPEGRAD_ISA_BUILD_LEVEL TAPEGRAD_ISA_TU_LEVEL
#endif

#if !defined(TAPEGRAD_ISA_NS)
#if TAPEGRAD_ISA_PORTABLE || TAPEGRAD_ISA_TU_LEVEL == 0
#define TAPEGRAD_ISA_NS baseline
#elif TAPEGRAD_ISA_TU_LEVEL == 1
#define TAPEGRAD_ISA_NS avx2
#else
#define TAPEGRAD_ISA_NS avx512
#endif
#endif
#define TAPEGRAD_ISA_INLINE_NS TAPEGRAD_ISA_CAT(isa_, TAPEGRAD_ISA_NS)

// The highest level a portable build compiles variants for (cmake -DTAPEGRAD_ISA_UP_TO_HOST=ON:
// the build machine's; default 2, every level). The dispatch never picks a level above it.
#if !defined(TAPEGRAD_ISA_PORTABLE_TOP)
#define TAPEGRAD_ISA_PORTABLE_TOP 2
#endif

#if TAPEGRAD_ISA_PORTABLE && TAPEGRAD_ISA_PORTABLE_TOP >= 2
#define TAPEGRAD_ISA_FOR_EACH_VARIANT(M) M(baseline) M(avx2) M(avx512)
/// The variant of `fn` (a name valid in each of the namespaces baseline, avx2, avx512 of the
/// calling scope) for isa(). Use once: `static const auto f = TAPEGRAD_ISA_SELECT(g<T>);`.
#define TAPEGRAD_ISA_SELECT(...) \
  ::tapegrad::detail::isa_select(baseline::__VA_ARGS__, avx2::__VA_ARGS__, avx512::__VA_ARGS__)
#define TAPEGRAD_KERNELS_FOR_EACH_LEVEL_(M, Table, name) \
  M(baseline, Table, name) M(avx2, Table, name) M(avx512, Table, name)
#elif TAPEGRAD_ISA_PORTABLE && TAPEGRAD_ISA_PORTABLE_TOP == 1
#define TAPEGRAD_ISA_FOR_EACH_VARIANT(M) M(baseline) M(avx2)
#define TAPEGRAD_ISA_SELECT(...) \
  ::tapegrad::detail::isa_select(baseline::__VA_ARGS__, avx2::__VA_ARGS__, avx2::__VA_ARGS__)
#define TAPEGRAD_KERNELS_FOR_EACH_LEVEL_(M, Table, name) M(baseline, Table, name) M(avx2, Table, name)
#elif TAPEGRAD_ISA_PORTABLE
#define TAPEGRAD_ISA_FOR_EACH_VARIANT(M) M(baseline)
#define TAPEGRAD_ISA_SELECT(...) \
  ::tapegrad::detail::isa_select(baseline::__VA_ARGS__, baseline::__VA_ARGS__, baseline::__VA_ARGS__)
#define TAPEGRAD_KERNELS_FOR_EACH_LEVEL_(M, Table, name) M(baseline, Table, name)
#else
#define TAPEGRAD_ISA_FOR_EACH_VARIANT(M) M(TAPEGRAD_ISA_NS)
#define TAPEGRAD_ISA_SELECT(...) ::tapegrad::detail::isa_single(TAPEGRAD_ISA_NS::__VA_ARGS__)
#define TAPEGRAD_KERNELS_FOR_EACH_LEVEL_(M, Table, name) M(TAPEGRAD_ISA_NS, Table, name)
#endif
#define TAPEGRAD_KERNELS_LEVEL_DECL_(ns, Table, name) \
  namespace ns {                                      \
  template <class T>                                  \
  const Table<T>& name();                             \
  }

/// Declares a kernel family once, in its header's namespace: `name<T>()`, the table `Table<T>`
/// (a struct of function pointers) of the level isa() chose, looked up on the first call; and
/// in each level's namespace `<level>::name<T>()`, that level's table (TAPEGRAD_REGISTER_KERNELS).
#define TAPEGRAD_DECLARE_KERNELS(Table, name) \
  template <class T>                          \
  const Table<T>& name();                     \
  TAPEGRAD_KERNELS_FOR_EACH_LEVEL_(TAPEGRAD_KERNELS_LEVEL_DECL_, Table, name)

/// In a variant file, inside namespace ...::TAPEGRAD_ISA_NS after the kernels: this level's
/// table, `Table<T>{__VA_ARGS__}` (designated initializers naming the kernels, e.g.
/// `.dx = &bn_rows_dx<T>`), for float and double.
#define TAPEGRAD_REGISTER_KERNELS(Table, name, ...)   \
  template <class T>                                  \
  const Table<T>& name() {                            \
    static constexpr Table<T> table{__VA_ARGS__};     \
    return table;                                     \
  }                                                   \
  template const Table<float>& name<float>();         \
  template const Table<double>& name<double>();

/// In one baseline translation unit of the family's folder, in the header's namespace: defines
/// `name<T>()`, the table of the level isa() chooses, looked up once (set_isa afterwards throws).
#define TAPEGRAD_DEFINE_KERNELS(Table, name)                                          \
  template <class T>                                                                  \
  const Table<T>& name() {                                                            \
    static const Table<T>* const chosen = &TAPEGRAD_ISA_SELECT(name<T>)();            \
    return *chosen;                                                                   \
  }                                                                                   \
  template const Table<float>& name<float>();                                         \
  template const Table<double>& name<double>();

#if TAPEGRAD_ISA_PORTABLE && TAPEGRAD_ISA_PORTABLE_TOP >= 2
/// Every level's table of family `ns::name` for element type T this build carries, as a
/// std::vector<tapegrad::detail::KernelLevel<Table<T>>> (for the tests; the CPU may not run all).
#define TAPEGRAD_KERNEL_LEVELS(ns, name, T)                                                           \
  ::tapegrad::detail::kernel_levels(&ns::baseline::name<T>(), &ns::avx2::name<T>(), &ns::avx512::name<T>())
#elif TAPEGRAD_ISA_PORTABLE && TAPEGRAD_ISA_PORTABLE_TOP == 1
#define TAPEGRAD_KERNEL_LEVELS(ns, name, T) \
  ::tapegrad::detail::kernel_levels(&ns::baseline::name<T>(), &ns::avx2::name<T>())
#else
#define TAPEGRAD_KERNEL_LEVELS(ns, name, T) \
  ::tapegrad::detail::kernel_levels(&ns::TAPEGRAD_ISA_NS::name<T>())
#endif

namespace tapegrad::detail {
/// One level's table of a kernel family (TAPEGRAD_KERNEL_LEVELS).
template <class Table>
struct KernelLevel {
  Isa level;           ///< the level the table's kernels were compiled for
  const Table* table;  ///< its kernels
};
/// The three levels' tables of the portable build, baseline first.
template <class Table>
std::vector<KernelLevel<Table>> kernel_levels(const Table* baseline, const Table* avx2, const Table* avx512) {
  return {{Isa::Baseline, baseline}, {Isa::Avx2, avx2}, {Isa::Avx512, avx512}};
}
/// The baseline and avx2 tables of a portable build capped at avx2 (TAPEGRAD_ISA_PORTABLE_TOP 1).
template <class Table>
std::vector<KernelLevel<Table>> kernel_levels(const Table* baseline, const Table* avx2) {
  return {{Isa::Baseline, baseline}, {Isa::Avx2, avx2}};
}
/// The one level's table of a single-level build (the build's level).
template <class Table>
std::vector<KernelLevel<Table>> kernel_levels(const Table* only) {
  return {{static_cast<Isa>(TAPEGRAD_ISA_TU_LEVEL), only}};
}

/// Clears the upper halves of the vector registers (vzeroupper) at the avx2 and avx512 levels
/// of the portable build; a no-op at the baseline and in single-level builds. Call it after
/// external code that returns with them in use (libxsmm's generated kernels do): until then,
/// every legacy-SSE instruction of the baseline code pays Intel's SSE/AVX transition (a
/// merge with the upper state), which made the chapter's glue code after each GEMM 2-10x
/// slower than the native build's VEX code. GCC's own AVX code, the variants included,
/// clears the state before it returns.
void clear_upper_state();

/// The one of three variants for isa().
template <class F>
F isa_select(F baseline, F avx2, F avx512) {
  switch (isa()) {
    case Isa::Avx512: return avx512;
    case Isa::Avx2: return avx2;
    case Isa::Baseline: break;
  }
  return baseline;
}
/// The one variant of a build compiled for one level (isa() is read for its checks of
/// TAPEGRAD_ISA).
template <class F>
F isa_single(F only) {
  (void)isa();
  return only;
}
}  // namespace tapegrad::detail
