#include "kernels/probes/probe_io.cuh"

#include <algorithm>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/device.hpp"
#include "kernels/probes/mma_probe.hpp"

namespace lowbit::kernels {
namespace {

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) : count_(count) {
    check_cuda(cudaMalloc(&data_, bytes()), "cudaMalloc (probe tiles)");
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* data() { return data_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  void upload(std::span<const T> host) {
    check_cuda(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy (probe inputs)");
  }
  void download(std::vector<T>& host) {
    host.resize(count_);
    check_cuda(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy (probe outputs)");
  }

 private:
  std::size_t count_;
  T* data_ = nullptr;
};

}  // namespace

void run_on_device(const mma::Atom& atom, int depth, const TileBatch& tiles, void (*launch)(const DeviceTiles&)) {
  if (tiles.count <= 0) return;
  const auto count = std::size_t(tiles.count);
  const std::size_t mk = std::size_t(atom.m) * depth, kn = std::size_t(depth) * atom.n, mn = std::size_t(atom.m) * atom.n;
  if (tiles.a.size() != count * mk || tiles.b.size() != count * kn || tiles.c.size() != count * mn ||
      tiles.d.size() != count * mn)
    throw std::invalid_argument(atom.name.str() + ": the batch's arrays do not hold " + std::to_string(count) +
                                " tiles of m" + std::to_string(atom.m) + "n" + std::to_string(atom.n) + "k" +
                                std::to_string(depth));
  DeviceArray<std::uint16_t> device_a(tiles.a.size()), device_b(tiles.b.size());
  DeviceArray<std::uint32_t> device_c(tiles.c.size()), device_d(tiles.d.size());
  device_a.upload(tiles.a);
  device_b.upload(tiles.b);
  device_c.upload(tiles.c);
  const DeviceTiles batch{device_a.data(), device_b.data(), device_c.data(), device_d.data(), tiles.count};
  // Two runs over differently poisoned outputs: any element either run leaves unwritten (or
  // computes differently) shows as a difference.
  std::vector<std::uint32_t> first, second;
  for (int poison : {0x00, 0xff}) {
    check_cuda(cudaMemset(device_d.data(), poison, device_d.bytes()), "cudaMemset (probe outputs)");
    launch(batch);
    check_cuda(cudaGetLastError(), "probe kernel launch");
    check_cuda(cudaDeviceSynchronize(), "probe kernel");
    device_d.download(poison == 0 ? first : second);
  }
  if (first != second)
    throw std::runtime_error(atom.name.str() + ": the probe left outputs unwritten or is not deterministic");
  std::copy(second.begin(), second.end(), tiles.d.begin());
}

std::span<const MmaProbe> mma_probes() {
  static const std::vector<MmaProbe> all = [] {
    std::vector<MmaProbe> v;
    for (auto group : {detail::mma_sync_probes(), detail::wgmma_probes()}) v.insert(v.end(), group.begin(), group.end());
    return v;
  }();
  return all;
}

}  // namespace lowbit::kernels
