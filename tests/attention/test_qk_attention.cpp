// quantized_qk_attention (the SageAttention2 Table 3/9 setting): NaN/Inf in Q, K, V are reported
// as the inputs hold them and refused unless both specs propagate.
#include <catch2/catch.hpp>

#include <limits>

#include "emulation/attention/qk_attention.hpp"
#include "tests/quant/tensors.hpp"

using namespace lowbit;
using namespace lowbit::quant;
using namespace lowbit::attention;

namespace {
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("attention inputs are scanned as given: one NaN smoothed over a block is still one value", "[bad-input]") {
  // Smoothing Q with block 128 turns one NaN at [130, 5] into a NaN mean for channel 5 of rows
  // 128..255; the scan runs before it, so the report is the input's.
  MatrixF q = test::normal_tensor(256, 64, 1), k = test::normal_tensor(192, 64, 2), v = test::normal_tensor(192, 32, 3);
  const ThreadTiling t{atoms::mma_m16n8k64_s4, 4, 128, 64};
  QkAttentionConfig config{presets::int4(grouping::per_thread(t, Operand::q)),
                           presets::int4(grouping::per_thread(t, Operand::k))};
  REQUIRE(config.smooth_q);
  REQUIRE(config.q_smooth_block == 128);
  q(130, 5) = kNaN;
  CHECK_THROWS_WITH(quantized_qk_attention(q, k, v, config),
                    Catch::Contains("Q: 1 non-finite value (1 NaN, 0 Inf), the first at [130, 5] (NaN)"));
  q(130, 5) = 0;
  k(7, 63) = -kInf;
  k(100, 0) = kInf;
  CHECK_THROWS_WITH(quantized_qk_attention(q, k, v, config, {"q.npy", "k.npy head 2", "v.npy"}),
                    Catch::Contains("k.npy head 2: 2 non-finite values (0 NaN, 2 Inf), the first at [7, 63] (Inf)"));
  k = test::normal_tensor(192, 64, 2);
  v(191, 31) = kNaN;
  CHECK_THROWS_WITH(quantized_qk_attention(q, k, v, config), Catch::Contains("V: 1 non-finite value") &&
                                                                 Catch::Contains("[191, 31]"));
  // One spec propagating is not enough: propagation is for the whole attention.
  config.q_spec.nonfinite = NonFinitePolicy::propagate;
  CHECK_THROWS_WITH(quantized_qk_attention(q, k, v, config), Catch::Contains("V: 1 non-finite value"));
  // Both propagate: the result carries the reports of the inputs as given.
  config.k_spec.nonfinite = NonFinitePolicy::propagate;
  q(130, 5) = kNaN;
  const QkAttentionResult r = quantized_qk_attention(q, k, v, config);
  CHECK(r.q_nonfinite.count() == 1);
  CHECK(r.q_nonfinite.first_index == 130 * 64 + 5);
  CHECK_FALSE(r.k_nonfinite.any());
  CHECK(r.v_nonfinite.nan_count == 1);
  CHECK(r.v_nonfinite.first_index == 191 * 32 + 31);
  // With V clean, the NaN reaches exactly the rows whose Q block mean holds it (128..255): their
  // per-thread groups are poisoned (INT4 has no NaN) and so is their Delta S.
  const MatrixD o = quantized_qk_attention(q, k, test::normal_tensor(192, 32, 3), config).output;
  CHECK(o.topRows(128).allFinite());
  CHECK(o.bottomRows(128).array().isNaN().all());
}
