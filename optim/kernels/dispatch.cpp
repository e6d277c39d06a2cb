// The kernel family of optim/ (kernels/update.h): its table for the level isa() chose, looked up
// on its first use (core/kernels/isa_dispatch.h). A baseline translation unit.
#include <tapegrad/optim/kernels/update.h>

namespace tapegrad::optim::kernels {
TAPEGRAD_DEFINE_KERNELS(UpdateKernels, update)
}  // namespace tapegrad::optim::kernels
