// A chunkwise GLA Pipeline written the plain way, for the differential tests: one query row at a
// time, integer scores as exact int64 sums of decoded codes, every floating MMA one row (M = 1)
// through the instruction's model, the quantizers' element-by-element reference
// (quant::quantize_reference), smoothing means summed in its own double loops, casts one encode()
// per element. It shares with linear::forward() only the per-element steps (linear_steps.hpp),
// the MMA models and the quantizer specs.
#pragma once

#include "emulation/linear/gla.hpp"

namespace lowbit::test {

linear::ForwardResult plain_gla(const linear::Pipeline& pipeline, const MatrixF& q, const MatrixF& k, const MatrixF& v,
                                const MatrixF& log_alpha, const MatrixF* initial_state = nullptr);

}  // namespace lowbit::test
