// 2-D convolution: im2col + GEMM forward and backward side by side.
#include <tapegrad/layers/functional/conv.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/kernels/pointwise.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/core/ops/matmul.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/layers/functional/kernels/conv_dnnl.h>
#include <tapegrad/layers/functional/kernels/im2col.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>

namespace tapegrad::layers::functional {

bool conv_onednn_available() {
#if defined(TAPEGRAD_HAVE_DNNL)
  return true;
#else
  return false;
#endif
}

ConvBackend parse_conv_backend(const std::string& name) {
  if (name.empty() || name == "auto") return ConvBackend::Auto;
  if (name == "im2col") return ConvBackend::Im2col;
  if (name == "onednn" && conv_onednn_available()) return ConvBackend::OneDNN;
  throw std::invalid_argument("conv backend: expected auto, im2col" +
                              std::string(conv_onednn_available() ? " or onednn" : " (built without oneDNN)") +
                              ", got '" + name + "'");
}

std::size_t conv_primitive_cache_capacity() { return kernels::dnnl_conv_cache_capacity(); }
void set_conv_primitive_cache_capacity(std::size_t configurations) {
  kernels::dnnl_conv_set_cache_capacity(configurations);
}
std::size_t conv_primitive_cache_size() { return kernels::dnnl_conv_cache_entries(); }

namespace {

ConvBackend backend_from_env() {
  const char* v = std::getenv("TAPEGRAD_CONV_BACKEND");
  return parse_conv_backend(v ? v : "");
}

std::atomic<int> g_backend{-1};  // -1: not read from the environment yet

}  // namespace

void set_conv_backend(ConvBackend backend) {
  if (backend == ConvBackend::OneDNN && !conv_onednn_available())
    throw std::invalid_argument("set_conv_backend: expected Auto or Im2col, got OneDNN (tapegrad was built without oneDNN)");
  g_backend = static_cast<int>(backend);
}

ConvBackend conv_backend() {
  int b = g_backend.load();
  if (b < 0) {
    b = static_cast<int>(backend_from_env());
    g_backend = b;
  }
  return static_cast<ConvBackend>(b);
}

namespace {

using kernels::ConvGeom;

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("conv2d: " + msg); }

std::string shape_of(const Tensor& t) { return shape_str(t.shape()); }

// A 2-D view (rows, cols) of t's storage starting `offset` elements in (no autograd).
Tensor view2d(const Tensor& t, std::int64_t offset, std::int64_t rows, std::int64_t cols) {
  return alias_with_shape(t, {rows, cols}, static_cast<std::size_t>(offset) * dtype_size(t.dtype()));
}

struct ConvPlan {
  std::int64_t N, Cin, Cout, G, Cg, Og;
  ConvGeom geom;
  bool direct;  // 1×1, stride 1, no padding: the image itself is the unfolded matrix
  std::int64_t K() const { return geom.rows(); }
  std::int64_t L() const { return geom.cols(); }
  std::int64_t in_plane() const { return Cg * geom.H * geom.W; }  // one group of one image
};

ConvPlan plan(const Tensor& x, const Tensor& w, const Tensor& b, Size2 s, Size2 p, Size2 d, std::int64_t groups) {
  if (!x.defined() || x.dim() != 4)
    fail("expected a 4-D input (N, C, H, W), got shape " + (x.defined() ? shape_of(x) : std::string("undefined")));
  if (!w.defined() || w.dim() != 4)
    fail("expected a 4-D weight (out_channels, in_channels/groups, kH, kW), got shape " +
         (w.defined() ? shape_of(w) : std::string("undefined")));
  tapegrad::kernels::check_floating(x, "conv2d");
  tapegrad::kernels::check_same_dtype(x, w, "conv2d");
  const std::int64_t O = w.size(0), Cg = w.size(1), kh = w.size(2), kw = w.size(3);
  if (kh < 1 || kw < 1) fail("expected a kernel of at least 1x1, got weight shape " + shape_of(w));
  const WindowGeometry win{{kh, kw}, s, p, d};
  check_window_args("conv2d", win, PaddingLimit::NonNegative);
  if (groups < 1) fail("expected groups >= 1, got " + std::to_string(groups));
  if (O % groups != 0)
    fail("expected out_channels divisible by groups=" + std::to_string(groups) + ", got " + std::to_string(O));
  if (x.size(1) != Cg * groups)
    fail("expected input with " + std::to_string(Cg * groups) + " channels (weight " + shape_of(w) +
         ", groups=" + std::to_string(groups) + "), got " + std::to_string(x.size(1)) + " channels in input " +
         shape_of(x));
  if (b.defined()) {
    tapegrad::kernels::check_same_dtype(x, b, "conv2d");
    if (b.dim() != 1 || b.size(0) != O)
      fail("expected bias of shape (" + std::to_string(O) + "), got " + shape_of(b));
  }
  const std::int64_t H = x.size(2), W = x.size(3);
  check_window_extent("conv2d", x.shape(), win);
  const std::int64_t ekh = d.h * (kh - 1) + 1, ekw = d.w * (kw - 1) + 1;
  if (ekh > H + 2 * p.h || ekw > W + 2 * p.w)
    fail("kernel size (dilated) (" + std::to_string(ekh) + ", " + std::to_string(ekw) +
         ") can't be greater than the padded input size (" + std::to_string(H + 2 * p.h) + ", " +
         std::to_string(W + 2 * p.w) + ")");
  ConvPlan pl;
  pl.N = x.size(0);
  pl.Cin = x.size(1);
  pl.Cout = O;
  pl.G = groups;
  pl.Cg = Cg;
  pl.Og = O / groups;
  pl.geom = {Cg, H, W, kh, kw, s.h, s.w, p.h, p.w, d.h, d.w, conv_output_size(H, kh, s.h, p.h, d.h),
             conv_output_size(W, kw, s.w, p.w, d.w)};
  const Shape out{pl.N, O, pl.geom.OH, pl.geom.OW};
  // K·L, the unfolded input, as three factors: L = OH·OW itself may overflow
  if (numel_overflows(out) || numel_overflows({pl.K(), pl.geom.OH, pl.geom.OW}))
    fail("the output " + shape_str(out) + " or its unfolded input (" + std::to_string(pl.K()) + " rows of " +
         std::to_string(pl.geom.OH) + "·" + std::to_string(pl.geom.OW) +
         " output positions) has more elements than a 64-bit count holds (size overflow)");
  pl.direct = kh == 1 && kw == 1 && s.h == 1 && s.w == 1 && p.h == 0 && p.w == 0;
  return pl;
}

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
  const std::int64_t chunk = (N + threads - 1) / threads;
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
        if (bp) tapegrad::kernels::add_row_values<T>(out.data<T>(), bp + gi * pl.Og, pl.Og, L);  // per ISA level
      }
  });
  return y;
}

template <class T>
void backward_impl(const Tensor& gy_in, const Tensor& x, const Tensor& w, bool has_bias, const ConvPlan& pl,
                   GradSink& gs) {
  const ConvGeom& g = pl.geom;
  const std::int64_t K = pl.K(), L = pl.L();
  const bool need_x = gs.needs(0), need_w = gs.needs(1), need_b = has_bias && gs.needs(2);
  const Tensor gy = gy_in.detach();
  const Tensor xd = x.detach(), wd = w.detach();
  Tensor dx = need_x ? Tensor::zeros(x.shape(), x.dtype()) : Tensor();
  // (Cout, K) partial sums, one per share of the samples, reduced in share order
  // (deterministic); the thread count is read once, so the shares and the slots agree
  const int threads = get_num_threads();
  std::vector<Tensor> dw_parts(static_cast<std::size_t>(std::max(1, threads)));
  if (need_x || need_w)
    over_samples(pl.N, threads, [&](std::int64_t n0, std::int64_t n1, int share) {
      Tensor cols = pl.direct ? Tensor() : Tensor::empty({K, L}, x.dtype());
      Tensor dw_part = need_w ? Tensor::zeros({pl.Cout, K}, x.dtype()) : Tensor();
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
  if (need_x) gs.add(0, dx);
  if (need_w) gs.add(1, alias_with_shape(dw, w.shape()));
  if (need_b) {
    Tensor db = Tensor::empty({pl.Cout}, x.dtype());
    T* d = db.data<T>();
    const T* p = gy.data<T>();
    // per row, 8 fixed lanes (j mod 8) added in order: independent accumulators instead of
    // one serial chain, the same order on every run
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
    gs.add(2, db);
  }
}


kernels::DnnlConvShape dnnl_shape(const ConvPlan& pl, bool bias) {
  const ConvGeom& g = pl.geom;
  return {pl.N, pl.Cin, g.H, g.W, pl.Cout, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, pl.G, g.OH, g.OW, bias};
}

// oneDNN for a float32 convolution when the backend (and, for Auto, the measured rule) says so.
bool use_dnnl(const Tensor& x, const ConvPlan& pl, const kernels::DnnlConvShape& sh) {
  if (x.dtype() != Dtype::Float32 || pl.N == 0 || !kernels::dnnl_conv_supports(sh)) return false;
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

void dnnl_backward(const Tensor& gy_in, const Tensor& x, const Tensor& w, const kernels::DnnlConvShape& sh, GradSink& gs) {
  const Tensor gy = gy_in.detach();
  const bool need_x = gs.needs(0), need_w = gs.needs(1), need_b = sh.bias && gs.needs(2);
  Tensor dx = need_x ? Tensor::empty(x.shape(), Dtype::Float32) : Tensor();
  Tensor dw = need_w || need_b ? Tensor::empty(w.shape(), Dtype::Float32) : Tensor();
  Tensor db = (need_w || need_b) && sh.bias ? Tensor::empty({sh.O}, Dtype::Float32) : Tensor();
  kernels::dnnl_conv_backward(sh, x.data<float>(), gy.data<float>(), w.data<float>(), need_x ? dx.data<float>() : nullptr,
                      dw.defined() ? dw.data<float>() : nullptr, db.defined() ? db.data<float>() : nullptr);
  if (need_x) gs.add(0, dx);
  if (need_w) gs.add(1, dw);
  if (need_b) gs.add(2, db);
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
  Tensor y = Tensor::zeros({pl.N, pl.Cout, pl.geom.OH, pl.geom.OW}, dtype);
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

Tensor empty_conv(const Tensor& x, const Tensor& w, const Tensor& b, const ConvPlan& pl) {
  Tensor y = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "conv2d", [&] { return empty_forward<scalar_t>(b, pl, x.dtype()); });
  if (autograd::needs_grad({&x, &w, &b}))
    autograd::record("conv2d", y, {x, w, b}, [pl](const Tensor& gy, GradSink& gs) {
      for (std::size_t i = 0; i < 2; ++i)
        if (gs.needs(i)) gs.add(i, Tensor::zeros(gs.input_shape(i), gy.dtype()));
      if (gs.needs(2))
        gs.add(2, TAPEGRAD_DISPATCH_FLOAT(gy.dtype(), "conv2d_backward", [&] { return empty_bias_grad<scalar_t>(gy, pl); }));
    });
  return y;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding, Size2 dilation,
              std::int64_t groups) {
  const ConvPlan pl = plan(x, weight, bias, stride, padding, dilation, groups);
  if (has_zero_size(pl)) return empty_conv(x, weight, bias, pl);
  const kernels::DnnlConvShape sh = dnnl_shape(pl, bias.defined());
  if (use_dnnl(x, pl, sh)) {
    Tensor y = Tensor::empty({pl.N, pl.Cout, pl.geom.OH, pl.geom.OW}, Dtype::Float32);
    kernels::dnnl_conv_forward(sh, x.data<float>(), weight.data<float>(), bias.defined() ? bias.data<float>() : nullptr,
                       y.data<float>());
    if (autograd::needs_grad({&x, &weight, &bias}))
      autograd::record("conv2d", y, {x, weight, bias}, [x = x.detach(), weight = weight.detach(), sh](const Tensor& gy, GradSink& gs) {
        dnnl_backward(gy, x, weight, sh, gs);
      });
    return y;
  }
  Tensor y = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "conv2d", [&] { return forward_impl<scalar_t>(x, weight, bias, pl); });
  if (autograd::needs_grad({&x, &weight, &bias})) {
    const bool has_bias = bias.defined();
    autograd::record("conv2d", y, {x, weight, bias}, [x = x.detach(), weight = weight.detach(), has_bias, pl](const Tensor& gy, GradSink& gs) {
      TAPEGRAD_DISPATCH_FLOAT(gy.dtype(), "conv2d_backward",
                              [&] { backward_impl<scalar_t>(gy, x, weight, has_bias, pl, gs); });
    });
  }
  return y;
}

}  // namespace tapegrad::layers::functional
