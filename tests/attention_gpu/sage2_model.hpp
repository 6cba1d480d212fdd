// INTERIM: a CPU model of the sage2-8b kernel, assembled from quant::quantize, mma::gemm and the
// steps of emulation/attention/kernel_steps.hpp, until the emulated `sage2-8b` pipeline (branch
// `pipeline`) lands; then the GPU check compares against that pipeline and this file goes.
//
// It reads the same recipe (sage2_hopper.hpp) and follows the same contract as the kernel, but it
// is written the way the recipe describes the computation, not the way the kernel organizes it:
// whole matrices per head, quant::quantize with the per-thread groupings, the exact integer
// Q K'^T, P V through the MMA registry's wgmma e4m3 model over each block's keys in key order
// (the kernel permutes keys within each k32 group; the model must not see it), the lane sums from
// steps::lane_of_column.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention/sage2_attention.hpp"

namespace lowbit::test {

struct Sage2ModelResult {
  std::vector<std::uint16_t> out;                    // the problem's layout and dtype
  std::vector<float> lse;                            // [batch][heads_q][tokens]
  kernels::attention::Sage2HostQuantized quantized;  // in the device buffers' layout
};

// Throws std::invalid_argument for an invalid problem or tensors of the wrong size. With
// only_q_blocks, only the output and LSE rows of those Q blocks (of every head) are computed; the
// others stay 0.
Sage2ModelResult sage2_model(const kernels::attention::Sage2Problem& problem, std::span<const std::uint16_t> q,
                             std::span<const std::uint16_t> k, std::span<const std::uint16_t> v,
                             std::span<const int> only_q_blocks = {});

}  // namespace lowbit::test
