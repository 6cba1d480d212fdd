// SageBwd's kernels without a GPU (kernels/attention/sage_bwd_gpu.hpp): what they take, their
// Hopper twin, and the bitwise comparison of two results (attention::compare_bits).
#include <catch2/catch.hpp>

#include <limits>

#include "kernels/attention/sage_bwd_gpu.hpp"

using namespace lowbit;
namespace gpu_bwd = lowbit::kernels::attention;

namespace {
struct Shapes {
  Tensor4 q, k, v, d_out;
};
Shapes shapes(int heads, int kv_heads, int queries, int keys, int dim, int value_dim) {
  return {Tensor4(1, heads, queries, dim), Tensor4(1, kv_heads, keys, dim), Tensor4(1, kv_heads, keys, value_dim),
          Tensor4(1, heads, queries, value_dim)};
}
std::string why(const attention::SageBwdConfig& c, const Shapes& s) {
  return gpu_bwd::gpu_sage_bwd_unsupported(c, s.q, s.k, s.v, s.d_out).value_or("");
}
}  // namespace

TEST_CASE("sage_bwd's Hopper twin is sm_90 where a product is FP16") {
  CHECK(gpu_bwd::sage_bwd_hopper_twin(attention::sagebwd_preset("sagebwd")).arch == "sm_90");
  CHECK(gpu_bwd::sage_bwd_hopper_twin(attention::sagebwd_preset("fp16")).arch == "sm_90");
  CHECK(gpu_bwd::sage_bwd_hopper_twin(attention::sagebwd_preset("sagebwd-int8-dp")).arch == "sm_89");
}

TEST_CASE("the sage_bwd kernels take the twins of every preset, tails, GQA and d of 64 or 128") {
  for (const std::string& preset : attention::sagebwd_presets()) {
    const attention::SageBwdConfig twin = gpu_bwd::sage_bwd_hopper_twin(attention::sagebwd_preset(preset));
    CHECK(why(twin, shapes(4, 2, 77, 190, 64, 64)).empty());
    CHECK(why(twin, shapes(3, 1, 150, 64, 128, 128)).empty());
    CHECK(why(twin, shapes(1, 1, 1, 1, 128, 64)).empty());
  }
}

TEST_CASE("the sage_bwd kernels say why they refuse a config or shapes") {
  const Shapes ok = shapes(4, 2, 100, 100, 64, 64);
  CHECK(why(attention::sagebwd_preset("sagebwd"), ok).find("arch sm_89") != std::string::npos);
  CHECK(why(attention::sagebwd_preset("sagebwd-int8-dp"), ok).empty());
  attention::SageBwdConfig tiles = gpu_bwd::sage_bwd_hopper_twin(attention::sagebwd_preset("sagebwd"));
  tiles.block_kv = 128;
  CHECK(why(tiles, ok).find("tiles 64 x 128") != std::string::npos);
  const attention::SageBwdConfig twin = gpu_bwd::sage_bwd_hopper_twin(attention::sagebwd_preset("fp16"));
  CHECK(why(twin, shapes(4, 2, 100, 100, 96, 96)).find("d = 96") != std::string::npos);
  CHECK(why(twin, shapes(4, 3, 100, 100, 64, 64)).find("shapes do not fit") != std::string::npos);
  Shapes bad_d_out = ok;
  bad_d_out.d_out = Tensor4(1, 4, 99, 64);
  CHECK(why(twin, bad_d_out).find("dO [1, 4, 99, 64]") != std::string::npos);
  CHECK_THROWS_WITH(gpu_bwd::gpu_sage_bwd(tiles, ok.q, ok.k, ok.v, ok.d_out, false),
                    Catch::Contains("gpu_sage_bwd: tiles 64 x 128"));
}

TEST_CASE("compare_bits counts every differing fp32 bit pattern and names the first") {
  attention::BackwardResult a{{1.0f, 2.0f}, {0.5f}, {0.0f, 3.0f}, {4.0f}, {5.0f}};
  attention::BackwardResult b = a;
  b.dq = {-0.0f, 3.5f};  // -0 differs from +0
  const auto c = attention::compare_bits(a, b);
  REQUIRE(c.size() == 5);
  CHECK(c[0].tensor == "O");
  CHECK(c[0].differ == 0);
  CHECK(c[2].tensor == "dQ");
  CHECK(c[2].differ == 2);
  CHECK(c[2].first == 0);
  CHECK(c[2].first_a == 0x00000000u);
  CHECK(c[2].first_b == 0x80000000u);
  CHECK(c[2].text("gpu", "emulated") == "dQ: 2 of 2 differ, the first at 0: gpu 0x00000000 vs emulated 0x80000000");
  CHECK(c[3].text() == "dK: 1 equal");
  b.dv.push_back(1.0f);
  CHECK_THROWS_WITH(attention::compare_bits(a, b), Catch::Contains("dV has 1 values against 2"));
}
