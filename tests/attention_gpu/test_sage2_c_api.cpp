// liblowbit_sage2.so's C interface (kernels/attention/lowbit_sage2.h) without a GPU: what it refuses
// and the text it returns, the error buffer's truncation, and null pointers answered, not followed.
// Its bits on the GPU: test_sage2_c_api_gpu.cpp.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/attention/lowbit_sage2.h"
#include "kernels/device.hpp"

namespace {

lowbit_sage2_problem valid_problem() {
  return {2, 4, 2, 300, 128, 1, LOWBIT_SAGE2_FP16, LOWBIT_SAGE2_BHND, LOWBIT_SAGE2_EXP2_SM90_EX2, LOWBIT_SAGE2_SERIAL};
}

// The call's status and its error text.
template <class Call>
std::pair<int, std::string> outcome(Call call) {
  char error[512];
  std::strcpy(error, "(untouched)");
  const int status = call(error, sizeof error);
  return {status, error};
}

std::string validation(const lowbit_sage2_problem& p) {
  return outcome([&](char* e, std::size_t n) { return lowbit_sage2_validate(&p, e, n); }).second;
}

}  // namespace

TEST_CASE("lowbit_sage2: the interface's version, its provenance and a problem the kernels take") {
  CHECK(lowbit_sage2_abi_version() == LOWBIT_SAGE2_ABI_VERSION);
  const nlohmann::json provenance = nlohmann::json::parse(lowbit_sage2_provenance());
  CHECK(provenance.at("git_sha").get<std::string>().size() >= 7);
  CHECK(provenance.contains("gpu") == lowbit::kernels::first_gpu().has_value());
  const lowbit_sage2_problem p = valid_problem();
  const auto [status, error] = outcome([&](char* e, std::size_t n) { return lowbit_sage2_validate(&p, e, n); });
  CHECK(status == LOWBIT_SAGE2_OK);
  CHECK(error == "(untouched)");
}

TEST_CASE("lowbit_sage2: a problem the kernels refuse is named with the reason") {
  using Field = std::int32_t lowbit_sage2_problem::*;
  const std::vector<std::tuple<Field, int, std::string>> refused = {
      {&lowbit_sage2_problem::dtype, 2, "dtype must be 0 (fp16) or 1 (bf16), not 2"},
      {&lowbit_sage2_problem::layout, -1, "layout must be 0 (bhnd) or 1 (bnhd), not -1"},
      {&lowbit_sage2_problem::exp2, 7, "exp2 must be 0 (polynomial) or 1 (sm90-ex2), not 7"},
      {&lowbit_sage2_problem::schedule, 2, "schedule must be 0 (serial) or 1 (overlapped), not 2"},
      {&lowbit_sage2_problem::row_sum, 2, "row_sum must be 0 (lanes) or 1 (pv), not 2"},
      {&lowbit_sage2_problem::causal, 5, "causal must be 0 or 1, not 5"},
      {&lowbit_sage2_problem::heads_q, 3, "heads_q=3 is not a multiple of heads_kv=2 (GQA groups whole Q heads per KV head)"},
      {&lowbit_sage2_problem::tokens, 0, "batch, heads_q, heads_kv and tokens must be >= 1"},
      {&lowbit_sage2_problem::head_dim, 96, "head_dim=96: the sage2-8b recipe has head dimensions 64 and 128"},
  };
  for (const auto& [field, value, reason] : refused) {
    lowbit_sage2_problem p = valid_problem();
    p.*field = value;
    CHECK(validation(p) == "lowbit_sage2: " + reason);
  }
  // The row sums by P V have instances with MUFU.EX2 and the serial schedule only.
  lowbit_sage2_problem pv = valid_problem();
  pv.row_sum = LOWBIT_SAGE2_ROW_SUM_PV;
  CHECK(validation(pv) == "(untouched)");
  for (Field field : {&lowbit_sage2_problem::exp2, &lowbit_sage2_problem::schedule}) {
    lowbit_sage2_problem p = pv;
    p.*field = field == &lowbit_sage2_problem::exp2 ? LOWBIT_SAGE2_EXP2_POLYNOMIAL : LOWBIT_SAGE2_OVERLAPPED;
    CHECK_THAT(validation(p), Catch::Contains("row sums by P V (row-sum=pv) are built for the serial schedule"));
  }
}

