// The (N, C) kernels of batch norm; see batch_norm_nc.h for the layout and the passes.
#include <tapegrad/layers/functional/kernels/batch_norm_nc.h>

#include <algorithm>
#include <type_traits>

#include <tapegrad/layers/functional/kernels/moments.h>
#include <tapegrad/layers/functional/kernels/simd.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>

// Compiled once per ISA level (core/kernels/isa_dispatch.h); norm_dispatch.cpp picks one.
namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS {
namespace {

using kernels::kLanes;
using kernels::merge_moments;
using kernels::Vec;
using Partial = kernels::PartialMoments;

// Rows per statistics block (kernels/thresholds.h): a block stays in L1 for the statistics'
// second pass; the T-precision sums run over one block's rows at a time.
using thresholds::bn_rows_block_rows;

// V is a vector of T or T itself (the channels past the last whole vector).
template <class V, class T>
constexpr std::int64_t lanes_of() {
  return static_cast<std::int64_t>(sizeof(V) / sizeof(T));
}
template <class V, class T>
inline V ld(const T* p) {
  if constexpr (std::is_same_v<V, T>)
    return *p;
  else
    return kernels::load(p);
}
template <class V, class T>
inline void st(T* p, V v) {
  if constexpr (std::is_same_v<V, T>)
    *p = v;
  else
    kernels::store(p, v);
}

// The activation fused after the normalisation (BnAct in batch_norm_nc.h) and its mask on dy,
// element-wise selects with the core ops' comparisons: relu's `v <= 0 ? 0 : v` (NaN
// passes), then clamp's `r > hi ? hi : r`; the backward keeps dy where relu's
// `m <= 0 ? 0 : dy` or relu_clamp's `0 < m <= hi` lets it through (m: the normalised value,
// the activation's input).
template <int Act, class V, class T>
inline V activate(V v, T hi) {
  if constexpr (Act == kBnActNone) {
    return v;
  } else {
    const V r = v <= V{} ? V{} : v;
    if constexpr (Act == kBnActRelu) {
      return r;
    } else {
      const V h = V{} + hi;
      return r > h ? h : r;
    }
  }
}
template <int Act, class V, class T>
inline V masked(V g, const T* m, T hi) {
  if constexpr (Act == kBnActNone) {
    return g;
  } else {
    const V mv = ld<V>(m);
    if constexpr (Act == kBnActRelu) {
      return mv <= V{} ? V{} : g;
    } else {
      const V h = V{} + hi;
      return (mv > V{}) & (mv <= h) ? g : V{};
    }
  }
}

// Calls f.template operator()<V, NV>(c0) over the channels: chunks of 4 vectors, one chunk
// of the remaining 1-3 vectors, then each remaining channel as a scalar.
template <class T, class F>
void for_chunks(std::int64_t C, F&& f) {
  constexpr std::int64_t L = kLanes<T>;
  std::int64_t c0 = 0;
  for (; c0 + 4 * L <= C; c0 += 4 * L) f.template operator()<Vec<T>, 4>(c0);
  switch ((C - c0) / L) {
    case 3: f.template operator()<Vec<T>, 3>(c0); break;
    case 2: f.template operator()<Vec<T>, 2>(c0); break;
    case 1: f.template operator()<Vec<T>, 1>(c0); break;
    default: break;
  }
  c0 += (C - c0) / L * L;
  for (; c0 < C; ++c0) f.template operator()<T, 1>(c0);
}

// Up to kBnRowsCachedBytes an operand is taken to be cache-resident (the sizes of MLP
// training): a kernel then walks a chunk of channels, held in registers, down the rows.
// Larger operands stream from memory row by row, the order the hardware prefetcher
// follows best (a chunk at a time would read each row in four strided pieces).
template <class T>
bool cached(std::int64_t N, std::int64_t C) {
  return thresholds::bn_rows_cached<T>(N, C);
}

// The statistics of rows [b, e) (see the header) into bmean, bm2; K, s, m are T scratch (C).
template <class T>
void block_moments(const T* __restrict x, std::int64_t C, std::int64_t b, std::int64_t e, bool by_chunk,
                   T* __restrict K, T* __restrict s, T* __restrict m, double* __restrict bmean,
                   double* __restrict bm2) {
  const double inv = 1.0 / static_cast<double>(e - b);
  const T* __restrict x0 = x + b * C;
  // pass 1 (from memory): s = Σ (x - K), K = the block's first row
  if (by_chunk) {
    for_chunks<T>(C, [&]<class V, int NV>(std::int64_t c0) {
      constexpr std::int64_t L = lanes_of<V, T>();
      const T* __restrict xs = x + c0;
      const std::int64_t Cl = C, be = b, ee = e;
      V k[NV], a[NV];
      for (int v = 0; v < NV; ++v) {
        k[v] = ld<V>(xs + be * Cl + v * L);
        a[v] = V{};
      }
      for (std::int64_t n = be + 1; n < ee; ++n)
        for (int v = 0; v < NV; ++v) a[v] += ld<V>(xs + n * Cl + v * L) - k[v];
      for (int v = 0; v < NV; ++v) {
        st<V>(K + c0 + v * L, k[v]);
        st<V>(s + c0 + v * L, a[v]);
      }
    });
  } else {
    for (std::int64_t c = 0; c < C; ++c) {
      K[c] = x0[c];
      s[c] = T(0);
    }
    std::int64_t n = b + 1;
    for (; n + 1 < e; n += 2) {  // two rows per visit of the sums in L1
      const T* __restrict xr = x + n * C;
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) s[c] += (xr[c] - K[c]) + (xr[C + c] - K[c]);
    }
    for (; n < e; ++n) {
      const T* __restrict xr = x + n * C;
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) s[c] += xr[c] - K[c];
    }
  }
  for (std::int64_t c = 0; c < C; ++c)
    m[c] = static_cast<T>(static_cast<double>(K[c]) + static_cast<double>(s[c]) * inv);
  // pass 2 (from cache, a chunk of channels at a time in registers), around m:
  // r = Σ (x - m), q = Σ (x - m)²
  for_chunks<T>(C, [&]<class V, int NV>(std::int64_t c0) {
    constexpr std::int64_t L = lanes_of<V, T>(), W = NV * L;
    const T* __restrict xs = x + c0;
    const std::int64_t Cl = C, be = b, ee = e;
    V mv[NV], r[NV], q[NV];
    for (int v = 0; v < NV; ++v) {
      mv[v] = ld<V>(m + c0 + v * L);
      r[v] = V{};
      q[v] = V{};
    }
    for (std::int64_t n = be; n < ee; ++n)
      for (int v = 0; v < NV; ++v) {
        const V d = ld<V>(xs + n * Cl + v * L) - mv[v];
        r[v] += d;
        q[v] += d * d;
      }
    alignas(64) T rt[W], qt[W];
    for (int v = 0; v < NV; ++v) {
      st<V>(rt + v * L, r[v]);
      st<V>(qt + v * L, q[v]);
    }
    for (std::int64_t i = 0; i < W; ++i) {
      const double rc = rt[i];
      bmean[c0 + i] = static_cast<double>(m[c0 + i]) + rc * inv;
      bm2[c0 + i] = std::max(0.0, static_cast<double>(qt[i]) - rc * rc * inv);
    }
  });
}

