// PyTorch's FlashAttention-2 split-KV path, as torch 2.11.0+cu130's sm_90 code runs it: where a shape
// leaves SMs idle, flash_api.cpp's set_params_splitkv splits the keys into num_splits ranges; a split
// kernel (64 x 256 tiles at d <= 64, 64 x 128 at d <= 128) runs softmax flash2 over its range and writes
// its normalized fp32 output and LSE (-inf for a row with no key in it); then
// flash_fwd_splitkv_combine_kernel joins them per row:
//   mx   = max_s lse_s (-inf -> 0)
//   sum  = the threads' sums of expf(lse_s - mx) (a thread's splits in order), then a butterfly over
//          the R threads of a row (R = min(128 / kBlockM, kMaxSplits), kBlockM = 4 at d % 128 = 0, else 8)
//   lse  = logf(sum) + mx (+inf at sum 0)
//   out  = sum over s in order of fma(expf(lse_s - lse), o_s, out) from +0, rounded to the output format
// expf and logf are CUDA's accurate ones (no fast math): the instruction sequences of the combine
// kernel's SASS, written out below.
#pragma once

#include "emulation/attention/pipeline.hpp"

namespace lowbit::attention::flash2 {

// flash_api.cpp's choice: 1 (the one-pass kernel) or the number of splits, for a GPU of `sms`
// multiprocessors (0: never split).
int split_count(int batch, int heads, int kv_heads, int tokens, int keys, int head_dim, int sms);

// The split-KV path: `splits` split passes of forward() and their combination.
ForwardResult split_forward(const Pipeline& pipeline, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                            const ForwardOptions& options, int splits);

// CUDA's expf and logf without --use_fast_math, bit for bit (their sm_90 instruction sequences).
float cuda_expf(float x);
float cuda_logf(float x);

}  // namespace lowbit::attention::flash2
