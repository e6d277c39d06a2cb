// conv2d's checks and value kernels: im2col + GEMM forward and backward side by side, the
// oneDNN calls, and the zero-size rule. No autograd: conv.cpp and conv_grad_ops.cpp record.
#include <tapegrad/layers/functional/kernels/conv_plan.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/kernels/pointwise.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/core/ops/matmul.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/layers/functional/conv.h>
#include <tapegrad/layers/functional/kernels/conv_dnnl.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>
#include <tapegrad/core/shape.h>

namespace tapegrad::layers::functional::detail {

namespace {

using kernels::ConvGeom;

// A 2-D view (rows, cols) of t's storage starting `offset` elements in (no autograd).
Tensor view2d(const Tensor& t, std::int64_t offset, std::int64_t rows, std::int64_t cols) {
  return alias_with_shape(t, {rows, cols}, static_cast<std::size_t>(offset) * dtype_size(t.dtype()));
}

}  // namespace

ConvPlan conv_plan(const char* who, const Shape& xs, const Shape& ws, Size2 s, Size2 p, Size2 d, std::int64_t groups) {
  const std::string o = who;
  auto fail = [&o](const std::string& msg) { throw std::invalid_argument(o + ": " + msg); };
  if (xs.size() != 4) fail("expected a 4-D input (N, C, H, W), got shape " + shape_str(xs));
  if (ws.size() != 4)
    fail("expected a 4-D weight (out_channels, in_channels/groups, kH, kW), got shape " + shape_str(ws));
  const std::int64_t O = ws[0], Cg = ws[1], kh = ws[2], kw = ws[3];
  if (kh < 1 || kw < 1) fail("expected a kernel of at least 1x1, got weight shape " + shape_str(ws));
  const WindowGeometry win{{kh, kw}, s, p, d};
  check_window_args(o, win, PaddingLimit::NonNegative);
  if (groups < 1) fail("expected groups >= 1, got " + std::to_string(groups));
  if (O % groups != 0)
    fail("expected out_channels divisible by groups=" + std::to_string(groups) + ", got " + std::to_string(O));
  if (xs[1] != Cg * groups)
    fail("expected input with " + std::to_string(Cg * groups) + " channels (weight " + shape_str(ws) +
         ", groups=" + std::to_string(groups) + "), got " + std::to_string(xs[1]) + " channels in input " +
         shape_str(xs));
  const std::int64_t H = xs[2], W = xs[3];
  check_window_extent(o, xs, win);
  const std::int64_t ekh = d.h * (kh - 1) + 1, ekw = d.w * (kw - 1) + 1;
  if (ekh > H + 2 * p.h || ekw > W + 2 * p.w)
    fail("kernel size (dilated) (" + std::to_string(ekh) + ", " + std::to_string(ekw) +
         ") can't be greater than the padded input size (" + std::to_string(H + 2 * p.h) + ", " +
         std::to_string(W + 2 * p.w) + ")");
  ConvPlan pl;
  pl.N = xs[0];
  pl.Cin = xs[1];
  pl.Cout = O;
  pl.G = groups;
  pl.Cg = Cg;
  pl.Og = O / groups;
  pl.geom = {Cg, H, W, kh, kw, s.h, s.w, p.h, p.w, d.h, d.w, conv_output_size(H, kh, s.h, p.h, d.h),
             conv_output_size(W, kw, s.w, p.w, d.w)};
  const Shape out = pl.output_shape();
  // K·L, the unfolded input, as three factors: L = OH·OW itself may overflow
  if (numel_overflows(out) || numel_overflows({pl.K(), pl.geom.OH, pl.geom.OW}))
    fail("the output " + shape_str(out) + " or its unfolded input (" + std::to_string(pl.K()) + " rows of " +
         std::to_string(pl.geom.OH) + "·" + std::to_string(pl.geom.OW) +
         " output positions) has more elements than a 64-bit count holds (size overflow)");
  pl.direct = kh == 1 && kw == 1 && s.h == 1 && s.w == 1 && p.h == 0 && p.w == 0;
  return pl;
}

ConvPlan conv_plan(const char* who, const Tensor& x, const Tensor& w, const Tensor& b, Size2 s, Size2 p, Size2 d,
                   std::int64_t groups) {
  const std::string o = who;
  if (!x.defined() || x.dim() != 4)
    throw std::invalid_argument(o + ": expected a 4-D input (N, C, H, W), got shape " +
                                (x.defined() ? shape_str(x.shape()) : std::string("undefined")));
  if (!w.defined() || w.dim() != 4)
    throw std::invalid_argument(o + ": expected a 4-D weight (out_channels, in_channels/groups, kH, kW), got shape " +
                                (w.defined() ? shape_str(w.shape()) : std::string("undefined")));
  tapegrad::kernels::check_floating(x, who);
  tapegrad::kernels::check_same_dtype(x, w, who);
  if (b.defined()) {
    tapegrad::kernels::check_same_dtype(x, b, who);
    if (b.dim() != 1 || b.size(0) != w.size(0))
      throw std::invalid_argument(o + ": expected bias of shape (" + std::to_string(w.size(0)) + "), got " +
                                  shape_str(b.shape()));
  }
  return conv_plan(who, x.shape(), w.shape(), s, p, d, groups);
}

namespace {

// Runs f(begin, end, share) over the samples, split into `shares` contiguous runs of
// ceil(N / shares) (the last shorter, some maybe empty): in parallel when there are at least
// as many samples as threads (GEMMs then run on one thread each), else as one share on the
// calling thread (GEMMs may use the threads). `threads` is the caller's one reading of
// get_num_threads(); it returns the number of shares used (per-share buffers: that many).
template <class F>
int over_samples(std::int64_t N, int threads, F&& f) {
  if (threads <= 1 || N < threads) {
    f(std::int64_t{0}, N, 0);
    return 1;
  }
  const std::int64_t chunk = ceil_div(N, threads);
  parallel_shares(threads, [&](int t) {
    const std::int64_t b = t * chunk, e = std::min(N, b + chunk);
    if (b < e) f(b, e, t);
  });
  return threads;
}

template <class T>
Tensor forward_impl(const Tensor& x, const Tensor& w, const Tensor& b, const ConvPlan& pl) {
  const ConvGeom& g = pl.geom;
  const std::int64_t K = pl.K(), L = pl.L();
  Tensor y = Tensor::empty({pl.N, pl.Cout, g.OH, g.OW}, x.dtype());
  const Tensor xd = x.detach(), wd = w.detach();
  const T* bp = b.defined() ? b.data<T>() : nullptr;
  over_samples(pl.N, get_num_threads(), [&](std::int64_t n0, std::int64_t n1, int) {
    Tensor cols = pl.direct ? Tensor() : Tensor::empty({K, L}, x.dtype());
    for (std::int64_t n = n0; n < n1; ++n)
      for (std::int64_t gi = 0; gi < pl.G; ++gi) {
        const std::int64_t xoff = (n * pl.G + gi) * pl.in_plane();
        Tensor a = pl.direct ? view2d(xd, xoff, K, L) : cols;
        if (!pl.direct) kernels::im2col<T>(xd.data<T>() + xoff, cols.data<T>(), g, L);
        Tensor out = view2d(y, (n * pl.Cout + gi * pl.Og) * L, pl.Og, L);
        tapegrad::detail::gemm(false, false, view2d(wd, gi * pl.Og * K, pl.Og, K), a, out, false);
        if (bp) tapegrad::kernels::pointwise<T>().add_row_values(out.data<T>(), bp + gi * pl.Og, pl.Og, L);  // per ISA level
      }
  });
  return y;
}

// db[o] = Σ_{n, l} dY[n, o, l]: per row, 8 fixed lanes (l mod 8) added in order, independent
// accumulators instead of one serial chain, the same order on every run.
template <class T>
Tensor bias_grad(const Tensor& gy, const ConvPlan& pl) {
  const std::int64_t L = pl.L();
  Tensor db = Tensor::empty({pl.Cout}, gy.dtype());
  T* d = db.data<T>();
  const T* p = gy.data<T>();
  constexpr std::int64_t kLanes = 8;
  for (std::int64_t o = 0; o < pl.Cout; ++o) {
    double acc = 0;
    for (std::int64_t n = 0; n < pl.N; ++n) {
      const T* __restrict row = p + (n * pl.Cout + o) * L;
      T lane[kLanes] = {};
      std::int64_t j = 0;
      for (; j + kLanes <= L; j += kLanes)
        for (std::int64_t l = 0; l < kLanes; ++l) lane[l] += row[j + l];
      for (std::int64_t l = 0; j < L; ++j, ++l) lane[l] += row[j];
      T s = 0;
      for (std::int64_t l = 0; l < kLanes; ++l) s += lane[l];
      acc += s;
    }
    d[o] = static_cast<T>(acc);
  }
  return db;
}

template <class T>
ConvGrads backward_impl(const Tensor& gy_in, const Tensor& x, const Tensor& w, const ConvPlan& pl, bool need_x,
                        bool need_w, bool need_b) {
  const ConvGeom& g = pl.geom;
  const std::int64_t K = pl.K(), L = pl.L();
  const Tensor gy = gy_in.detach();
  const Tensor xd = need_w ? x.detach() : Tensor(), wd = need_x ? w.detach() : Tensor();
  ConvGrads r;
  Tensor dx = need_x ? Tensor::zeros(pl.input_shape(), gy.dtype()) : Tensor();
  // (Cout, K) partial sums, one per share of the samples, reduced in share order
  // (deterministic); the thread count is read once, so the shares and the slots agree
  const int threads = get_num_threads();
  std::vector<Tensor> dw_parts(static_cast<std::size_t>(std::max(1, threads)));
  if (need_x || need_w)
    over_samples(pl.N, threads, [&](std::int64_t n0, std::int64_t n1, int share) {
      Tensor cols = pl.direct ? Tensor() : Tensor::empty({K, L}, gy.dtype());
      Tensor dw_part = need_w ? Tensor::zeros({pl.Cout, K}, gy.dtype()) : Tensor();
      for (std::int64_t n = n0; n < n1; ++n)
        for (std::int64_t gi = 0; gi < pl.G; ++gi) {
          const std::int64_t xoff = (n * pl.G + gi) * pl.in_plane();
          const Tensor gy_ng = view2d(gy, (n * pl.Cout + gi * pl.Og) * L, pl.Og, L);
          if (need_w) {
            Tensor a = pl.direct ? view2d(xd, xoff, K, L) : cols;
            if (!pl.direct) kernels::im2col<T>(xd.data<T>() + xoff, cols.data<T>(), g, L);
            Tensor dwg = view2d(dw_part, gi * pl.Og * K, pl.Og, K);
            tapegrad::detail::gemm(false, true, gy_ng, a, dwg, true);  // dW_g += dY·colsᵀ
          }
          if (need_x) {
            const Tensor wg = view2d(wd, gi * pl.Og * K, pl.Og, K);
            if (pl.direct) {
              Tensor dxg = view2d(dx, xoff, K, L);
              tapegrad::detail::gemm(true, false, wg, gy_ng, dxg, false);
            } else {
              tapegrad::detail::gemm(true, false, wg, gy_ng, cols, false);  // dcols = W_gᵀ·dY
              kernels::col2im_add<T>(cols.data<T>(), dx.data<T>() + xoff, g, L);
            }
          }
        }
      if (need_w) dw_parts[static_cast<std::size_t>(share)] = dw_part;
    });
  Tensor dw;
  for (const Tensor& part : dw_parts) {
    if (!part.defined()) continue;
    if (!dw.defined()) dw = part;
    else dw.add_(part);
  }
  if (need_x) r.dx = dx;
  if (need_w) r.dw = alias_with_shape(dw, pl.weight_shape());
  if (need_b) r.db = bias_grad<T>(gy, pl);
  return r;
}

kernels::DnnlConvShape dnnl_shape(const ConvPlan& pl, bool bias) {
  const ConvGeom& g = pl.geom;
  return {pl.N, pl.Cin, g.H, g.W, pl.Cout, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, pl.G, g.OH, g.OW, bias};
}

ConvGrads dnnl_backward(const Tensor& gy_in, const Tensor& x, const Tensor& w, const kernels::DnnlConvShape& sh,
                        bool need_x, bool need_w, bool need_b) {
  const Tensor gy = gy_in.detach();
  need_b = need_b && sh.bias;
  Tensor dx = need_x ? Tensor::empty({sh.N, sh.C, sh.H, sh.W}, Dtype::Float32) : Tensor();
  Tensor dw = need_w || need_b ? Tensor::empty({sh.O, sh.C / sh.G, sh.kh, sh.kw}, Dtype::Float32) : Tensor();
  Tensor db = (need_w || need_b) && sh.bias ? Tensor::empty({sh.O}, Dtype::Float32) : Tensor();
  kernels::dnnl_conv_backward(sh, dw.defined() ? x.data<float>() : nullptr, gy.data<float>(),
                              need_x ? w.data<float>() : nullptr, need_x ? dx.data<float>() : nullptr,
                              dw.defined() ? dw.data<float>() : nullptr, db.defined() ? db.data<float>() : nullptr);
  ConvGrads r;
  if (need_x) r.dx = dx;
  if (need_w) r.dw = dw;
  if (need_b) r.db = db;
  return r;
}

// A convolution with no terms or no outputs: a zero N, C_in, C_out, H or W. Every output
// position is bias[o] (0 without a bias: a sum over no taps, or only padding), dx = 0,
// dweight = 0, dbias = Σ dY over (N, H_out, W_out). No backend runs: oneDNN refuses such shapes.
bool has_zero_size(const ConvPlan& pl) {
  return pl.N == 0 || pl.Cin == 0 || pl.Cout == 0 || pl.geom.H == 0 || pl.geom.W == 0;
}

template <class T>
Tensor empty_forward(const Tensor& b, const ConvPlan& pl, Dtype dtype) {
  const std::int64_t L = pl.L();
  Tensor y = Tensor::zeros(pl.output_shape(), dtype);
  if (b.defined() && y.numel() > 0) {
    const T* bp = b.data<T>();
    T* yp = y.data<T>();
    for (std::int64_t n = 0; n < pl.N; ++n)
      for (std::int64_t o = 0; o < pl.Cout; ++o) std::fill_n(yp + (n * pl.Cout + o) * L, L, bp[o]);
  }
  return y;
}

template <class T>
Tensor empty_bias_grad(const Tensor& gy_in, const ConvPlan& pl) {
  const Tensor gy = gy_in.detach();
  const std::int64_t L = pl.L();
  Tensor db = Tensor::empty({pl.Cout}, gy.dtype());
  T* d = db.data<T>();
  const T* p = gy.numel() > 0 ? gy.data<T>() : nullptr;
  for (std::int64_t o = 0; o < pl.Cout; ++o) {
    double acc = 0;
    for (std::int64_t n = 0; n < pl.N; ++n)
      for (std::int64_t j = 0; j < L; ++j) acc += p[(n * pl.Cout + o) * L + j];
    d[o] = static_cast<T>(acc);
  }
  return db;
}

}  // namespace

// oneDNN for a float32 convolution when the backend (and, for Auto, the measured rule) says so.
bool conv_uses_dnnl(Dtype dtype, const ConvPlan& pl, bool bias) {
  if (dtype != Dtype::Float32 || has_zero_size(pl) || !kernels::dnnl_conv_supports(dnnl_shape(pl, bias))) return false;
  switch (conv_backend()) {
    case ConvBackend::Im2col: return false;
    case ConvBackend::OneDNN: return true;
    case ConvBackend::Auto: break;
  }
  // Measured at the reference CNN's shapes (batch 128 and 16, 1 and 2 threads): oneDNN runs
  // Conv(32→64) on 14×14 1.6-2.4× faster than im2col, im2col runs Conv(1→32) on 28×28 1.8×
  // faster (oneDNN's reorders and its kernel for one input channel). Grouped convolutions
  // were not measured and stay on im2col.
  return pl.G == 1 && pl.Cin >= kernels::thresholds::kConvDnnlMinInChannels;
}

Tensor conv_forward_values(const Tensor& x, const Tensor& w, const Tensor& b, const ConvPlan& pl, bool dnnl) {
  if (has_zero_size(pl))
    return TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "conv2d", [&] { return empty_forward<scalar_t>(b, pl, x.dtype()); });
  if (dnnl) {
    Tensor y = Tensor::empty(pl.output_shape(), Dtype::Float32);
    kernels::dnnl_conv_forward(dnnl_shape(pl, b.defined()), x.data<float>(), w.data<float>(),
                               b.defined() ? b.data<float>() : nullptr, y.data<float>());
    return y;
  }
  return TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "conv2d", [&] { return forward_impl<scalar_t>(x, w, b, pl); });
}

ConvGrads conv_backward_values(const Tensor& gy, const Tensor& x, const Tensor& w, const ConvPlan& pl, bool dnnl,
                               bool bias, bool need_x, bool need_w, bool need_b) {
  need_b = need_b && bias;
  if (has_zero_size(pl)) {
    ConvGrads r;
    if (need_x) r.dx = Tensor::zeros(pl.input_shape(), gy.dtype());
    if (need_w) r.dw = Tensor::zeros(pl.weight_shape(), gy.dtype());
    if (need_b)
      r.db = TAPEGRAD_DISPATCH_FLOAT(gy.dtype(), "conv2d_backward", [&] { return empty_bias_grad<scalar_t>(gy, pl); });
    return r;
  }
  if (dnnl) return dnnl_backward(gy, x, w, dnnl_shape(pl, bias), need_x, need_w, need_b);
  return TAPEGRAD_DISPATCH_FLOAT(gy.dtype(), "conv2d_backward",
                                 [&] { return backward_impl<scalar_t>(gy, x, w, pl, need_x, need_w, need_b); });
}

}  // namespace tapegrad::layers::functional::detail