struct MomentsTag {};
struct BlockTag {};
struct MomentsTTag {};
struct SumsTag {};
struct SumsTTag {};

}  // namespace

template <class T>
void bn_rows_moments(const T* x, std::int64_t N, std::int64_t C, double* mean, double* var) {
  const std::size_t Cs = static_cast<std::size_t>(C);
  const bool by_chunk = cached<T>(N, C);
  const std::int64_t B = bn_rows_block_rows(C);
  const std::int64_t rows = kernels::chunk_rows(C * static_cast<std::int64_t>(sizeof(T)), B);
  const std::size_t nc = static_cast<std::size_t>((N + rows - 1) / rows);
  // per chunk: its mean and M2 (C each), merged below in chunk order
  double* parts = kernels::scratch<MomentsTag, double>(2 * Cs * nc);
  kernels::for_row_chunks(N, rows, kernels::threads_for(N * C), [&](std::int64_t k, std::int64_t r0, std::int64_t r1) {
    double* mine = parts + 2 * Cs * static_cast<std::size_t>(k);
    Partial p{0, mine, mine + C};
    double* bmean = kernels::scratch<BlockTag, double>(2 * Cs);
    double* bm2 = bmean + C;
    T* K = kernels::scratch<MomentsTTag, T>(3 * Cs);
    for (std::int64_t b = r0; b < r1; b += B) {
      const std::int64_t e = std::min(b + B, r1);
      block_moments<T>(x, C, b, e, by_chunk, K, K + C, K + 2 * C, bmean, bm2);
      merge_moments(p, C, e - b, bmean, bm2);
    }
  });
  Partial total{0, mean, var};
  for (std::size_t k = 0; k < nc; ++k) {
    const std::int64_t count = std::min(N, static_cast<std::int64_t>(k + 1) * rows) - static_cast<std::int64_t>(k) * rows;
    merge_moments(total, C, count, parts + 2 * Cs * k, parts + 2 * Cs * k + Cs);
  }
  for (std::int64_t c = 0; c < C; ++c) var[c] /= static_cast<double>(N);
}

