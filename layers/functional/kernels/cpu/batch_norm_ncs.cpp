// The (N, C, S) passes of batch norm; see batch_norm_ncs.h. Compiled once per ISA level; registers bn_ncs.
//
// Memory passes (the cost at large sizes): the statistics read x once (blocks of rows stay in
// cache for the exact second pass around the block mean); the backward sums read x and dy
// once; the element-wise passes read x (and dy) once more and write y (dx). Outputs too large
// for the cache are written with streaming stores, so they cost no extra read.
#include <tapegrad/layers/functional/kernels/batch_norm_ncs.h>

#include <tapegrad/layers/functional/kernels/moments.h>
#include <tapegrad/layers/functional/kernels/simd.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>

namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS {
namespace {

// Sums over rows in kSumLanes fixed lanes: element i of a row goes to lane i mod kSumLanes,
// and the lanes are added in order at the end. Independent accumulators (one vector) instead
// of one serial chain of additions; the order is still fixed by the source, the same on every
// run, at every thread count and on every ISA level.
constexpr int kSumLanes = 8;
template <class T, class F>
inline void lane_sums(const T* __restrict r, std::int64_t len, double* __restrict acc, F f) {
  std::int64_t i = 0;
  for (; i + kSumLanes <= len; i += kSumLanes)
    for (int l = 0; l < kSumLanes; ++l) acc[l] += f(r[i + l]);
  for (int l = 0; i < len; ++i, ++l) acc[l] += f(r[i]);
}
inline double fold_lanes(const double* acc) {
  double s = 0;
  for (int l = 0; l < kSumLanes; ++l) s += acc[l];
  return s;
}

// Writes a row computed by f(out, begin, len) into dst[0, len): directly, or through an
// L1 buffer and streaming stores when `stream`.
template <class T, class F>
inline void write_row_maybe_streamed(T* dst, std::int64_t len, bool stream, F&& f) {
  if (!stream) {
    f(dst, 0, len);
    return;
  }
  constexpr std::int64_t kChunk = thresholds::kBnStreamBufferElems;
  alignas(64) T buf[kChunk];
  for (std::int64_t b = 0; b < len; b += kChunk) {
    const std::int64_t n = kChunk < len - b ? kChunk : len - b;
    f(buf, b, n);
    stream_copy(dst + b, buf, static_cast<std::size_t>(n) * sizeof(T));
  }
}

}  // namespace

template <class T>
void bn_ncs_moments(const T* x, std::int64_t N, std::int64_t C, std::int64_t S, std::int64_t c0, std::int64_t c1,
                    double* mean, double* m2) {
  const std::int64_t G = thresholds::bn_spatial_block_rows(S);  // rows per statistics block
  for (std::int64_t c = c0; c < c1; ++c) {
    PartialMoments pc{0, mean + c, m2 + c};
    for (std::int64_t b = 0; b < N; b += G) {
      const std::int64_t e = b + G < N ? b + G : N, nb = (e - b) * S;
      double sl[kSumLanes] = {}, ql[kSumLanes] = {};
      for (std::int64_t n = b; n < e; ++n) lane_sums(x + (n * C + c) * S, S, sl, [](T v) { return double(v); });
      const double bmean = fold_lanes(sl) / static_cast<double>(nb);
      for (std::int64_t n = b; n < e; ++n)
        lane_sums(x + (n * C + c) * S, S, ql, [bmean](T v) {
          const double u = v - bmean;
          return u * u;
        });
      double q = fold_lanes(ql);
      merge_moments(pc, 1, nb, &bmean, &q);
    }
  }
}

template <class T>
void bn_ncs_sums(const T* x, const T* g, std::int64_t N, std::int64_t C, std::int64_t S, const double* mu,
                 std::int64_t c0, std::int64_t c1, double* s1, double* s2) {
  for (std::int64_t c = c0; c < c1; ++c) {
    double l1[kSumLanes] = {}, l2[kSumLanes] = {};
    const double m = mu[c];
    for (std::int64_t n = 0; n < N; ++n) {
      const T* __restrict xr = x + (n * C + c) * S;
      const T* __restrict gr = g + (n * C + c) * S;
      lane_sums(gr, S, l1, [](T v) { return double(v); });
      std::int64_t s = 0;  // Σ (x - μ)·dy in the same lanes as lane_sums
      for (; s + kSumLanes <= S; s += kSumLanes)
        for (int l = 0; l < kSumLanes; ++l) l2[l] += (xr[s + l] - m) * static_cast<double>(gr[s + l]);
      for (int l = 0; s < S; ++s, ++l) l2[l] += (xr[s] - m) * static_cast<double>(gr[s]);
    }
    s1[c] = fold_lanes(l1);
    s2[c] = fold_lanes(l2);
  }
}

template <class T>
void bn_ncs_affine(const T* xp, T* out, std::int64_t C, std::int64_t S, std::int64_t r0, std::int64_t r1,
                   const T* u, const T* a, const T* b, bool stream) {
  for (std::int64_t r = r0; r < r1; ++r)
    write_row_maybe_streamed(out + r * S, S, stream, [&](T* o, std::int64_t s0, std::int64_t n) {
      const std::int64_t c = r % C;
      const T ac = a[c], bc = b[c], uc = u[c];
      const T* xr = xp + r * S + s0;
      for (std::int64_t i = 0; i < n; ++i) o[i] = (xr[i] - uc) * ac + bc;
    });
  if (stream) fence();
}

template <class T>
void bn_ncs_dx(const T* xp, const T* gp, T* out, std::int64_t C, std::int64_t S, std::int64_t r0, std::int64_t r1,
               const T* u, const T* a, const T* b, const T* k, bool stream) {
  for (std::int64_t r = r0; r < r1; ++r)
    write_row_maybe_streamed(out + r * S, S, stream, [&](T* o, std::int64_t s0, std::int64_t n) {
      const std::int64_t c = r % C;
      const T ac = a[c], bc = b[c], kc = k[c], uc = u[c];
      const T* xr = xp + r * S + s0;
      const T* gr = gp + r * S + s0;
      for (std::int64_t i = 0; i < n; ++i) o[i] = ac * (gr[i] - bc - (xr[i] - uc) * kc);
    });
  if (stream) fence();
}

TAPEGRAD_REGISTER_KERNELS(BnNcsKernels, bn_ncs, .moments = &bn_ncs_moments<T>, .sums = &bn_ncs_sums<T>,
                          .affine = &bn_ncs_affine<T>, .dx = &bn_ncs_dx<T>)

}  // namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS
