// The sage2-4b family's kernel instances with P V on the e4m3 instruction (variant_kernel.cuh).
#include "kernels/attention/variant_kernel.cuh"

namespace lowbit::kernels::attention::variant {

template Kernel kernel_for<PvInstruction::e4m3>(QkInstruction, int, bool);

}  // namespace lowbit::kernels::attention::variant
