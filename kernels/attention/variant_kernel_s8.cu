// The sage2-4b family's kernel instances with P V on the s8 instruction (variant_kernel.cuh).
#include "kernels/attention/variant_kernel.cuh"

namespace lowbit::kernels::attention::variant {

template Kernel kernel_for<PvInstruction::s8>(QkInstruction, int, bool);

}  // namespace lowbit::kernels::attention::variant
