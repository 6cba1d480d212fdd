// The per-thread Q and K groups of the recipe in constant memory, for the kernels that read them
// (quantize_block, sage2_attention_kernel). Without relocatable device code every translation unit
// has its own copy of kGroups: each one that includes this header uploads it (upload_groups,
// groups.cu).
#pragma once

#include <cuda_runtime.h>

#include "emulation/quant/thread_groups.hpp"
#include "kernels/device.hpp"

namespace lowbit::kernels::attention::detail {
namespace {

// The per-thread groups of the recipe (quant::derive_groups on the host; [0]: d = 64, [1]: d = 128).
__constant__ quant::QkGroups kGroups[2];
__device__ inline const quant::QkGroups& groups_of(int head_dim) { return kGroups[head_dim == 128]; }

// This translation unit's copy of kGroups from the host's [d = 64, d = 128].
inline void copy_groups_to_device(const quant::QkGroups (&both)[2]) {
  check_cuda(cudaMemcpyToSymbol(kGroups, both, sizeof(both)), "cudaMemcpyToSymbol (groups)");
}

}  // namespace
}  // namespace lowbit::kernels::attention::detail