namespace {
// y = act((x - mu)·a + b); pre (Act != kBnActNone) receives (x - mu)·a + b.
template <int Act, class T>
void affine_impl(const T* x, T* y, T* pre, std::int64_t N, std::int64_t C, const T* mu, const T* a, const T* b,
                 T hi) {
  constexpr bool kPre = Act != kBnActNone;
  const bool stream = kernels::streamable(y, C, N) && (!kPre || kernels::streamable(pre, C, N)),
             by_chunk = cached<T>(N, C);
  const std::int64_t rows = kernels::chunk_rows(C * static_cast<std::int64_t>(sizeof(T)), 1);
  kernels::for_row_chunks(N, rows, kernels::threads_for(N * C), [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
    if (by_chunk) {
      for_chunks<T>(C, [&]<class V, int NV>(std::int64_t c0) {
        constexpr std::int64_t L = lanes_of<V, T>();
        // local restrict copies: the stores through y cannot move the pointers
        const T* __restrict xs = x + c0;
        T* __restrict ys = y + c0;
        T* __restrict ps = (kPre ? pre : y) + c0;  // y: never written
        const std::int64_t Cl = C, e = r1;
        V u[NV], sc[NV], sh[NV];
        for (int v = 0; v < NV; ++v) {
          u[v] = ld<V>(mu + c0 + v * L);
          sc[v] = ld<V>(a + c0 + v * L);
          sh[v] = ld<V>(b + c0 + v * L);
        }
        for (std::int64_t n = r0; n < e; ++n)
          for (int v = 0; v < NV; ++v) {
            const V val = (ld<V>(xs + n * Cl + v * L) - u[v]) * sc[v] + sh[v];
            if constexpr (kPre) st<V>(ps + n * Cl + v * L, val);
            st<V>(ys + n * Cl + v * L, activate<Act, V>(val, hi));
          }
      });
      return;
    }
    const T* __restrict u = mu;
    const T* __restrict sc = a;
    const T* __restrict sh = b;
    for (std::int64_t n = r0; n < r1; ++n) {
      const T* __restrict xr = x + n * C;
      T* __restrict yr = y + n * C;
      T* __restrict pr = (kPre ? pre : y) + n * C;  // y: never written
      if (stream) {
        for (std::int64_t c = 0; c < C; c += kLanes<T>) {
          const Vec<T> val = (kernels::load(xr + c) - kernels::load(u + c)) * kernels::load(sc + c) + kernels::load(sh + c);
          if constexpr (kPre) kernels::stream(pr + c, val);
          kernels::stream(yr + c, activate<Act, Vec<T>>(val, hi));
        }
      } else if constexpr (Act == kBnActNone) {
#pragma omp simd
        for (std::int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - u[c]) * sc[c] + sh[c];
      } else {
#pragma omp simd
        for (std::int64_t c = 0; c < C; ++c) {
          const T val = (xr[c] - u[c]) * sc[c] + sh[c];
          if constexpr (kPre) pr[c] = val;
          yr[c] = activate<Act, T>(val, hi);
        }
      }
    }
    if (stream) kernels::fence();
  });
}
}  // namespace

