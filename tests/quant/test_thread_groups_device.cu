// thread_groups.hpp says a CUDA kernel can derive the per-thread and per-warp groups on the
// device: nvcc compiles derive_groups here in constant expressions (host and device passes) and
// in a kernel, whose maps the host compares with its own. Without a GPU the comparison is
// skipped (exit 77); compiling this file is the claim's first half.
#include <cuda_runtime.h>

#include <cstdio>

#include "emulation/attention/sage2_hopper.hpp"
#include "emulation/quant/thread_groups.hpp"

using namespace lowbit;
using namespace lowbit::quant;

static_assert(derive_groups(ThreadTiling{}, GroupScope::thread).q.count == 32);
static_assert(derive_groups(ThreadTiling{}, GroupScope::thread).k.count == 4);
static_assert(derive_groups(ThreadTiling{mma::atoms::wgmma_m64nNk32_s32_s8_s8(64), 4, 128, 64}, GroupScope::warp).q.count == 4);

// The sage2-8b recipe's tiling as the kernel gets it: built on the device (its wgmma atom too).
static_assert(attention::sage2_8b_hopper(128).qk_tiling().atom == mma::atoms::wgmma_m64nNk32_s32_s8_s8(128));

__global__ void derive_on_device(ThreadTiling tiling, GroupScope scope, QkGroups* out) {
  *out = derive_groups(tiling, scope);
}

__global__ void derive_recipe_on_device(int head_dim, GroupScope scope, QkGroups* out) {
  *out = derive_groups(attention::sage2_8b_hopper(head_dim).qk_tiling(), scope);
}

namespace {

bool same(const BlockGroups& a, const BlockGroups& b) {
  if (a.block_rows != b.block_rows || a.count != b.count) return false;
  for (int r = 0; r < a.block_rows; ++r)
    if (a.group_of_row[r] != b.group_of_row[r]) return false;
  return true;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("test_thread_groups_device: no GPU, the kernel run is skipped (the constexpr checks compiled)");
    return 77;
  }
  const ThreadTiling tilings[]{{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 128, 64},
                               {mma::atoms::mma_m16n8k32_s32_s8_s8, 8, 128, 64},
                               {mma::atoms::mma_m8n8k32_s32_s4_s4, 4, 32, 64},
                               {mma::atoms::wgmma_m64nNk32_s32_s8_s8(64), 4, 128, 64},
                               {mma::atoms::wgmma_m64nNk32_s32_s8_s8(128), 8, 256, 128}};
  QkGroups* device = nullptr;
  if (cudaMalloc(&device, sizeof(QkGroups)) != cudaSuccess) {
    std::puts("test_thread_groups_device: cudaMalloc failed");
    return 1;
  }
  int failures = 0, runs = 0;
  for (const ThreadTiling& t : tilings)
    for (GroupScope scope : {GroupScope::thread, GroupScope::warp}) {
      derive_on_device<<<1, 1>>>(t, scope, device);
      QkGroups from_device{};
      const cudaError_t status = cudaMemcpy(&from_device, device, sizeof(QkGroups), cudaMemcpyDeviceToHost);
      const QkGroups on_host = derive_groups(t, scope);
      const bool ok = status == cudaSuccess && same(from_device.q, on_host.q) && same(from_device.k, on_host.k);
      std::printf("%s warps=%d %dx%d %s: %d Q groups, %d K groups: %s\n", t.atom.name.c_str(), t.warps, t.block_q, t.block_k,
                  scope == GroupScope::thread ? "per-thread" : "per-warp", on_host.q.count, on_host.k.count,
                  status != cudaSuccess ? cudaGetErrorString(status) : ok ? "device = host" : "DIFFERENT");
      failures += !ok;
      ++runs;
    }
  for (int head_dim : {64, 128})
    for (GroupScope scope : {GroupScope::thread, GroupScope::warp}) {
      derive_recipe_on_device<<<1, 1>>>(head_dim, scope, device);
      QkGroups from_device{};
      const cudaError_t status = cudaMemcpy(&from_device, device, sizeof(QkGroups), cudaMemcpyDeviceToHost);
      const QkGroups on_host = derive_groups(attention::sage2_8b_hopper(head_dim).qk_tiling(), scope);
      const bool ok = status == cudaSuccess && same(from_device.q, on_host.q) && same(from_device.k, on_host.k);
      std::printf("sage2-8b recipe (head_dim %d, tiling built on the device) %s: %s\n", head_dim,
                  scope == GroupScope::thread ? "per-thread" : "per-warp",
                  status != cudaSuccess ? cudaGetErrorString(status) : ok ? "device = host" : "DIFFERENT");
      failures += !ok;
      ++runs;
    }
  cudaFree(device);
  std::printf("%d of %d maps derived on the device equal the host's\n", runs - failures, runs);
  return failures ? 1 : 0;
}
