#pragma once
// The pools' backwards as recorded, differentiable ops: a create_graph backward of
// max_pool2d, avg_pool2d or adaptive_avg_pool2d runs them. Every one is linear in its tensor
// argument, and its backward is its adjoint: scatter <-> gather at the argmax indices,
// average <-> spread over the windows.
#include <cstdint>
#include <optional>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/window.h>  // Size2

namespace tapegrad::layers::functional {

/// max_pool2d's backward: dx (input_shape (N, C, H, W), zeros) with
/// dx[n, c].flat[indices[n, c, l]] += g[n, c, l]. g (N, C, OH, OW) floating; indices Int64 of
/// g's shape, each in [0, H·W) (the argmax positions max_pool2d found). Backward:
/// max_pool2d_gather(ddx, indices). Throws std::invalid_argument naming the expected and
/// actual shapes, dtype or index.
Tensor max_pool2d_scatter(const Tensor& g, const Tensor& indices, const Shape& input_shape);

/// out[n, c, l] = t[n, c].flat[indices[n, c, l]]: t (N, C, H, W) floating, indices Int64
/// (N, C, OH, OW) each in [0, H·W) -> (N, C, OH, OW). The adjoint of max_pool2d_scatter, and
/// its backward the scatter. Throws std::invalid_argument as max_pool2d_scatter.
Tensor max_pool2d_gather(const Tensor& t, const Tensor& indices);

/// avg_pool2d's backward: dx (input_shape) with dx[window] += g[o] / divisor over each output
/// o's window (the windows and divisors of avg_pool2d with these arguments). g must have
/// avg_pool2d's output shape. Backward: avg_pool2d(ddx, ...) with the same arguments. Throws
/// std::invalid_argument as avg_pool2d does for the geometry and divisor, and naming g's
/// expected shape.
Tensor avg_pool2d_backward(const Tensor& g, const Shape& input_shape, Size2 kernel_size,
                           std::optional<Size2> stride = std::nullopt, Size2 padding = 0, bool ceil_mode = false,
                           bool count_include_pad = true, std::optional<std::int64_t> divisor_override = std::nullopt);

/// adaptive_avg_pool2d's backward: dx (input_shape (N, C, H, W)) with dx[window] +=
/// g[o] / window size, g (N, C, OH, OW) (OH, OW: the output size). Backward:
/// adaptive_avg_pool2d(ddx, (OH, OW)). Throws std::invalid_argument as adaptive_avg_pool2d
/// does, and naming the shapes of g and input_shape when N or C differ.
Tensor adaptive_avg_pool2d_backward(const Tensor& g, const Shape& input_shape);

}  // namespace tapegrad::layers::functional