template <class T>
void bn_rows_affine(const T* x, T* y, std::int64_t N, std::int64_t C, const T* mu, const T* a, const T* b) {
  affine_impl<kBnActNone, T>(x, y, nullptr, N, C, mu, a, b, T(0));
}

template <class T>
void bn_rows_affine_act(const T* x, T* y, T* pre, std::int64_t N, std::int64_t C, const T* mu, const T* a, const T* b,
                        int act, T hi) {
  switch (act) {
    case kBnActRelu: affine_impl<kBnActRelu, T>(x, y, pre, N, C, mu, a, b, hi); return;
    case kBnActReluClamp: affine_impl<kBnActReluClamp, T>(x, y, pre, N, C, mu, a, b, hi); return;
    default: affine_impl<kBnActNone, T>(x, y, nullptr, N, C, mu, a, b, hi); return;
  }
}

namespace {
// bn_rows_sums of dy masked by the activation's backward (masked<Act>, m the mask's source).
template <int Act, class T>
void sums_impl(const T* x, const T* dy, const T* m, std::int64_t N, std::int64_t C, const T* mu, double* s1,
               double* s2, T hi) {
  const std::size_t Cs = static_cast<std::size_t>(C);
  const bool by_chunk = cached<T>(N, C);
  const std::int64_t B = bn_rows_block_rows(C);
  const std::int64_t rows = kernels::chunk_rows(2 * C * static_cast<std::int64_t>(sizeof(T)), B);
  const std::size_t nc = static_cast<std::size_t>((N + rows - 1) / rows);
  // per chunk: its Σdy and Σdy·(x - μ) (C each), added up below in chunk order
  double* part = kernels::scratch<SumsTag, double>(2 * Cs * nc);
  std::fill(part, part + 2 * Cs * nc, 0.0);
  kernels::for_row_chunks(N, rows, kernels::threads_for(N * C), [&](std::int64_t k, std::int64_t r0, std::int64_t r1) {
    double* __restrict p1 = part + 2 * Cs * static_cast<std::size_t>(k);
    double* __restrict p2 = p1 + C;
    T* __restrict a1 = kernels::scratch<SumsTTag, T>(2 * Cs);
    T* __restrict a2 = a1 + C;
    const T* __restrict u = mu;
    // blocks of rows summed in T, the blocks in double
    for (std::int64_t b = r0, end = r1; b < end; b += B) {
      const std::int64_t e = std::min(b + B, end);
      if (by_chunk) {
        for_chunks<T>(C, [&]<class V, int NV>(std::int64_t c0) {
          constexpr std::int64_t L = lanes_of<V, T>();
          V uv[NV], g1[NV], g2[NV];
          for (int v = 0; v < NV; ++v) {
            uv[v] = ld<V>(u + c0 + v * L);
            g1[v] = V{};
            g2[v] = V{};
          }
          const T* __restrict xs = x + c0;
          const T* __restrict gs = dy + c0;
          const T* __restrict ms = (Act != kBnActNone ? m : dy) + c0;  // dy: never read
          const std::int64_t Cl = C, be = b, ee = e;
          for (std::int64_t n = be; n < ee; ++n)
            for (int v = 0; v < NV; ++v) {
              const V g = masked<Act, V>(ld<V>(gs + n * Cl + v * L), ms + n * Cl + v * L, hi);
              g1[v] += g;
              g2[v] += (ld<V>(xs + n * Cl + v * L) - uv[v]) * g;
            }
          for (int v = 0; v < NV; ++v) {
            st<V>(a1 + c0 + v * L, g1[v]);
            st<V>(a2 + c0 + v * L, g2[v]);
          }
        });
      } else {
        std::fill(a1, a1 + 2 * C, T(0));
        std::int64_t n = b;
        if constexpr (Act == kBnActNone) {
          for (; n + 1 < e; n += 2) {  // two rows per visit of the sums in L1
            const T* __restrict xr = x + n * C;
            const T* __restrict gr = dy + n * C;
#pragma omp simd
            for (std::int64_t c = 0; c < C; ++c) {
              a1[c] += gr[c] + gr[C + c];
              a2[c] += (xr[c] - u[c]) * gr[c] + (xr[C + c] - u[c]) * gr[C + c];
            }
          }
          for (; n < e; ++n) {
            const T* __restrict xr = x + n * C;
            const T* __restrict gr = dy + n * C;
#pragma omp simd
            for (std::int64_t c = 0; c < C; ++c) {
              a1[c] += gr[c];
              a2[c] += (xr[c] - u[c]) * gr[c];
            }
          }
        } else {
          for (; n + 1 < e; n += 2) {
            const T* __restrict xr = x + n * C;
            const T* __restrict gr = dy + n * C;
            const T* __restrict mr = m + n * C;
#pragma omp simd
            for (std::int64_t c = 0; c < C; ++c) {
              const T g0 = masked<Act, T>(gr[c], mr + c, hi), g1 = masked<Act, T>(gr[C + c], mr + C + c, hi);
              a1[c] += g0 + g1;
              a2[c] += (xr[c] - u[c]) * g0 + (xr[C + c] - u[c]) * g1;
            }
          }
          for (; n < e; ++n) {
            const T* __restrict xr = x + n * C;
            const T* __restrict gr = dy + n * C;
            const T* __restrict mr = m + n * C;
#pragma omp simd
            for (std::int64_t c = 0; c < C; ++c) {
              const T g0 = masked<Act, T>(gr[c], mr + c, hi);
              a1[c] += g0;
              a2[c] += (xr[c] - u[c]) * g0;
            }
          }
        }
      }
      for (std::int64_t c = 0; c < C; ++c) {
        p1[c] += static_cast<double>(a1[c]);
        p2[c] += static_cast<double>(a2[c]);
      }
    }
  });
  std::copy(part, part + C, s1);
  std::copy(part + C, part + 2 * C, s2);
  for (std::size_t k = 1; k < nc; ++k)
    for (std::int64_t c = 0; c < C; ++c) {
      s1[c] += part[2 * Cs * k + static_cast<std::size_t>(c)];
      s2[c] += part[2 * Cs * k + Cs + static_cast<std::size_t>(c)];
    }
}
}  // namespace

