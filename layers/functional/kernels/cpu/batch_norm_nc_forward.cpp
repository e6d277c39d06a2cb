// The forward kernels of batch norm over (N, C): the statistics and the normalisation (with
// the fused activation); see batch_norm_nc.h for the layout and the passes. Compiled once per
// ISA level (core/kernels/isa_dispatch.h); registers bn_rows_forward.
#include <tapegrad/layers/functional/kernels/batch_norm_nc_common.h>

namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS {
namespace {

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

TAPEGRAD_REGISTER_KERNELS(BnRowsForwardKernels, bn_rows_forward, .moments = &bn_rows_moments<T>,
                          .affine = &bn_rows_affine<T>, .affine_act = &bn_rows_affine_act<T>)

}  // namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS
