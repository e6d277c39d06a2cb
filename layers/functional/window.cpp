// Sliding-window geometry shared by conv2d and the pools (see window.h).
#include <tapegrad/layers/functional/window.h>

#include <limits>
#include <stdexcept>

namespace tapegrad::layers::functional {

std::string Size2::str() const {
  // appended, not "(" + ...: g++ 12's -Wrestrict misreads the inlined insert at the front
  std::string r = "(";
  r += std::to_string(h);
  r += ", ";
  r += std::to_string(w);
  r += ')';
  return r;
}

std::int64_t conv_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                              std::int64_t dilation) {
  // 128-bit: huge paddings or dilations must not wrap around into a plausible size
  const __int128 out = stride < 1 ? 0
                                  : (static_cast<__int128>(in) + 2 * static_cast<__int128>(pad) -
                                     static_cast<__int128>(dilation) * (kernel - 1) - 1) / stride + 1;
  if (stride < 1 || out > std::numeric_limits<std::int64_t>::max() || out < std::numeric_limits<std::int64_t>::min())
    throw std::invalid_argument("conv_output_size: expected stride >= 1 and a size that fits in 64 bits, got in=" +
                                std::to_string(in) + ", kernel=" + std::to_string(kernel) + ", stride=" +
                                std::to_string(stride) + ", padding=" + std::to_string(pad) +
                                ", dilation=" + std::to_string(dilation));
  return static_cast<std::int64_t>(out);
}

namespace {
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
}  // namespace

std::int64_t pool_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                              std::int64_t dilation, bool ceil_mode) {
  std::int64_t out =
      floor_div(in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

void check_window_args(const std::string& op, const WindowGeometry& g, PaddingLimit limit) {
  const Size2 &k = g.kernel_size, &s = g.stride, &p = g.padding, &d = g.dilation;
  if (k.h < 1 || k.w < 1) throw std::invalid_argument(op + ": expected kernel_size >= 1, got " + k.str());
  if (s.h < 1 || s.w < 1) throw std::invalid_argument(op + ": expected stride >= 1, got " + s.str());
  if (d.h < 1 || d.w < 1) throw std::invalid_argument(op + ": expected dilation >= 1, got " + d.str());
  if (limit == PaddingLimit::NonNegative && (p.h < 0 || p.w < 0))
    throw std::invalid_argument(op + ": expected padding >= 0, got " + p.str());
  if (limit == PaddingLimit::HalfKernel && (p.h < 0 || p.w < 0 || p.h > k.h / 2 || p.w > k.w / 2))
    throw std::invalid_argument(op + ": expected 0 <= padding <= kernel_size/2 (kernel_size " + k.str() +
                                "), got padding " + p.str());
}

void check_window_extent(const std::string& op, const Shape& input, const WindowGeometry& g) {
  constexpr __int128 kMaxExtent = __int128{1} << 62;
  const auto too_big = [](std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d) {
    return in + 2 * static_cast<__int128>(p) >= kMaxExtent || static_cast<__int128>(d) * (k - 1) + 1 >= kMaxExtent ||
           s >= kMaxExtent;
  };
  const Size2 &k = g.kernel_size, &s = g.stride, &p = g.padding, &d = g.dilation;
  if (too_big(input[2], k.h, s.h, p.h, d.h) || too_big(input[3], k.w, s.w, p.w, d.w))
    throw std::invalid_argument(op + ": expected the padded input size, the dilated kernel size and the stride below "
                                "2^62, got input " + shape_str(input) + ", kernel_size " + k.str() + ", stride " +
                                s.str() + ", padding " + p.str() + ", dilation " + d.str());
}

namespace {
// The first output position of one dim whose window has no tap in [0, in), or -1.
// Window i's taps are i·s − p + t·d, t in [0, k); starts grow with i, so only a prefix of
// windows starting left of the input and a suffix starting at or past its end can miss it.
std::int64_t first_window_outside(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d,
                                  std::int64_t out) {
  for (std::int64_t i = 0; i < out; ++i) {
    const std::int64_t start = i * s - p;
    if (start >= 0) break;
    const std::int64_t t = (-start + d - 1) / d;  // the first tap at or right of 0
    if (t >= k || start + t * d >= in) return i;
  }
  if (out > 0 && (out - 1) * s - p >= in) return out - 1;
  return -1;
}
}  // namespace

void check_window_taps(const std::string& op, const Shape& input, const WindowGeometry& g, bool ceil_mode,
                       std::int64_t out_h, std::int64_t out_w) {
  const Size2 &k = g.kernel_size, &s = g.stride, &p = g.padding, &d = g.dilation;
  const std::int64_t ih = first_window_outside(input[2], k.h, s.h, p.h, d.h, out_h);
  const std::int64_t iw = ih >= 0 ? -1 : first_window_outside(input[3], k.w, s.w, p.w, d.w, out_w);
  if (ih < 0 && iw < 0) return;
  const bool rows = ih >= 0;
  const std::int64_t i = rows ? ih : iw, in = rows ? input[2] : input[3];
  const std::int64_t ss = rows ? s.h : s.w, pp = rows ? p.h : p.w, dd = rows ? d.h : d.w, kk = rows ? k.h : k.w;
  const std::string unit = rows ? "row" : "column";
  throw std::invalid_argument(
      op + ": the window of output " + unit + " " + std::to_string(i) + " covers only padding (its " +
      std::to_string(kk) + " taps start at " + unit + " " + std::to_string(i * ss - pp) + " with step " +
      std::to_string(dd) + ", the input has " + unit + "s [0, " + std::to_string(in) + ")), with kernel_size " +
      k.str() + ", stride " + s.str() + ", padding " + p.str() + ", dilation " + d.str() + ", ceil_mode " +
      (ceil_mode ? "true" : "false") + " on input " + shape_str(input) +
      "; expected every window to have a tap inside the input (reduce padding or dilation)");
}

}  // namespace tapegrad::layers::functional
