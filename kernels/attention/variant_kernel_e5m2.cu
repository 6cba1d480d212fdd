// The sage2-4b family's kernel instances with P V on the e5m2 instruction (variant_kernel.cuh).
#include "kernels/attention/variant_kernel.cuh"

namespace lowbit::kernels::attention::variant {

template Kernel kernel_for<PvInstruction::e5m2>(QkInstruction, int, bool);

}  // namespace lowbit::kernels::attention::variant