template <class T>
void bn_rows_sums(const T* x, const T* dy, std::int64_t N, std::int64_t C, const T* mu, double* s1, double* s2) {
  sums_impl<kBnActNone, T>(x, dy, nullptr, N, C, mu, s1, s2, T(0));
}

template <class T>
void bn_rows_sums_masked(const T* x, const T* dy, const T* m, std::int64_t N, std::int64_t C, const T* mu, double* s1,
                         double* s2, int act, T hi) {
  switch (act) {
    case kBnActRelu: sums_impl<kBnActRelu, T>(x, dy, m, N, C, mu, s1, s2, hi); return;
    case kBnActReluClamp: sums_impl<kBnActReluClamp, T>(x, dy, m, N, C, mu, s1, s2, hi); return;
    default: sums_impl<kBnActNone, T>(x, dy, nullptr, N, C, mu, s1, s2, hi); return;
  }
}

namespace {
// bn_rows_dx of dy masked by the activation's backward (masked<Act>, m the mask's source).
template <int Act, class T>
void dx_impl(const T* x, const T* dy, const T* m, T* dx, std::int64_t N, std::int64_t C, const T* mu, const T* k1,
             const T* k2, const T* k3, T hi) {
  const bool stream = kernels::streamable(dx, C, N), by_chunk = cached<T>(N, C);
  const std::int64_t rows = kernels::chunk_rows(C * static_cast<std::int64_t>(sizeof(T)), 1);
  kernels::for_row_chunks(N, rows, kernels::threads_for(N * C), [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
    if (by_chunk) {
      for_chunks<T>(C, [&]<class V, int NV>(std::int64_t c0) {
        constexpr std::int64_t L = lanes_of<V, T>();
        V u[NV], a[NV], b[NV], k[NV];
        for (int v = 0; v < NV; ++v) {
          u[v] = ld<V>(mu + c0 + v * L);
          a[v] = ld<V>(k1 + c0 + v * L);
          b[v] = ld<V>(k2 + c0 + v * L);
          k[v] = ld<V>(k3 + c0 + v * L);
        }
        const T* __restrict xs = x + c0;
        const T* __restrict gs = dy + c0;
        const T* __restrict ms = (Act != kBnActNone ? m : dy) + c0;  // dy: never read
        T* __restrict os = dx + c0;
        const std::int64_t Cl = C, e = r1;
        for (std::int64_t n = r0; n < e; ++n)
          for (int v = 0; v < NV; ++v) {
            const std::int64_t i = n * Cl + v * L;
            st<V>(os + i, a[v] * (masked<Act, V>(ld<V>(gs + i), ms + i, hi) - b[v] - (ld<V>(xs + i) - u[v]) * k[v]));
          }
      });
      return;
    }
    const T* __restrict u = mu;
    const T* __restrict a = k1;
    const T* __restrict b = k2;
    const T* __restrict k = k3;
    for (std::int64_t n = r0; n < r1; ++n) {
      const T* __restrict xr = x + n * C;
      const T* __restrict gr = dy + n * C;
      const T* __restrict mr = (Act != kBnActNone ? m : dy) + n * C;  // dy: never read
      T* __restrict o = dx + n * C;
      if (stream) {
        for (std::int64_t c = 0; c < C; c += kLanes<T>)
          kernels::stream(o + c, kernels::load(a + c) * (masked<Act, Vec<T>>(kernels::load(gr + c), mr + c, hi) -
                                                         kernels::load(b + c) -
                                                         (kernels::load(xr + c) - kernels::load(u + c)) * kernels::load(k + c)));
      } else if constexpr (Act == kBnActNone) {
#pragma omp simd
        for (std::int64_t c = 0; c < C; ++c) o[c] = a[c] * (gr[c] - b[c] - (xr[c] - u[c]) * k[c]);
      } else {
#pragma omp simd
        for (std::int64_t c = 0; c < C; ++c) o[c] = a[c] * (masked<Act, T>(gr[c], mr + c, hi) - b[c] - (xr[c] - u[c]) * k[c]);
      }
    }
    if (stream) kernels::fence();
  });
}
}  // namespace

