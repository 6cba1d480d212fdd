// Asynchronous copies from global to shared memory (cp.async, 16 bytes, bypassing L1), a 16-byte
// store to global memory, and the fence that makes data written by ordinary or cp.async stores
// visible to wgmma (the async proxy).
#pragma once

#include <cstdint>

#include "kernels/sm90/sync.cuh"

namespace lowbit::kernels::sm90 {

__device__ inline void copy_16_async(void* smem, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address(smem)), "l"(global) : "memory");
}
__device__ inline void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most Pending groups of this thread's copies are still in flight.
template <int Pending>
__device__ inline void wait_copies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}
// The bulk copy engine (TMA without a tensor map, cp.async.bulk): `bytes` contiguous bytes (a
// multiple of 16, both addresses 16-byte aligned) from global to shared memory, issued by one
// thread; their arrival completes `bytes` of the expected transaction count of `barrier` (an
// mbarrier, sync.cuh). Written through the async proxy, so wgmma reads them after the barrier's
// phase completes, without a fence.
__device__ inline void bulk_copy_async(void* smem, const void* global, int bytes, std::uint64_t* barrier) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   shared_address(smem)),
               "l"(global), "r"(bytes), "r"(shared_address(barrier))
               : "memory");
}

// 16 bytes to global memory in one store (`global` 16-byte aligned), whatever the compiler knows
// of the address's alignment.
__device__ inline void store_16(void* global, uint4 value) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(global), "r"(value.x), "r"(value.y), "r"(value.z),
               "r"(value.w)
               : "memory");
}

// Shared memory written through the generic proxy (st.shared, cp.async) that wgmma reads next:
// each writing thread fences before the barrier that precedes the wgmma.
__device__ inline void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

}  // namespace lowbit::kernels::sm90
