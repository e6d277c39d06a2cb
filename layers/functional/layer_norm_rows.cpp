// The per-row LayerNorm kernels; see layer_norm_rows.h for the formulas and the passes.
#include "layers/functional/layer_norm_rows.h"

#include <algorithm>
#include <cmath>

#include "layers/functional/norm_vec.h"

namespace tapegrad::layers::functional::detail {
namespace {

using nv::kLanes;
using nv::load;
using nv::splat;
using nv::Vec;

// Rows whose dγ, dβ are summed in T before they are added to the double totals.
constexpr std::int64_t kGradBlockRows = 64;

// Σ of the lanes in double, as a pairwise tree of vector halves: a fixed order, a few
// additions deep, and all in registers (spilling the vector to memory and reading the lanes
// back would wait for the row's streaming stores to leave the store queue).
typedef double D8 __attribute__((vector_size(64)));
typedef double D4 __attribute__((vector_size(32)));
typedef double D2 __attribute__((vector_size(16)));
typedef float F8 __attribute__((vector_size(32)));
inline double hsum(D8 v) {
  const D4 a = __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
  const D2 b = __builtin_shufflevector(a, a, 0, 1) + __builtin_shufflevector(a, a, 2, 3);
  return b[0] + b[1];
}
inline double hsum(Vec<float> v) {
  const F8 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
  const F8 hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  return hsum(__builtin_convertvector(lo, D8) + __builtin_convertvector(hi, D8));
}

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

// y = (x - μ)·(rstd·γ) + β over one row; streaming stores when `stream` (then K is whole
// vectors and y is 64-byte aligned).
template <class T, bool HasW, bool HasB>
void write_row(const T* __restrict x, T* __restrict y, std::int64_t K, const T* __restrict w, const T* __restrict b,
               T mu, T rs, bool stream) {
  constexpr std::int64_t L = kLanes<T>;
  const Vec<T> mv = splat(mu), rv = splat(rs);
  std::int64_t j = 0;
  for (; j + L <= K; j += L) {
    Vec<T> a = rv;
    if constexpr (HasW) a = a * load(w + j);
    Vec<T> o = (load(x + j) - mv) * a;
    if constexpr (HasB) o = o + load(b + j);
    if (stream)
      nv::stream(y + j, o);
    else
      nv::store(y + j, o);
  }
  for (; j < K; ++j) {
    T a = rs;
    if constexpr (HasW) a = a * w[j];
    T o = (x[j] - mu) * a;
    if constexpr (HasB) o = o + b[j];
    y[j] = o;
  }
}

template <class T, bool HasW, bool HasB>
void forward_share(const T* x, T* y, std::int64_t r0, std::int64_t r1, std::int64_t K, std::int64_t G, const T* w,
                   const T* b, double eps, double* mean, double* rstd, double* var, bool stream) {
  const double inv = 1.0 / static_cast<double>(K);
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * K;
    const T k0 = xr[0];
    const T m = static_cast<T>(static_cast<double>(k0) + sum_shifted(xr, K, k0) * inv);
    double rd, qd;
    deviation_sums(xr, K, m, rd, qd);
    const double v2 = std::max(0.0, qd - rd * rd * inv) * inv;
    const double rs = 1.0 / std::sqrt(v2 + eps);
    const T mu = static_cast<T>(static_cast<double>(m) + rd * inv);
    mean[r] = static_cast<double>(mu);
    rstd[r] = rs;
    if (var) var[r] = v2;
    const std::int64_t c0 = (r % G) * K;
    write_row<T, HasW, HasB>(xr, y + r * K, K, HasW ? w + c0 : nullptr, HasB ? b + c0 : nullptr, mu,
                             static_cast<T>(rs), stream);
  }
}

// One row's backward: returns nothing, adds dy·x̂ and dy into the T accumulators aw, ab
// (the row's channels), and writes dx when gx is not null.
template <class T, bool HasW>
void backward_row(const T* __restrict g, const T* __restrict x, T* __restrict gx, std::int64_t K,
                  const T* __restrict w, T* __restrict aw, T* __restrict ab, T mu, double rs, bool stream) {
  constexpr std::int64_t L = kLanes<T>;
  const T rst = static_cast<T>(rs);
  const Vec<T> mv = splat(mu), rv = splat(rst);
  // pass 1: A = Σ γ·dy (term 2's sum), Bx = Σ γ·dy·(x - μ) (term 3's), and dγ, dβ
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
    nv::store(aw + j, load(aw + j) + g0 * (d0 * rv));
    nv::store(aw + j + L, load(aw + j + L) + g1 * (d1 * rv));
    nv::store(ab + j, load(ab + j) + g0);
    nv::store(ab + j + L, load(ab + j + L) + g1);
  }
  for (; j + L <= K; j += L) {
    const Vec<T> g0 = load(g + j), d0 = load(x + j) - mv;
    Vec<T> gd0 = g0;
    if constexpr (HasW) gd0 = gd0 * load(w + j);
    A0 += gd0;
    B0 += gd0 * d0;
    nv::store(aw + j, load(aw + j) + g0 * (d0 * rv));
    nv::store(ab + j, load(ab + j) + g0);
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
  if (!gx) return;
  const double A = hsum(A0 + A1) + static_cast<double>(At);
  const double Bx = hsum(B0 + B1) + static_cast<double>(Bt);
  // pass 2: dx = rstd·γ·dy (term 1, the direct path) - rstd·A/K (term 2, through μ)
  //             - (x - μ)·rstd³·Bx/K (term 3, through σ²)
  const T c1 = static_cast<T>(rs * A / static_cast<double>(K));
  const T c3 = static_cast<T>(rs * rs * rs * Bx / static_cast<double>(K));
  const Vec<T> c1v = splat(c1), c3v = splat(c3);
  j = 0;
  for (; j + L <= K; j += L) {
    Vec<T> gd = load(g + j);
    if constexpr (HasW) gd = gd * load(w + j);
    const Vec<T> o = rv * gd - (c1v + (load(x + j) - mv) * c3v);
    if (stream)
      nv::stream(gx + j, o);
    else
      nv::store(gx + j, o);
  }
  for (; j < K; ++j) {
    const T gd = HasW ? g[j] * w[j] : g[j];
    gx[j] = rst * gd - (c1 + (x[j] - mu) * c3);
  }
}

template <class T, bool HasW>
void backward_share(const T* g, const T* x, T* gx, std::int64_t r0, std::int64_t r1, std::int64_t K, std::int64_t G,
                    const T* w, const double* mean, const double* rstd, double* dw, double* db, T* aw, T* ab,
                    bool stream) {
  const std::int64_t C = G * K;
  for (std::int64_t b = r0; b < r1; b += kGradBlockRows) {
    std::fill(aw, aw + C, T(0));
    std::fill(ab, ab + C, T(0));
    const std::int64_t e = std::min(b + kGradBlockRows, r1);
    for (std::int64_t r = b; r < e; ++r) {
      const std::int64_t c0 = (r % G) * K;
      backward_row<T, HasW>(g + r * K, x + r * K, gx ? gx + r * K : nullptr, K, HasW ? w + c0 : nullptr, aw + c0,
                            ab + c0, static_cast<T>(mean[r]), rstd[r], stream);
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
  const bool stream = nv::streamable(y, K, R);
  nv::run_threads(std::min<std::int64_t>(nv::threads_for(R * K), R), [&](int t, int nt) {
    const std::int64_t r0 = R * t / nt, r1 = R * (t + 1) / nt;
    if (w && b)
      forward_share<T, true, true>(x, y, r0, r1, K, G, w, b, eps, mean, rstd, var, stream);
    else if (w)
      forward_share<T, true, false>(x, y, r0, r1, K, G, w, b, eps, mean, rstd, var, stream);
    else if (b)
      forward_share<T, false, true>(x, y, r0, r1, K, G, w, b, eps, mean, rstd, var, stream);
    else
      forward_share<T, false, false>(x, y, r0, r1, K, G, w, b, eps, mean, rstd, var, stream);
    if (stream) nv::fence();
  });
}

template <class T>
void ln_rows_backward(const T* dy, const T* x, T* gx, std::int64_t R, std::int64_t K, std::int64_t G, const T* w,
                      const double* mean, const double* rstd, double* dw, double* db) {
  const std::int64_t C = G * K;
  const std::size_t Cs = static_cast<std::size_t>(C);
  const bool stream = gx && nv::streamable(gx, K, R);
  const int nt = static_cast<int>(std::min<std::int64_t>(nv::threads_for(R * K), R));
  // per thread: its dγ and dβ totals (double), merged in thread order below
  double* part = nv::scratch<PartTag, double>(2 * Cs * static_cast<std::size_t>(nt));
  std::fill(part, part + 2 * Cs * static_cast<std::size_t>(nt), 0.0);
  nv::run_threads(nt, [&](int t, int n_t) {
    const std::int64_t r0 = R * t / n_t, r1 = R * (t + 1) / n_t;
    double* pw = part + 2 * Cs * static_cast<std::size_t>(t);
    T* acc = nv::scratch<AccTag, T>(2 * Cs);
    if (w)
      backward_share<T, true>(dy, x, gx, r0, r1, K, G, w, mean, rstd, pw, pw + C, acc, acc + C, stream);
    else
      backward_share<T, false>(dy, x, gx, r0, r1, K, G, w, mean, rstd, pw, pw + C, acc, acc + C, stream);
    if (stream) nv::fence();
  });
  std::fill(dw, dw + C, 0.0);
  std::fill(db, db + C, 0.0);
  for (int t = 0; t < nt; ++t)
    for (std::int64_t c = 0; c < C; ++c) {
      dw[c] += part[2 * Cs * static_cast<std::size_t>(t) + static_cast<std::size_t>(c)];
      db[c] += part[2 * Cs * static_cast<std::size_t>(t) + Cs + static_cast<std::size_t>(c)];
    }
}

template void ln_rows_forward<float>(const float*, float*, std::int64_t, std::int64_t, std::int64_t, const float*,
                                     const float*, double, double*, double*, double*);
template void ln_rows_forward<double>(const double*, double*, std::int64_t, std::int64_t, std::int64_t,
                                      const double*, const double*, double, double*, double*, double*);
template void ln_rows_backward<float>(const float*, const float*, float*, std::int64_t, std::int64_t, std::int64_t,
                                      const float*, const double*, const double*, double*, double*);
template void ln_rows_backward<double>(const double*, const double*, double*, std::int64_t, std::int64_t,
                                       std::int64_t, const double*, const double*, const double*, double*, double*);

}  // namespace tapegrad::layers::functional::detail
