#pragma once
// im2col / col2im for 2-D convolution over one (C, H, W) image: the unfolded matrix has
// one row per (c, p, q) kernel tap, r = (c·kH + p)·kW + q, and one column per output
// position (i, j), column i·W_out + j, holding x[c, i·sh − ph + p·dh, j·sw − pw + q·dw]
// (0 outside the image). col2im is its adjoint (scatter-add).
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tapegrad::layers::functional::kernels {

struct ConvGeom {
  std::int64_t C, H, W;     ///< channels of one group, input height, width
  std::int64_t kh, kw;      ///< kernel
  std::int64_t sh, sw;      ///< stride
  std::int64_t ph, pw;      ///< padding
  std::int64_t dh, dw;      ///< dilation
  std::int64_t OH, OW;      ///< output height, width
  std::int64_t rows() const { return C * kh * kw; }
  std::int64_t cols() const { return OH * OW; }
  /// [lo, hi): the output columns j whose input column j·sw − pw + q·dw lies in [0, W).
  void col_range(std::int64_t q, std::int64_t& lo, std::int64_t& hi) const {
    const std::int64_t off = q * dw - pw;  // iw = j·sw + off
    lo = off >= 0 ? 0 : (-off - 1) / sw + 1;  // ceil(-off / sw), no overflow for a huge stride
    hi = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;
    lo = std::min(lo, OW);
    hi = std::clamp(hi, lo, OW);
  }
};

/// cols (rows × cols) = unfold(x), x one (C, H, W) image; row r of the matrix starts at
/// cols + r·ld (ld >= cols(): several images' matrices side by side in one buffer).
template <class T>
void im2col(const T* __restrict x, T* __restrict cols, const ConvGeom& g, std::int64_t ld) {
  for (std::int64_t c = 0; c < g.C; ++c)
    for (std::int64_t p = 0; p < g.kh; ++p)
      for (std::int64_t q = 0; q < g.kw; ++q) {
        T* row = cols + ((c * g.kh + p) * g.kw + q) * ld;
        std::int64_t lo, hi;
        g.col_range(q, lo, hi);
        const std::int64_t woff = q * g.dw - g.pw;
        for (std::int64_t i = 0; i < g.OH; ++i) {
          T* out = row + i * g.OW;
          const std::int64_t ih = i * g.sh - g.ph + p * g.dh;
          if (ih < 0 || ih >= g.H) {
            std::fill(out, out + g.OW, T(0));
            continue;
          }
          const T* src = x + (c * g.H + ih) * g.W + woff;
          std::fill(out, out + lo, T(0));
          if (g.sw == 1)
            std::memcpy(out + lo, src + lo, static_cast<std::size_t>(hi - lo) * sizeof(T));
          else
            for (std::int64_t j = lo; j < hi; ++j) out[j] = src[j * g.sw];
          std::fill(out + hi, out + g.OW, T(0));
        }
      }
}

/// dx (C, H, W) += fold(cols), the adjoint of im2col (same layout and ld).
template <class T>
void col2im_add(const T* __restrict cols, T* __restrict dx, const ConvGeom& g, std::int64_t ld) {
  for (std::int64_t c = 0; c < g.C; ++c)
    for (std::int64_t p = 0; p < g.kh; ++p)
      for (std::int64_t q = 0; q < g.kw; ++q) {
        const T* row = cols + ((c * g.kh + p) * g.kw + q) * ld;
        std::int64_t lo, hi;
        g.col_range(q, lo, hi);
        const std::int64_t woff = q * g.dw - g.pw;
        for (std::int64_t i = 0; i < g.OH; ++i) {
          const std::int64_t ih = i * g.sh - g.ph + p * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          const T* in = row + i * g.OW;
          T* dst = dx + (c * g.H + ih) * g.W + woff;
          if (g.sw == 1)
            for (std::int64_t j = lo; j < hi; ++j) dst[j] += in[j];
          else
            for (std::int64_t j = lo; j < hi; ++j) dst[j * g.sw] += in[j];
        }
      }
}

}  // namespace tapegrad::layers::functional::kernels