TEST_CASE("lowbit_sage2: the error text is cut to the buffer, NUL-terminated, and a null buffer is allowed") {
  lowbit_sage2_problem p = valid_problem();
  p.dtype = 9;
  char error[8];
  std::memset(error, 'x', sizeof error);
  CHECK(lowbit_sage2_validate(&p, error, sizeof error) == LOWBIT_SAGE2_INVALID);
  CHECK(std::string(error) == "lowbit_");
  CHECK(lowbit_sage2_validate(&p, nullptr, 0) == LOWBIT_SAGE2_INVALID);
  CHECK(lowbit_sage2_validate(&p, error, 0) == LOWBIT_SAGE2_INVALID);
}

TEST_CASE("lowbit_sage2: null pointers are answered, not followed") {
  CHECK(outcome([](char* e, std::size_t n) { return lowbit_sage2_validate(nullptr, e, n); }) ==
        std::pair<int, std::string>{LOWBIT_SAGE2_INVALID, "lowbit_sage2: the problem is a null pointer"});
  const lowbit_sage2_problem p = valid_problem();
  CHECK(outcome([&](char* e, std::size_t n) { return lowbit_sage2_workspace_create(&p, nullptr, e, n); }) ==
        std::pair<int, std::string>{LOWBIT_SAGE2_INVALID, "lowbit_sage2: the workspace's address is a null pointer"});
  const std::pair<int, std::string> no_workspace{LOWBIT_SAGE2_INVALID, "lowbit_sage2: the workspace is a null pointer"};
  int q = 0;
  float lse = 0;
  CHECK(outcome([&](char* e, std::size_t n) { return lowbit_sage2_quantize(nullptr, &q, &q, &q, 0, e, n); }) == no_workspace);
  CHECK(outcome([&](char* e, std::size_t n) { return lowbit_sage2_attention_quantized(nullptr, &q, &lse, 0, e, n); }) ==
        no_workspace);
  CHECK(outcome([&](char* e, std::size_t n) { return lowbit_sage2_attention(nullptr, &q, &q, &q, &q, &lse, 0, e, n); }) ==
        no_workspace);
  lowbit_sage2_workspace_destroy(nullptr);
  CHECK(outcome([](char* e, std::size_t n) { return lowbit_sage2_sm_clock_mhz(0, nullptr, e, n); }) ==
        std::pair<int, std::string>{LOWBIT_SAGE2_INVALID, "lowbit_sage2: mhz is a null pointer"});
}

TEST_CASE("lowbit_sage2: the SM clock: CUDA's reason without a GPU, a clock an SM can run at with one") {
  double mhz = -1;
  const auto [status, error] = outcome([&](char* e, std::size_t n) { return lowbit_sage2_sm_clock_mhz(0, &mhz, e, n); });
  if (!lowbit::kernels::first_gpu()) {
    CHECK(status == LOWBIT_SAGE2_FAILED);
    CHECK(error.find("sm_clock_mhz") != std::string::npos);
    return;
  }
  REQUIRE(status == LOWBIT_SAGE2_OK);
  CHECK(mhz > 100);
  CHECK(mhz < 3000);
}

TEST_CASE("lowbit_sage2: a workspace without a GPU is refused with CUDA's reason, and with one its pointers are checked") {
  const lowbit_sage2_problem p = valid_problem();
  lowbit_sage2_workspace* workspace = reinterpret_cast<lowbit_sage2_workspace*>(&workspace);  // must be reset
  const auto [status, error] =
      outcome([&](char* e, std::size_t n) { return lowbit_sage2_workspace_create(&p, &workspace, e, n); });
  if (!lowbit::kernels::first_gpu()) {
    CHECK(status == LOWBIT_SAGE2_FAILED);
    CHECK(workspace == nullptr);
    CHECK(error.find("cudaMalloc") != std::string::npos);
    return;
  }
  REQUIRE(status == LOWBIT_SAGE2_OK);
  REQUIRE(workspace != nullptr);
  const auto [null_status, null_error] = outcome(
      [&](char* e, std::size_t n) { return lowbit_sage2_attention(workspace, nullptr, nullptr, nullptr, nullptr, nullptr, 0, e, n); });
  CHECK(null_status == LOWBIT_SAGE2_INVALID);
  CHECK(null_error == "sage2 attention: q is a null pointer");
  lowbit_sage2_workspace_destroy(workspace);
}
