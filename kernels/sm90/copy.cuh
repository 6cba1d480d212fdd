// Asynchronous copies from global to shared memory (cp.async, 16 bytes, bypassing L1), and the
// fence that makes data written by ordinary or cp.async stores visible to wgmma (the async proxy).
#pragma once

#include <cstdint>

namespace lowbit::kernels::sm90 {

__device__ inline void copy_16_async(void* smem, const void* global) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(address), "l"(global) : "memory");
}
__device__ inline void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most Pending groups of this thread's copies are still in flight.
template <int Pending>
__device__ inline void wait_copies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}
// Shared memory written through the generic proxy (st.shared, cp.async) that wgmma reads next:
// each writing thread fences before the barrier that precedes the wgmma.
__device__ inline void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

}  // namespace lowbit::kernels::sm90
