// lowbit_sage2.h over sage2_attention.hpp: the C records become a Sage2Problem (lowbit_sage2.hpp),
// every exception a status with its text.
#include "kernels/attention/lowbit_sage2.h"
#include "kernels/attention/lowbit_sage2.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

#include "kernels/attention/sage2_attention.hpp"
#include "kernels/device.hpp"
#include "numerics/provenance.hpp"

namespace sage2 = lowbit::kernels::attention;

struct lowbit_sage2_workspace {
  sage2::Sage2Problem problem;
  sage2::Sage2Workspace buffers;
};

#define LOWBIT_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

sage2::Sage2Problem to_problem(const lowbit_sage2_problem* c) {
  if (c == nullptr) throw std::invalid_argument("lowbit_sage2: the problem is a null pointer");
  if (auto why = sage2::invalid_field(*c)) throw std::invalid_argument("lowbit_sage2: " + *why);
  const sage2::Sage2Problem p = sage2::to_sage2_problem(*c);
  if (auto why = p.validate()) throw std::invalid_argument("lowbit_sage2: " + *why);
  return p;
}

lowbit_sage2_workspace& require(lowbit_sage2_workspace* workspace) {
  if (workspace == nullptr) throw std::invalid_argument("lowbit_sage2: the workspace is a null pointer");
  return *workspace;
}

// Runs f; LOWBIT_SAGE2_OK when it returned, else the status of its exception (std::invalid_argument:
// refused; any other: failed) with its text in error (truncated, NUL-terminated).
template <class F>
int report(char* error, std::size_t error_size, F&& f) noexcept {
  std::string why;
  int status = LOWBIT_SAGE2_FAILED;
  try {
    f();
    return LOWBIT_SAGE2_OK;
  } catch (const std::invalid_argument& e) {
    why = e.what();
    status = LOWBIT_SAGE2_INVALID;
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
    why = "lowbit_sage2: an unknown exception";
  }
  if (error != nullptr && error_size > 0) {
    const std::size_t n = std::min(why.size(), error_size - 1);
    std::memcpy(error, why.data(), n);
    error[n] = '\0';
  }
  return status;
}

}  // namespace

LOWBIT_EXPORT int lowbit_sage2_abi_version(void) { return LOWBIT_SAGE2_ABI_VERSION; }

LOWBIT_EXPORT const char* lowbit_sage2_provenance(void) {
  static const std::string text = []() -> std::string {
    try {
      lowbit::Provenance p = lowbit::Provenance::current();
      if (const auto gpu = lowbit::kernels::first_gpu()) {
        p.gpu = gpu->name;
        p.gpu_driver = gpu->driver;
        p.cuda_runtime = gpu->runtime;
      }
      return p.to_json().dump();
    } catch (const std::exception& e) {
      return nlohmann::json{{"error", e.what()}}.dump();
    }
  }();
  return text.c_str();
}

LOWBIT_EXPORT int lowbit_sage2_validate(const lowbit_sage2_problem* problem, char* error, size_t error_size) {
  return report(error, error_size, [&] { to_problem(problem); });
}

LOWBIT_EXPORT int lowbit_sage2_workspace_create(const lowbit_sage2_problem* problem, lowbit_sage2_workspace** workspace,
                                                char* error, size_t error_size) {
  if (workspace != nullptr) *workspace = nullptr;
  return report(error, error_size, [&] {
    if (workspace == nullptr) throw std::invalid_argument("lowbit_sage2: the workspace's address is a null pointer");
    const sage2::Sage2Problem p = to_problem(problem);
    *workspace = new lowbit_sage2_workspace{p, sage2::Sage2Workspace(p)};
  });
}

LOWBIT_EXPORT void lowbit_sage2_workspace_destroy(lowbit_sage2_workspace* workspace) { delete workspace; }

LOWBIT_EXPORT int lowbit_sage2_quantize(lowbit_sage2_workspace* workspace, const void* q, const void* k, const void* v,
                                        uintptr_t stream, char* error, size_t error_size) {
  return report(error, error_size, [&] {
    const lowbit_sage2_workspace& w = require(workspace);
    sage2::sage2_quantize(w.problem, q, k, v, w.buffers.buffers(), stream);
  });
}

LOWBIT_EXPORT int lowbit_sage2_attention_quantized(lowbit_sage2_workspace* workspace, void* out, float* lse,
                                                   uintptr_t stream, char* error, size_t error_size) {
  return report(error, error_size, [&] {
    const lowbit_sage2_workspace& w = require(workspace);
    sage2::sage2_attention_quantized(w.problem, w.buffers.buffers(), out, lse, stream);
  });
}

LOWBIT_EXPORT int lowbit_sage2_attention(lowbit_sage2_workspace* workspace, const void* q, const void* k, const void* v,
                                         void* out, float* lse, uintptr_t stream, char* error, size_t error_size) {
  return report(error, error_size, [&] {
    const lowbit_sage2_workspace& w = require(workspace);
    sage2::sage2_attention(w.problem, q, k, v, w.buffers, out, lse, stream);
  });
}

LOWBIT_EXPORT int lowbit_sage2_sm_clock_mhz(uintptr_t stream, double* mhz, char* error, size_t error_size) {
  return report(error, error_size, [&] {
    if (mhz == nullptr) throw std::invalid_argument("lowbit_sage2: mhz is a null pointer");
    *mhz = lowbit::kernels::sm_clock_mhz(stream);
  });
}
