// WideAccumulation (the accumulation of an instruction's model on float operands) against the
// engine (mma::gemm), bit for bit, on operands the instruction takes: random normal values and
// zeros (sums kept finite), chained over several k steps, C entering aligned or added after, FP22, fp32 and fp16
// accumulators, interleaved chunks.
#include <catch2/catch.hpp>

#include <bit>
#include <random>

#include "emulation/convert.hpp"
#include "emulation/mma/gemm.hpp"
#include "emulation/mma/wide.hpp"

using namespace lowbit;
using namespace lowbit::mma;

namespace {

// A random code of f that is zero (1 in 8) or a normal value in [2^-4, 2^4] (at most 1/16 of
// the range where f's normals do not reach): the sums stay finite in every accumulator,
// fp16's included (the wide model has no Inf/NaN rules).
Code normal_code(const Format& f, std::mt19937_64& rng) {
  if ((rng() & 7) == 0) return 0;
  for (;;) {
    const Code c = Code(rng() & f.code_count_minus_one());
    const double v = std::fabs(decode(f, c));
    if (std::isfinite(v) && v >= min_normal(f) && v >= 0x1p-4 && v <= 0x1p4) return c;
  }
}

float accumulator_float(const Format& f, std::uint32_t bits) {
  return f == formats::fp16 ? float(decode(formats::fp16, bits)) : std::bit_cast<float>(bits);
}

}  // namespace

TEST_CASE("the wide accumulation equals the engine bit for bit on normal operands", "[mma][wide]") {
  const std::pair<const char*, const char*> instructions[]{
      {"sm_90", "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"},
      {"sm_90", "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e4m3"},
      {"sm_90", "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"},
      {"sm_90", "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16"},
      {"sm_90", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"},
      {"sm_90", "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16"},
      {"sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"},
      {"sm_89", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"},
      {"sm_120", "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32"},
  };
  std::mt19937_64 rng(7);
  for (const auto& [arch, name] : instructions) {
    const Instruction in = find_instruction(arch, name);
    const WideAccumulation wide(in);
    const int M = 8, N = 8, K = 4 * in.atom.k;
    std::size_t compared = 0, differ = 0;
    for (int trial = 0; trial < 50; ++trial) {
      MatrixCode a(M, K), b(K, N);
      for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = normal_code(in.atom.a, rng);
      for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = normal_code(in.atom.b, rng);
      const MatrixCode c = MatrixCode::Zero(M, N);
      const MatrixCode d = gemm(in, {a, b, c});
      std::vector<float> av(static_cast<std::size_t>(K)), bv(static_cast<std::size_t>(K * N));
      for (int j = 0; j < K; ++j)
        for (int n = 0; n < N; ++n) bv[std::size_t(j * N + n)] = float(decode(in.atom.b, b(j, n)));
      for (int m = 0; m < M; ++m) {
        for (int j = 0; j < K; ++j) av[std::size_t(j)] = float(decode(in.atom.a, a(m, j)));
        for (int n = 0; n < N; ++n) {
          const float w = wide.dot(av.data(), bv.data() + n, N, K, 0.0f);
          const float e = accumulator_float(in.atom.d, d(m, n));
          ++compared;
          if (std::bit_cast<std::uint32_t>(w) != std::bit_cast<std::uint32_t>(e)) {
            if (differ++ < 3) WARN(name << " row " << m << " col " << n << ": wide " << w << " engine " << e);
          }
        }
      }
    }
    INFO(arch << " " << name);
    CHECK(compared == 50 * 64);
    CHECK(differ == 0);
  }
}

TEST_CASE("the wide accumulation: what it refuses and how it rounds", "[mma][wide]") {
  // FP22 truncates: 1 + 2^-14 is not an e8m13 number, the sum is cut toward zero.
  const Instruction fp22 = find_instruction("sm_90", "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3");
  const WideAccumulation w(fp22);
  std::vector<float> a(32, 0.0f), b(32, 0.0f);
  a[0] = 1.0f, b[0] = 1.0f, a[1] = 0x1p-14f, b[1] = 1.0f;
  CHECK(w.dot(a.data(), b.data(), 1, 32, 0.0f) == 1.0f);
  a[1] = 0x1p-13f;
  CHECK(w.dot(a.data(), b.data(), 1, 32, 0.0f) == 1.0f + 0x1p-13f);
  CHECK_THROWS_WITH(w.dot(a.data(), b.data(), 1, 31, 0.0f), Catch::Contains("not a multiple of k = 32"));
  // Integer instructions: the exact sum, rounded once.
  const WideAccumulation s8(find_instruction("sm_90", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"));
  a.assign(32, 0.5f);
  b.assign(32, 3.0f);
  CHECK(s8.dot(a.data(), b.data(), 1, 32, 1.0f) == 49.0f);
  CHECK_THROWS_WITH(
      WideAccumulation(find_instruction(
          "sm_120", "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0")),
      Catch::Contains("per-product block scales"));
}
