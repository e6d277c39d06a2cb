// The per-row LayerNorm kernels; see layer_norm_rows.h for the formulas and the passes.
#include <tapegrad/layers/functional/kernels/layer_norm_rows.h>

#include <algorithm>
#include <cmath>

#include <tapegrad/layers/functional/kernels/simd.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>

// Compiled once per ISA level (core/kernels/isa_dispatch.h); registers ln_rows.
namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS {
namespace {

using kernels::hsum;
using kernels::kLanes;
using kernels::load;
using kernels::splat;
using kernels::Vec;

// Rows whose dγ, dβ are summed in T before they are added to the double totals
// (kernels/thresholds.h).
constexpr std::int64_t kGradBlockRows = thresholds::kLnGradBlockRows;

// Σ (x - k) over a row of K values.
template <class T>
double sum_shifted(const T* __restrict x, std::int64_t K, T k) {
  constexpr std::int64_t L = kLanes<T>;
  const Vec<T> kv = splat(k);
  Vec<T> a0{}, a1{}, a2{}, a3{};
  std::int64_t j = 0;
  for (; j + 4 * L <= K; j += 4 * L) {
    a0 += load(x + j) - kv;
    a1 += load(x + j + L) - kv;
    a2 += load(x + j + 2 * L) - kv;
    a3 += load(x + j + 3 * L) - kv;
  }
  for (; j + L <= K; j += L) a0 += load(x + j) - kv;
  T tail = 0;
  for (; j < K; ++j) tail += x[j] - k;
  return hsum((a0 + a1) + (a2 + a3)) + static_cast<double>(tail);
}

// r = Σ (x - m) and q = Σ (x - m)² over a row of K values.
template <class T>
void deviation_sums(const T* __restrict x, std::int64_t K, T m, double& r, double& q) {
  constexpr std::int64_t L = kLanes<T>;
  const Vec<T> mv = splat(m);
  Vec<T> r0{}, r1{}, q0{}, q1{};
  std::int64_t j = 0;
  for (; j + 2 * L <= K; j += 2 * L) {
    const Vec<T> d0 = load(x + j) - mv, d1 = load(x + j + L) - mv;
    r0 += d0;
    r1 += d1;
    q0 += d0 * d0;
    q1 += d1 * d1;
  }
  for (; j + L <= K; j += L) {
    const Vec<T> d0 = load(x + j) - mv;
    r0 += d0;
    q0 += d0 * d0;
  }
  T rt = 0, qt = 0;
  for (; j < K; ++j) {
    const T d = x[j] - m;
    rt += d;
    qt += d * d;
  }
  r = hsum(r0 + r1) + static_cast<double>(rt);
  q = hsum(q0 + q1) + static_cast<double>(qt);
}

// y = (x - μ)·(rstd·γ) + β over one row. Plain stores: measured at (65536, 256) float32,
// streaming stores made this forward slower (8.0 ms against 6.5 ms), unlike the backward's.
template <class T, bool HasW, bool HasB>
void write_row(const T* __restrict x, T* __restrict y, std::int64_t K, const T* __restrict w, const T* __restrict b,
               T mu, T rs, bool stream) {
  constexpr std::int64_t L = kLanes<T>;
  const Vec<T> mv = splat(mu), rv = splat(rs);
  std::int64_t j = 0;
  for (; j + L <= K; j += L) {
    Vec<T> o = (load(x + j) - mv) * rv;  // x̂ (exactly 0 for a constant row)
    if constexpr (HasW) o = o * load(w + j);
    if constexpr (HasB) o = o + load(b + j);
    if (stream)
      kernels::stream(y + j, o);
    else
      kernels::store(y + j, o);
  }
  for (; j < K; ++j) {
    T o = (x[j] - mu) * rs;
    if constexpr (HasW) o = o * w[j];
    if constexpr (HasB) o = o + b[j];
    y[j] = o;
  }
}

// Rows per block (kernels/thresholds.h): a block's statistics are taken for all its rows
// first (independent rows, so their dependency chains - sums, square root, division -
// overlap), then its rows are written while they are still in L1.
constexpr std::int64_t kMaxRowBlock = thresholds::kLnMaxRowBlock;
std::int64_t row_block(std::int64_t K) { return thresholds::ln_row_block(K); }

// Software prefetch of the row `ahead` rows on, a cache line at a time, while the current row
// is worked on from L1: the statistics of a row wait on its first read, and the hardware
// prefetcher stops at each 4 KiB page (4 rows of 256 floats).
template <class T>
inline void prefetch_row(const T* p, std::int64_t K) {
  const char* c = reinterpret_cast<const char*>(p);
  for (std::int64_t o = 0; o < K * static_cast<std::int64_t>(sizeof(T)); o += 64) __builtin_prefetch(c + o, 0, 3);
}

template <class T, bool HasW, bool HasB>
void forward_share(const T* x, T* y, std::int64_t r0, std::int64_t r1, std::int64_t K, std::int64_t G, const T* w,
                   const T* b, double eps, double* mean, double* rstd, double* var, bool stream) {
  const double inv = 1.0 / static_cast<double>(K);
  const std::int64_t RB = row_block(K);
  double v2[kMaxRowBlock], rs[kMaxRowBlock];
  T mu[kMaxRowBlock];
  for (std::int64_t b0 = r0; b0 < r1; b0 += RB) {
    const std::int64_t nb = std::min(b0 + RB, r1) - b0;
    for (std::int64_t i = 0; i < nb; ++i) {
      const T* xr = x + (b0 + i) * K;
      if (b0 + i + RB < r1) prefetch_row(xr + RB * K, K);
      const T k0 = xr[0];
      const T m = static_cast<T>(static_cast<double>(k0) + sum_shifted(xr, K, k0) * inv);
      double rd, qd;
      deviation_sums(xr, K, m, rd, qd);
      v2[i] = std::max(0.0, qd - rd * rd * inv) * inv;
      mu[i] = static_cast<T>(static_cast<double>(m) + rd * inv);
    }
    for (std::int64_t i = 0; i < nb; ++i) rs[i] = 1.0 / std::sqrt(v2[i] + eps);
    for (std::int64_t i = 0; i < nb; ++i) {
      const std::int64_t r = b0 + i;
      mean[r] = static_cast<double>(mu[i]);
      rstd[r] = rs[i];
      if (var) var[r] = v2[i];
      const std::int64_t c0 = (r % G) * K;
      write_row<T, HasW, HasB>(x + r * K, y + r * K, K, HasW ? w + c0 : nullptr, HasB ? b + c0 : nullptr, mu[i],
                               static_cast<T>(rs[i]), stream);
    }
  }
}

// One row's backward, pass 1: adds dy·x̂ and dy into the T accumulators aw, ab (the row's
// channels) and returns the sums A = Σ γ·dy (term 2's) and Bx = Σ γ·dy·(x - μ) (term 3's).
template <class T, bool HasW>
void row_sums(const T* __restrict g, const T* __restrict x, std::int64_t K, const T* __restrict w,
              T* __restrict aw, T* __restrict ab, T mu, T rst, double& A, double& Bx) {
  constexpr std::int64_t L = kLanes<T>;
  const Vec<T> mv = splat(mu), rv = splat(rst);
  Vec<T> A0{}, A1{}, B0{}, B1{};
  std::int64_t j = 0;
  for (; j + 2 * L <= K; j += 2 * L) {
    const Vec<T> g0 = load(g + j), g1 = load(g + j + L);
    const Vec<T> d0 = load(x + j) - mv, d1 = load(x + j + L) - mv;
    Vec<T> gd0 = g0, gd1 = g1;
    if constexpr (HasW) {
      gd0 = gd0 * load(w + j);
      gd1 = gd1 * load(w + j + L);
    }
    A0 += gd0;
    A1 += gd1;
    B0 += gd0 * d0;
    B1 += gd1 * d1;
    kernels::store(aw + j, load(aw + j) + g0 * (d0 * rv));
    kernels::store(aw + j + L, load(aw + j + L) + g1 * (d1 * rv));
    kernels::store(ab + j, load(ab + j) + g0);
    kernels::store(ab + j + L, load(ab + j + L) + g1);
  }
  for (; j + L <= K; j += L) {
    const Vec<T> g0 = load(g + j), d0 = load(x + j) - mv;
    Vec<T> gd0 = g0;
    if constexpr (HasW) gd0 = gd0 * load(w + j);
    A0 += gd0;
    B0 += gd0 * d0;
    kernels::store(aw + j, load(aw + j) + g0 * (d0 * rv));
    kernels::store(ab + j, load(ab + j) + g0);
  }
  T At = 0, Bt = 0;
  for (; j < K; ++j) {
    const T d = x[j] - mu;
    const T gd = HasW ? g[j] * w[j] : g[j];
    At += gd;
    Bt += gd * d;
    aw[j] += g[j] * (d * rst);
    ab[j] += g[j];
  }
  A = hsum(A0 + A1) + static_cast<double>(At);
  Bx = hsum(B0 + B1) + static_cast<double>(Bt);
}

// Pass 1 for two rows with the same channels (G = 1): one visit of γ and of the dγ, dβ
// accumulators serves both rows. Used for cache-resident sizes only: measured at (32, 128)
// the backward's kernels take 850 instead of 1110 ns, while at (65536, 256), from memory,
// the longer dependency chains made it slower.
template <class T, bool HasW>
void row_sums2(const T* __restrict g0, const T* __restrict x0, const T* __restrict g1, const T* __restrict x1,
               std::int64_t K, const T* __restrict w, T* __restrict aw, T* __restrict ab, T mu0, T rst0, T mu1,
               T rst1, double& A0, double& Bx0, double& A1, double& Bx1) {
  constexpr std::int64_t L = kLanes<T>;
  const Vec<T> m0 = splat(mu0), r0 = splat(rst0), m1 = splat(mu1), r1 = splat(rst1);
  Vec<T> a0{}, a1{}, b0{}, b1{};
  std::int64_t j = 0;
  for (; j + L <= K; j += L) {
    const Vec<T> gv0 = load(g0 + j), gv1 = load(g1 + j);
    const Vec<T> d0 = load(x0 + j) - m0, d1 = load(x1 + j) - m1;
    Vec<T> gd0 = gv0, gd1 = gv1;
    if constexpr (HasW) {
      const Vec<T> wv = load(w + j);
      gd0 = gd0 * wv;
      gd1 = gd1 * wv;
    }
    a0 += gd0;
    a1 += gd1;
    b0 += gd0 * d0;
    b1 += gd1 * d1;
    kernels::store(aw + j, load(aw + j) + (gv0 * (d0 * r0) + gv1 * (d1 * r1)));
    kernels::store(ab + j, load(ab + j) + (gv0 + gv1));
  }
  T at0 = 0, bt0 = 0, at1 = 0, bt1 = 0;
  for (; j < K; ++j) {
    const T d0 = x0[j] - mu0, d1 = x1[j] - mu1;
    const T gd0 = HasW ? g0[j] * w[j] : g0[j], gd1 = HasW ? g1[j] * w[j] : g1[j];
    at0 += gd0;
    bt0 += gd0 * d0;
    at1 += gd1;
    bt1 += gd1 * d1;
    aw[j] += g0[j] * (d0 * rst0) + g1[j] * (d1 * rst1);
    ab[j] += g0[j] + g1[j];
  }
  A0 = hsum(a0) + static_cast<double>(at0);
  Bx0 = hsum(b0) + static_cast<double>(bt0);
  A1 = hsum(a1) + static_cast<double>(at1);
  Bx1 = hsum(b1) + static_cast<double>(bt1);
}

// Pass 2: dx = rstd·γ·dy (term 1, the direct path) - c1 (term 2, through μ: rstd·A/K)
//              - (x - μ)·c3 (term 3, through σ²: rstd³·Bx/K).
template <class T, bool HasW>
void row_dx(const T* __restrict g, const T* __restrict x, T* __restrict gx, std::int64_t K, const T* __restrict w,
            T mu, T rst, T c1, T c3, bool stream) {
  constexpr std::int64_t L = kLanes<T>;
  const Vec<T> mv = splat(mu), rv = splat(rst), c1v = splat(c1), c3v = splat(c3);
  std::int64_t j = 0;
  for (; j + L <= K; j += L) {
    Vec<T> gd = load(g + j);
    if constexpr (HasW) gd = gd * load(w + j);
    const Vec<T> o = rv * gd - (c1v + (load(x + j) - mv) * c3v);
    if (stream)
      kernels::stream(gx + j, o);
    else
      kernels::store(gx + j, o);
  }
  for (; j < K; ++j) {
    const T gd = HasW ? g[j] * w[j] : g[j];
    gx[j] = rst * gd - (c1 + (x[j] - mu) * c3);
  }
}

constexpr std::int64_t kBackwardRowBlock = 4;

template <class T, bool HasW>
void backward_share(const T* g, const T* x, T* gx, std::int64_t R, std::int64_t r0, std::int64_t r1, std::int64_t K,
                    std::int64_t G, const T* w, const double* mean, const double* rstd, double* dw, double* db, T* aw,
                    T* ab, bool stream) {
  // At most 4 rows between a row's sums and its dx: their x and dy (8 KiB at K = 256 float32)
  // are still in L1 for the second pass. Measured at (65536, 256): 16 rows 19.4-23.4 ms, 4 rows
  // 16.7-20.1 ms (2 rows about the same as 4, 8 rows as 16). An even count keeps the pairs of
  // the paired path (and so the bits) as they were.
  const std::int64_t C = G * K, RB = std::min<std::int64_t>(row_block(K), kBackwardRowBlock);
  const double invK = 1.0 / static_cast<double>(K);
  const bool paired = thresholds::ln_rows_paired<T>(R, K, G);
  T c1[kMaxRowBlock], c3[kMaxRowBlock];
  for (std::int64_t b = r0; b < r1; b += kGradBlockRows) {
    std::fill(aw, aw + C, T(0));
    std::fill(ab, ab + C, T(0));
    const std::int64_t e = std::min(b + kGradBlockRows, r1);
    for (std::int64_t b0 = b; b0 < e; b0 += RB) {  // pass 1 over a block of rows, then their dx from L1
      const std::int64_t e0 = std::min(b0 + RB, e);
      std::int64_t r = b0;
      if (paired)  // pairs of rows share one visit of γ and the accumulators
        for (; r + 1 < e0; r += 2) {
          const double rs0 = rstd[r], rs1 = rstd[r + 1];
          double A0, Bx0, A1, Bx1;
          row_sums2<T, HasW>(g + r * K, x + r * K, g + (r + 1) * K, x + (r + 1) * K, K, w, aw, ab,
                             static_cast<T>(mean[r]), static_cast<T>(rs0), static_cast<T>(mean[r + 1]),
                             static_cast<T>(rs1), A0, Bx0, A1, Bx1);
          c1[r - b0] = static_cast<T>(rs0 * A0 * invK);
          c3[r - b0] = static_cast<T>(rs0 * rs0 * rs0 * Bx0 * invK);
          c1[r + 1 - b0] = static_cast<T>(rs1 * A1 * invK);
          c3[r + 1 - b0] = static_cast<T>(rs1 * rs1 * rs1 * Bx1 * invK);
        }
      for (; r < e0; ++r) {
        const std::int64_t c0 = (r % G) * K;
        if (r + RB < r1) {
          prefetch_row(g + (r + RB) * K, K);
          prefetch_row(x + (r + RB) * K, K);
        }
        const double rs = rstd[r];
        double A, Bx;
        row_sums<T, HasW>(g + r * K, x + r * K, K, HasW ? w + c0 : nullptr, aw + c0, ab + c0,
                          static_cast<T>(mean[r]), static_cast<T>(rs), A, Bx);
        c1[r - b0] = static_cast<T>(rs * A * invK);
        c3[r - b0] = static_cast<T>(rs * rs * rs * Bx * invK);
      }
      if (!gx) continue;
      for (std::int64_t r = b0; r < e0; ++r) {
        const std::int64_t c0 = (r % G) * K;
        row_dx<T, HasW>(g + r * K, x + r * K, gx + r * K, K, HasW ? w + c0 : nullptr, static_cast<T>(mean[r]),
                        static_cast<T>(rstd[r]), c1[r - b0], c3[r - b0], stream);
      }
    }
    for (std::int64_t c = 0; c < C; ++c) {
      dw[c] += static_cast<double>(aw[c]);
      db[c] += static_cast<double>(ab[c]);
    }
  }
}

struct PartTag {};
struct AccTag {};

}  // namespace

template <class T>
void ln_rows_forward(const T* x, T* y, std::int64_t R, std::int64_t K, std::int64_t G, const T* w, const T* b,
                     double eps, double* mean, double* rstd, double* var) {
  const std::int64_t rows = kernels::chunk_rows(K * static_cast<std::int64_t>(sizeof(T)), 1);
  const bool stream = kernels::streamable(y, K, R);
  kernels::for_row_chunks(R, rows, kernels::threads_for(R * K), [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
    if (w && b)
      forward_share<T, true, true>(x, y, r0, r1, K, G, w, b, eps, mean, rstd, var, stream);
    else if (w)
      forward_share<T, true, false>(x, y, r0, r1, K, G, w, b, eps, mean, rstd, var, stream);
    else if (b)
      forward_share<T, false, true>(x, y, r0, r1, K, G, w, b, eps, mean, rstd, var, stream);
    else
      forward_share<T, false, false>(x, y, r0, r1, K, G, w, b, eps, mean, rstd, var, stream);
    if (stream) kernels::fence();
  });
}

template <class T>
void ln_rows_backward(const T* dy, const T* x, T* gx, std::int64_t R, std::int64_t K, std::int64_t G, const T* w,
                      const double* mean, const double* rstd, double* dw, double* db) {
  const std::int64_t C = G * K;
  const std::size_t Cs = static_cast<std::size_t>(C);
  const bool stream = gx && kernels::streamable(gx, K, R);
  const std::int64_t rows = kernels::chunk_rows(2 * K * static_cast<std::int64_t>(sizeof(T)), kGradBlockRows);
  const std::size_t nc = static_cast<std::size_t>((R + rows - 1) / rows);
  // per chunk: its dγ and dβ (double, C each), added up below in chunk order
  double* part = kernels::scratch<PartTag, double>(2 * Cs * nc);
  std::fill(part, part + 2 * Cs * nc, 0.0);
  kernels::for_row_chunks(R, rows, kernels::threads_for(R * K), [&](std::int64_t k, std::int64_t r0, std::int64_t r1) {
    double* pw = part + 2 * Cs * static_cast<std::size_t>(k);
    T* acc = kernels::scratch<AccTag, T>(2 * Cs);
    if (w)
      backward_share<T, true>(dy, x, gx, R, r0, r1, K, G, w, mean, rstd, pw, pw + C, acc, acc + C, stream);
    else
      backward_share<T, false>(dy, x, gx, R, r0, r1, K, G, w, mean, rstd, pw, pw + C, acc, acc + C, stream);
    if (stream) kernels::fence();
  });
  kernels::sum_chunk_pairs(part, nc, C, dw, db);
}

TAPEGRAD_REGISTER_KERNELS(LnRowsKernels, ln_rows, .forward = &ln_rows_forward<T>, .backward = &ln_rows_backward<T>)

}  // namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS
