// The same models written the plain way, as the published algorithm reads: every value an exact
// rational (Boost cpp_rational), exponents found by comparing with powers of two, chunks chosen
// by their formula, no tables, no shifts, no 64-bit tricks. Slow (microseconds per term); the
// differential tests and bench_mma compare the integer engine with it bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "emulation/mma/arithmetic.hpp"
#include "emulation/mma/gemm.hpp"

namespace lowbit::mma {

std::vector<std::uint32_t> reference_execute(const Instruction& instruction, const TileInputs& in);
MatrixCode reference_gemm(const Instruction& instruction, const GemmOperands& operands, const KLoop& loop = {});

}  // namespace lowbit::mma
