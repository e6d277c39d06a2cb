// The backward kernels of batch norm over (N, C): the per-channel sums and dx (each also
// with dy masked by the fused activation's backward); see batch_norm_nc.h for the layout and
// the passes. Compiled once per ISA level (core/kernels/isa_dispatch.h); registers
// bn_rows_backward.
#include <tapegrad/layers/functional/kernels/batch_norm_nc_common.h>

namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS {
namespace {
struct SumsTag {};
struct SumsTTag {};
}  // namespace

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
  kernels::sum_chunk_pairs(part, nc, C, s1, s2);
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

TAPEGRAD_REGISTER_KERNELS(BnRowsBackwardKernels, bn_rows_backward, .sums = &bn_rows_sums<T>, .dx = &bn_rows_dx<T>,
                          .sums_masked = &bn_rows_sums_masked<T>, .dx_masked = &bn_rows_dx_masked<T>)

}  // namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS
