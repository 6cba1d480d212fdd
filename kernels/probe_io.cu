#include "kernels/probe_io.cuh"

#include <cstring>
#include <stdexcept>

#include <cuda_runtime.h>

#include "kernels/device.hpp"
#include "kernels/mma_probe.hpp"

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
  void upload(const std::vector<T>& host) {
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

void run_on_device(const mma::Atom& atom, int depth, std::span<mma::Tile> tiles, void (*launch)(const DeviceTiles&)) {
  if (tiles.empty()) return;
  const std::size_t mk = std::size_t(atom.m) * depth, kn = std::size_t(depth) * atom.n, mn = std::size_t(atom.m) * atom.n;
  std::vector<std::uint16_t> a(mk * tiles.size()), b(kn * tiles.size());
  std::vector<std::uint32_t> c(mn * tiles.size()), d;
  for (std::size_t t = 0; t < tiles.size(); ++t) {
    const mma::Tile& tile = tiles[t];
    if (tile.a.size() != mk || tile.b.size() != kn || tile.c.size() != mn)
      throw std::invalid_argument("tile " + std::to_string(t) + " of " + atom.name.str() +
                                  ": field sizes do not match the instruction's shape");
    std::copy(tile.a.begin(), tile.a.end(), a.begin() + t * mk);
    std::copy(tile.b.begin(), tile.b.end(), b.begin() + t * kn);
    for (std::size_t i = 0; i < mn; ++i) {
      const auto code = mma::accumulator_code(atom.c, tile.c[i]);
      if (!code)
        throw std::invalid_argument("tile " + std::to_string(t) + " of " + atom.name.str() + ": C word " +
                                    std::to_string(i) + " is not a value of the accumulator format");
      c[t * mn + i] = *code;
    }
  }
  DeviceArray<std::uint16_t> device_a(a.size()), device_b(b.size());
  DeviceArray<std::uint32_t> device_c(c.size()), device_d(c.size());
  device_a.upload(a);
  device_b.upload(b);
  device_c.upload(c);
  const DeviceTiles batch{device_a.data(), device_b.data(), device_c.data(), device_d.data(), int(tiles.size())};
  // Two runs over differently poisoned outputs: any element either run leaves unwritten (or
  // computes differently) shows as a difference.
  std::vector<std::uint32_t> first;
  for (int poison : {0x00, 0xff}) {
    check_cuda(cudaMemset(device_d.data(), poison, device_d.bytes()), "cudaMemset (probe outputs)");
    launch(batch);
    check_cuda(cudaGetLastError(), "probe kernel launch");
    check_cuda(cudaDeviceSynchronize(), "probe kernel");
    device_d.download(poison == 0 ? first : d);
  }
  if (first != d)
    throw std::runtime_error(atom.name.str() + ": the probe left outputs unwritten or is not deterministic");
  for (std::size_t t = 0; t < tiles.size(); ++t) {
    tiles[t].d.resize(mn);
    for (std::size_t i = 0; i < mn; ++i) tiles[t].d[i] = mma::accumulator_word(atom.c, d[t * mn + i]);
  }
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
