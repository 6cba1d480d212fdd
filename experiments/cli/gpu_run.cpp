#include "experiments/cli/gpu_run.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "numerics/provenance.hpp"

namespace lowbit::cli {

std::optional<kernels::GpuInfo> require_gpu(const char* command) {
  auto gpu = kernels::first_gpu();
  if (!gpu) fmt::print(stderr, "lowbit {}: no GPU found (or no CUDA driver); skipped\n", command);
  return gpu;
}

nlohmann::ordered_json gpu_provenance(const kernels::GpuInfo& gpu) {
  Provenance p = Provenance::current();
  p.gpu = gpu.name;
  p.gpu_driver = gpu.driver;
  p.cuda_runtime = gpu.runtime;
  nlohmann::ordered_json j = p.to_json();
  j["gpu_arch"] = gpu.arch;
  return j;
}

void write_json(const std::string& path, const nlohmann::ordered_json& doc) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p);
  out << doc.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write '" + path + "'");
}

}  // namespace lowbit::cli
