// What the GPU subcommands share: finding the GPU (or skipping), provenance, result files.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/device.hpp"

namespace lowbit::cli {

// The exit status of a check that could not run here (no GPU); ctest reports it as skipped.
inline constexpr int kSkipped = 77;

// The first GPU, or nothing after printing "lowbit <command>: no GPU found; skipped" to stderr.
std::optional<kernels::GpuInfo> require_gpu(const char* command);

// Provenance of this process (commit, date, host, CPU) with the GPU's name, arch, driver, runtime.
nlohmann::ordered_json gpu_provenance(const kernels::GpuInfo& gpu);

// Writes doc (indented) to path, creating missing parent folders; throws with the path on failure.
void write_json(const std::string& path, const nlohmann::ordered_json& doc);

}  // namespace lowbit::cli
