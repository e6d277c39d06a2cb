#pragma once
// Shared building blocks of the vectorised norm kernels (layers/functional/kernels/ and the
// norm families in layers/functional/; one namespace, kernels): vectors of the widest
// register, streaming stores (the 24 MiB threshold is in kernels/thresholds.h), the split of rows into work
// chunks, the thread count for a kernel, and per-thread scratch buffers.
//
// The vectors are GCC/Clang vector extensions of TAPEGRAD_NV_BYTES: one zmm register with
// AVX-512, one ymm with AVX2 (two xmm with SSE2). Wider-than-register vectors are not an
// option: without AVX-512, GCC 12 passes and spills 64-byte vectors through the stack
// (the x86-64-v3 batch-norm kernels had 1,234 stack ymm moves with 64-byte vectors, 203
// with 32-byte ones). Arithmetic is element-wise IEEE, never reassociated, so every
// sum's order is fixed by the source and the build's vector width.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <tapegrad/core/kernels/isa_dispatch.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/core/saved_data.h>
#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>

#if defined(__AVX512F__)
#define TAPEGRAD_NV_BYTES 64
#else
#define TAPEGRAD_NV_BYTES 32
#endif

namespace tapegrad::layers::functional::kernels {
// This TU's vector width: one inline namespace per ISA level (core/kernels/isa_dispatch.h).
inline namespace TAPEGRAD_ISA_INLINE_NS {

template <class T>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(TAPEGRAD_NV_BYTES)));
  typedef float unaligned __attribute__((vector_size(TAPEGRAD_NV_BYTES), aligned(4), may_alias));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(TAPEGRAD_NV_BYTES)));
  typedef double unaligned __attribute__((vector_size(TAPEGRAD_NV_BYTES), aligned(8), may_alias));
};

/// A vector of T (16 floats or 8 doubles with AVX-512, 8 or 4 otherwise) and its lane count.
template <class T>
using Vec = typename VecOf<T>::type;
template <class T>
constexpr std::int64_t kLanes = TAPEGRAD_NV_BYTES / static_cast<std::int64_t>(sizeof(T));

/// Unaligned loads and stores; splat(s) has every lane equal to s.
template <class T>
inline Vec<T> load(const T* p) {
  return *reinterpret_cast<const typename VecOf<T>::unaligned*>(p);
}
template <class T>
inline void store(T* p, Vec<T> v) {
  *reinterpret_cast<typename VecOf<T>::unaligned*>(p) = v;
}
template <class T>
inline Vec<T> splat(T s) {
  return Vec<T>{} + s;
}

// Σ of the lanes in double, as a pairwise tree of vector halves: a fixed order, a few
// additions deep, and all in registers (spilling the vector to memory and reading the lanes
// back would wait for the row's streaming stores to leave the store queue).
typedef double D8 __attribute__((vector_size(64)));
typedef double D4 __attribute__((vector_size(32)));
typedef double D2 __attribute__((vector_size(16)));
typedef float F8 __attribute__((vector_size(32)));
typedef float F4 __attribute__((vector_size(16)));
inline double hsum(D4 v) {
  const D2 b = __builtin_shufflevector(v, v, 0, 1) + __builtin_shufflevector(v, v, 2, 3);
  return b[0] + b[1];
}
inline double hsum(D8 v) {
  return hsum(D4(__builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7)));
}
#if TAPEGRAD_NV_BYTES == 64
inline double hsum(Vec<float> v) {
  const F8 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
  const F8 hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  return hsum(__builtin_convertvector(lo, D8) + __builtin_convertvector(hi, D8));
}
#else
inline double hsum(Vec<float> v) {
  const F4 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3), hi = __builtin_shufflevector(v, v, 4, 5, 6, 7);
  return hsum(__builtin_convertvector(lo, D4) + __builtin_convertvector(hi, D4));
}
#endif

/// Stores one vector to a vector-aligned p, bypassing the cache (a non-temporal store):
/// an output larger than the cache then costs one write instead of a read and a write.
/// Call fence() after a thread's last streaming store.
template <class T>
inline void stream(T* p, Vec<T> v) {  // the same bytes whatever T: integer streaming stores
#if defined(__AVX512F__)
  __m512i w;
  __builtin_memcpy(&w, &v, sizeof v);
  _mm512_stream_si512(reinterpret_cast<__m512i*>(p), w);
#elif defined(__AVX__)
  __m256i w;
  __builtin_memcpy(&w, &v, sizeof v);
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), w);
#else
  store(p, v);
#endif
}
inline void fence() { _mm_sfence(); }

/// Bytes of one vector (one streaming store): 64 with AVX-512, 32 otherwise.
constexpr std::size_t kVecBytes = sizeof(Vec<float>);
static_assert(kVecBytes == TAPEGRAD_NV_BYTES && sizeof(Vec<double>) == kVecBytes);

