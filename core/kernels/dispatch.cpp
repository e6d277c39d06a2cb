// The kernel families of core/ (core/kernels/*.h): each one's table for the level isa() chose,
// looked up on its first use (core/kernels/isa_dispatch.h). A baseline translation unit.
#include <tapegrad/core/kernels/gemm_eigen.h>
#include <tapegrad/core/kernels/pointwise.h>

namespace tapegrad::kernels {
TAPEGRAD_DEFINE_KERNELS(PointwiseKernels, pointwise)
}  // namespace tapegrad::kernels

namespace tapegrad::detail {
TAPEGRAD_DEFINE_KERNELS(GemmEigenKernels, gemm_eigen)
}  // namespace tapegrad::detail
