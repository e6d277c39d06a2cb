// The kernel families of layers/functional/kernels (their variants: cpu/, compiled once per ISA
// level): each family's table for the process's level, looked up on its first call
// (core/kernels/isa_dispatch.h). A new family adds its line here; a new kernel of a family
// touches only the family's header and its variant files.
#include <tapegrad/layers/functional/kernels/batch_norm_nc.h>
#include <tapegrad/layers/functional/kernels/batch_norm_ncs.h>
#include <tapegrad/layers/functional/kernels/layer_norm_rows.h>
#include <tapegrad/layers/functional/kernels/max_pool_2x2.h>

namespace tapegrad::layers::functional::kernels {

TAPEGRAD_DEFINE_KERNELS(BnRowsForwardKernels, bn_rows_forward)
TAPEGRAD_DEFINE_KERNELS(BnRowsBackwardKernels, bn_rows_backward)
TAPEGRAD_DEFINE_KERNELS(BnNcsKernels, bn_ncs)
TAPEGRAD_DEFINE_KERNELS(LnRowsKernels, ln_rows)
TAPEGRAD_DEFINE_KERNELS(MaxPool2x2Kernels, max_pool_2x2)

}  // namespace tapegrad::layers::functional::kernels
