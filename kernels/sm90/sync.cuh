// Synchronization of warp-specialized kernels (sm_90a): named barriers between a producer and
// consumers, and the per-warpgroup register budget.
//
// Named barriers (bar.sync / bar.arrive with a thread count, PTX "barrier"): a consumer waits with
// sync, its producer signals with arrive (release: its prior shared-memory writes are visible to
// the waiting threads). Data written through the generic proxy (st.shared, cp.async) that wgmma
// reads needs fence_async_shared() in each writing thread before its arrive (copy.cuh).
#pragma once

namespace lowbit::kernels::sm90 {

__device__ inline void barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ inline void barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// setmaxnreg: the executing warpgroup's register budget (a multiple of 8, 24..256). Takes effect
// where the kernel has a register cap at entry (__launch_bounds__(threads, 1)).
template <int Registers>
__device__ inline void raise_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Registers));
}
template <int Registers>
__device__ inline void lower_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Registers));
}

}  // namespace lowbit::kernels::sm90