/// dst = src (bytes), with streaming stores for the whole vectors of dst from its first
/// 64-byte boundary on (the head before it and the tail are copied normally). Each step
/// stores exactly one vector of kVecBytes: the step is the store's width, on every ISA.
/// Call fence() after the last one.
inline void stream_copy(void* dst_v, const void* src_v, std::size_t bytes) {
  char* dst = static_cast<char*>(dst_v);
  const char* src = static_cast<const char*>(src_v);
  const std::size_t head = std::min(bytes, (64 - reinterpret_cast<std::uintptr_t>(dst) % 64) % 64);
  __builtin_memcpy(dst, src, head);
  dst += head;
  src += head;
  bytes -= head;
  std::size_t i = 0;
  for (; i + kVecBytes <= bytes; i += kVecBytes)
    stream(reinterpret_cast<float*>(dst + i), load(reinterpret_cast<const float*>(src + i)));
  __builtin_memcpy(dst + i, src + i, bytes - i);
}

/// out[i] = 1/sqrt(v[i] + eps), or 0 where v[i] + eps == 0 (a constant channel with eps = 0:
/// output β and zero gradients, as PyTorch), for v[i] >= 0. Vectorised: the same correctly
/// rounded square root and division as the scalar expression.
inline void inverse_std(const double* v, double eps, double* out, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 8 <= n; i += 8) {
    const Vec<double> s = load(v + i) + eps;
    const Vec<double> r = 1.0 / _mm512_sqrt_pd(s);
    store(out + i, s == 0.0 ? Vec<double>{} : r);
  }
#elif defined(__AVX__)
  for (; i + 4 <= n; i += 4) {
    const Vec<double> s = load(v + i) + eps;
    const Vec<double> r = 1.0 / _mm256_sqrt_pd(s);
    store(out + i, s == 0.0 ? Vec<double>{} : r);
  }
#endif
  for (; i < n; ++i) out[i] = v[i] + eps == 0.0 ? 0.0 : 1.0 / std::sqrt(v[i] + eps);
}

/// Outputs at least this large are streamed past the cache (kernels/thresholds.h).
using thresholds::kStreamBytes;

/// Whether every row of `len` values of an output at p can take streaming stores: p is
/// 64-byte aligned and rows are whole vectors.
template <class T>
bool streamable(const T* p, std::int64_t len, std::int64_t rows) {
  return static_cast<std::size_t>(len * rows) * sizeof(T) >= kStreamBytes &&
         reinterpret_cast<std::uintptr_t>(p) % 64 == 0 && len % kLanes<T> == 0;
}

/// Threads for a kernel over `work` elements: all configured threads past the parallel
/// grain, else one (a parallel region costs about a microsecond).
inline int threads_for(std::int64_t work) { return work >= kParallelGrain ? get_num_threads() : 1; }

/// Rows per work chunk of a kernel: about 1 MiB of the operand (`row_bytes` per row), a
/// multiple of `unit` rows (the kernel's own blocking); kernels/thresholds.h.
using thresholds::chunk_rows;

/// Runs body(k, r0, r1) for the chunks k = 0, 1, ... of rows [0, rows), `chunk` rows each (the
/// last shorter), on up to nt threads that each take the next chunk when done with one: a
/// thread slowed by another job on its core does fewer chunks instead of holding the others
/// up at the end of the region. The chunks do not depend on nt, so a kernel that keeps one
/// partial result per chunk and merges them in chunk order gets the same bits on any number
/// of threads.
template <class F>
void for_row_chunks(std::int64_t rows, std::int64_t chunk, int nt, F&& body) {
  const std::int64_t n = (rows + chunk - 1) / chunk;
  if (nt <= 1 || n <= 1) {
    for (std::int64_t k = 0; k < n; ++k) body(k, k * chunk, std::min(rows, (k + 1) * chunk));
    return;
  }
  parallel_items(n, nt, [&](std::int64_t k) { body(k, k * chunk, std::min(rows, (k + 1) * chunk)); });
}

/// The totals of per-chunk partial sums kept by a for_row_chunks kernel: `part` holds, for each
/// of the nc chunks, C values of a first sum then C of a second; s1 and s2 get chunk 0's, then
/// chunks 1, 2, ... added in order (the same bits on any number of threads).
inline void sum_chunk_pairs(const double* part, std::size_t nc, std::int64_t C, double* s1, double* s2) {
  const std::size_t Cs = static_cast<std::size_t>(C);
  std::copy(part, part + C, s1);
  std::copy(part + C, part + 2 * C, s2);
  for (std::size_t k = 1; k < nc; ++k)
    for (std::int64_t c = 0; c < C; ++c) {
      s1[c] += part[2 * Cs * k + static_cast<std::size_t>(c)];
      s2[c] += part[2 * Cs * k + Cs + static_cast<std::size_t>(c)];
    }
}

/// A per-thread reusable buffer of at least n values (contents unspecified), so
/// steady-state calls do no heap allocation. Each caller passes its own Tag type.
template <class Tag, class T>
T* scratch(std::size_t n) {
  // A local class, not std::vector: its members are symbols of this function's ISA
  // namespace, while std::vector<double>'s out-of-line members would be one weak symbol
  // shared by every ISA's translation units (core/kernels/isa_dispatch.h).
  struct Buffer {
    T* p = nullptr;
    std::size_t size = 0;
    ~Buffer() { delete[] p; }
  };
  thread_local Buffer buf;
  if (buf.size < n) {
    T* grown = new T[n];
    delete[] buf.p;
    buf.p = grown;
    buf.size = n;
  }
  return buf.p;
}

}  // namespace TAPEGRAD_ISA_INLINE_NS
}  // namespace tapegrad::layers::functional::kernels