template <class T>
void bn_rows_dx(const T* x, const T* dy, T* dx, std::int64_t N, std::int64_t C, const T* mu, const T* k1,
                const T* k2, const T* k3) {
  dx_impl<kBnActNone, T>(x, dy, nullptr, dx, N, C, mu, k1, k2, k3, T(0));
}

template <class T>
void bn_rows_dx_masked(const T* x, const T* dy, const T* m, T* dx, std::int64_t N, std::int64_t C, const T* mu,
                       const T* k1, const T* k2, const T* k3, int act, T hi) {
  switch (act) {
    case kBnActRelu: dx_impl<kBnActRelu, T>(x, dy, m, dx, N, C, mu, k1, k2, k3, hi); return;
    case kBnActReluClamp: dx_impl<kBnActReluClamp, T>(x, dy, m, dx, N, C, mu, k1, k2, k3, hi); return;
    default: dx_impl<kBnActNone, T>(x, dy, nullptr, dx, N, C, mu, k1, k2, k3, hi); return;
  }
}

#define TAPEGRAD_BN_ROWS(T)                                                                                        \
  template void bn_rows_moments<T>(const T*, std::int64_t, std::int64_t, double*, double*);                       \
  template void bn_rows_affine<T>(const T*, T*, std::int64_t, std::int64_t, const T*, const T*, const T*);        \
  template void bn_rows_sums<T>(const T*, const T*, std::int64_t, std::int64_t, const T*, double*, double*);      \
  template void bn_rows_dx<T>(const T*, const T*, T*, std::int64_t, std::int64_t, const T*, const T*, const T*, \
                              const T*);                                                                          \
  template void bn_rows_affine_act<T>(const T*, T*, T*, std::int64_t, std::int64_t, const T*, const T*, const T*, \
                                      int, T);                                                                    \
  template void bn_rows_sums_masked<T>(const T*, const T*, const T*, std::int64_t, std::int64_t, const T*,       \
                                       double*, double*, int, T);                                                 \
  template void bn_rows_dx_masked<T>(const T*, const T*, const T*, T*, std::int64_t, std::int64_t, const T*,     \
                                     const T*, const T*, const T*, int, T);
TAPEGRAD_BN_ROWS(float)
TAPEGRAD_BN_ROWS(double)
#undef TAPEGRAD_BN_ROWS

}  // namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS
