#pragma once
// Internal: every size at which a kernel of layers/functional changes its path, in one place,
// so the kernels and the tests on both sides of each (tests/layers/test_thresholds_*.cpp)
// read the same value. Sizes are in bytes of the operand (sizeof(T) times elements) or in
// elements, as each says. The thread-count threshold they all share is kParallelGrain
// (core/parallel.h): a kernel over fewer elements runs on the calling thread.
//
// Changing a value here changes which path the tests exercise, never whether they pass: the
// tests compute their sizes from these names.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <tapegrad/core/parallel.h>

#include <tapegrad/core/kernels/isa_dispatch.h>

namespace tapegrad::layers::functional::kernels::thresholds {
inline namespace TAPEGRAD_ISA_INLINE_NS {  // core/kernels/isa_dispatch.h

// ---- shared by the norm kernels (kernels/simd.h) -------------------------------------------

/// Outputs of at least 24 MiB are written with streaming (non-temporal) stores: they would
/// not stay in the cache. Batch norm's y and dx (both layouts), LayerNorm's dx
/// (kernels/cpu/batch_norm_nc_*.cpp, kernels/cpu/layer_norm_rows.cpp, batch_norm.cpp). The (N, C)
/// and per-row kernels stream only when the rows are whole vectors (kernels::streamable).
constexpr std::size_t kStreamBytes = std::size_t(24) << 20;

/// A work chunk of kernels::for_row_chunks holds about 1 MiB of the operand (chunk_rows).
constexpr std::int64_t kChunkBytes = std::int64_t(1) << 20;

/// Rows per work chunk: kChunkBytes of `row_bytes` rows, rounded down to a multiple of
/// `unit` rows (the kernel's own blocking), at least `unit`.
inline std::int64_t chunk_rows(std::int64_t row_bytes, std::int64_t unit) {
  const std::int64_t r = std::max<std::int64_t>(1, kChunkBytes / std::max<std::int64_t>(row_bytes, 1));
  return std::max(unit, r / unit * unit);
}

// ---- batch norm on (N, C) (S = 1): kernels/cpu/batch_norm_nc_*.cpp -------------------------

/// Values per statistics block: a block (8192 values, 32 KB of float32) stays in L1 for the
/// statistics' second pass; the T-precision sums run over one block's rows at a time.
constexpr std::int64_t kBnRowsBlockElems = 8192;
/// At most this many rows per block (narrow inputs).
constexpr std::int64_t kBnRowsMaxBlockRows = 1024;
/// Rows per statistics block for C channels: kBnRowsBlockElems / C, clamped to [1, 1024].
inline std::int64_t bn_rows_block_rows(std::int64_t C) {
  return std::clamp<std::int64_t>(kBnRowsBlockElems / std::max<std::int64_t>(C, 1), 1, kBnRowsMaxBlockRows);
}
/// Operands up to 512 KiB count as cache-resident (the sizes of MLP training): walked a chunk
/// of channels at a time down the rows; larger ones row by row.
constexpr std::size_t kBnRowsCachedBytes = std::size_t(512) << 10;
template <class T>
bool bn_rows_cached(std::int64_t N, std::int64_t C) {
  return static_cast<std::size_t>(N * C) * sizeof(T) <= kBnRowsCachedBytes;
}

// ---- batch norm on (N, C, S), S > 1: batch_norm.cpp ---------------------------------------

/// Values per statistics block of one channel: max(1, 16384 / S) rows of S values, so the
/// block's second pass runs from L1/L2.
constexpr std::int64_t kBnSpatialBlockElems = 16384;
inline std::int64_t bn_spatial_block_rows(std::int64_t S) {
  return std::max<std::int64_t>(1, kBnSpatialBlockElems / std::max<std::int64_t>(S, 1));
}
/// A streamed row (one (n, c) plane of S values) is computed into an L1 buffer of this many
/// values and copied out with streaming stores, buffer by buffer.
constexpr std::int64_t kBnStreamBufferElems = 1024;

// ---- the per-row LayerNorm kernel (and GroupNorm on (N, C)): kernels/cpu/layer_norm_rows.cpp

/// Statistics are taken for a block of up to 16 rows before they are written: max(1,
/// min(16, 8192 / K)) rows of K values.
constexpr std::int64_t kLnRowBlockElems = 8192;
constexpr std::int64_t kLnMaxRowBlock = 16;
inline std::int64_t ln_row_block(std::int64_t K) {
  return std::clamp<std::int64_t>(kLnRowBlockElems / std::max<std::int64_t>(K, 1), 1, kLnMaxRowBlock);
}
/// Rows whose dγ, dβ are summed in T before they are added to the double totals.
constexpr std::int64_t kLnGradBlockRows = 64;
/// Up to 512 KiB (and G = 1), the backward takes rows in pairs sharing one visit of γ and
/// the accumulators (faster from cache, slower from memory).
constexpr std::size_t kLnPairedBytes = std::size_t(512) << 10;
template <class T>
bool ln_rows_paired(std::int64_t R, std::int64_t K, std::int64_t G) {
  return G == 1 && static_cast<std::size_t>(R * K) * sizeof(T) <= kLnPairedBytes;
}

// ---- convolution: conv.cpp -----------------------------------------------------------------

/// ConvBackend::Auto sends a float32, ungrouped convolution with at least 16 input channels
/// to oneDNN (when built with it), the rest to im2col + GEMM. Measured at the reference CNN's
/// shapes: oneDNN ran Conv(32→64) on 14×14 1.6-2.4× faster, im2col Conv(1→32) on 28×28
/// 1.8× faster. Independent of the batch size.
constexpr std::int64_t kConvDnnlMinInChannels = 16;

}  // namespace TAPEGRAD_ISA_INLINE_NS
}  // namespace tapegrad::layers::functional::kernels::thresholds
