#pragma once
// Functional 2-D convolution (PyTorch's F.conv2d, cross-correlation, zeros padding),
// computed as im2col + GEMM (the "unfold" formulation of Chellapilla et al. 2006,
// "High Performance Convolutional Neural Networks for Document Processing").
#include <cstddef>
#include <cstdint>
#include <string>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/window.h>  // Size2, conv_output_size

namespace tapegrad::layers::functional {

/// Which implementation float32 conv2d runs. float64 always runs im2col + GEMM (oneDNN has no
/// float64 convolution).
///  - Auto: oneDNN's convolution primitives where they measured faster (see the README's CNN
///    rows), im2col + GEMM elsewhere and whenever tapegrad was built without oneDNN;
///  - Im2col: im2col + GEMM always;
///  - OneDNN: oneDNN for every float32 shape it can run (im2col for the rest).
/// The initial value comes from the environment variable TAPEGRAD_CONV_BACKEND
/// (auto | im2col | onednn; unset: auto). Process-wide; the first-order backward of a recorded
/// conv2d uses the backend its forward used (a create_graph backward's ops: the one in use then).
enum class ConvBackend { Auto, Im2col, OneDNN };
/// Throws std::invalid_argument for OneDNN when tapegrad was built without oneDNN.
void set_conv_backend(ConvBackend backend);
/// The backend in use (first call: read from TAPEGRAD_CONV_BACKEND).
ConvBackend conv_backend();
/// True when tapegrad was built with oneDNN (CMake found libdnnl-dev).
bool conv_onednn_available();
/// "auto" or "" -> Auto, "im2col", "onednn" (TAPEGRAD_CONV_BACKEND's values). Throws
/// std::invalid_argument naming the accepted values for anything else, and for "onednn" in a
/// build without oneDNN.
ConvBackend parse_conv_backend(const std::string& name);

/// oneDNN's primitives for a float32 conv2d are created once per configuration (input and
/// weight shapes, stride, padding, dilation, groups, bias, thread count) and cached, least
/// recently used evicted beyond the capacity: by default 64 configurations (each holds up to
/// 12 primitives, about 0.25 MiB), so a stream of new batch sizes does not grow the process
/// without bound. 0 caches nothing. Process-wide; no effect without oneDNN (capacity and size
/// read 0 there).
std::size_t conv_primitive_cache_capacity();
/// Sets the capacity above (configurations; 0 caches nothing), evicting the least recently
/// used configurations beyond it at once.
void set_conv_primitive_cache_capacity(std::size_t configurations);
/// Configurations cached now (at most the capacity).
std::size_t conv_primitive_cache_size();

/// y[n, o, i, j] = bias[o] + Σ_{c, p, q} w[o, c, p, q] · x[n, g·C/G + c, i·sh − ph + p·dh, j·sw − pw + q·dw]
/// with g = o / (O/G) and zeros outside the input.
/// x (N, C_in, H, W), weight (C_out, C_in/groups, kH, kW), bias (C_out) or undefined
/// -> (N, C_out, H_out, W_out), H_out = conv_output_size(H, kH, sh, ph, dh) (same for W).
/// groups = C_in = C_out is a depthwise convolution.
/// Backward: dW_g = Σ_n dY_g · colsᵀ, dcols = W_gᵀ · dY_g scattered back (col2im), db = Σ dY.
/// Under create_graph the backward runs the recorded ops conv2d_input_grad and
/// conv2d_weight_grad (conv_grad_ops.h, the same kernels), so conv2d differentiates to any order.
/// im2col: samples run in parallel on the configured threads; the im2col buffers come from
/// the block cache. oneDNN (float32, see ConvBackend): cached primitives on the configured
/// threads, deterministic at a given thread count. Throws std::invalid_argument naming expected and actual values for a rank
/// other than 4, non-floating or mixed dtypes, stride/dilation/groups < 1, padding < 0,
/// C_in != weight.size(1)·groups, C_out not divisible by groups, a bias not of shape
/// (C_out), a dilated kernel larger than the padded input, or an output or unfolded input
/// (C_in/groups·kH·kW rows of H_out·W_out) whose non-zero sizes overflow int64.
/// A zero N, C_in, C_out, H or W runs no backend (on every ConvBackend): each output is
/// bias[o] (0 without bias: no taps, or only padding), dx = 0, dweight = 0, dbias = Σ dY.
/// PyTorch refuses H or W = 0 with N, C_in > 0; tapegrad gives that sum over padding.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = 1,
              Size2 padding = 0, Size2 dilation = 1, std::int64_t groups = 1);

}  // namespace tapegrad::layers::functional
