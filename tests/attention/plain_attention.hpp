// The stages of an attention Pipeline written the plain way, for the differential tests: one query
// row at a time through every KV block, each MMA one row (M = 1) through the instruction's model
// (integer QK^T too, where forward() sums exactly), the quantizers' element-by-element reference,
// means summed in its own loops. It shares with
// forward() only the contract's per-element steps (kernel_steps.hpp), the MMA models and the
// quantizer specs. P's per-block scale couples the rows of a block, so it is not supported here.
#pragma once

#include <vector>

#include "emulation/attention/pipeline.hpp"

namespace lowbit::test {

struct PlainResult {
  std::vector<attention::QuantizedHead> q, k, v;  // as ForwardResult
  std::vector<float> lse, output;
  std::vector<Code> output_codes;
};

bool plain_supports(const attention::Pipeline& pipeline);

PlainResult plain_forward(const attention::Pipeline& pipeline, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                          bool causal);

}  // namespace lowbit::test
