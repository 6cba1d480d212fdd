// The integer engine against the exact-rational reference, bit for bit, on random operands for
// every modeled instruction, at tile level and through the matrix-level K loop.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "tests/mma/support.hpp"

using namespace lowbit;
using namespace lowbit::mma;
using namespace lowbit::mma::test;

namespace {

MatrixCode random_codes(const Format& f, Eigen::Index rows, Eigen::Index cols, Mix mix, std::mt19937_64& rng) {
  MatrixCode m(rows, cols);
  for (auto& x : m.reshaped()) x = random_code(f, mix, rng);
  return m;
}

MatrixCode random_accumulators(const Format& f, Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  MatrixCode m(rows, cols);
  for (auto& x : m.reshaped()) {
    if (f == formats::fp32) x = random_accumulator(rng);
    else x = std::uint32_t(rng()) & f.code_count_minus_one();
  }
  return m;
}

struct Operands {
  MatrixCode a, b, c, scale_a, scale_b;
  GemmOperands view(const Atom& at) const {
    return {a, b, c, at.block_scaled() ? &scale_a : nullptr, at.block_scaled() ? &scale_b : nullptr};
  }
};

Operands random_operands(const Atom& at, Eigen::Index M, Eigen::Index N, Eigen::Index K, Mix mix, bool fp32_c,
                         std::mt19937_64& rng) {
  Operands o;
  o.a = random_codes(at.a, M, K, mix, rng);
  o.b = random_codes(at.b, K, N, mix, rng);
  o.c = random_accumulators(fp32_c ? formats::fp32 : at.c, M, N, rng);
  if (at.block_scaled()) {
    // Scales near 1 (codes 120..135 of UE8M0, or any UE4M3 byte) so products stay in range.
    const auto scale = [&](Eigen::Index r, Eigen::Index c) {
      MatrixCode s(r, c);
      for (auto& x : s.reshaped())
        x = at.scale == formats::ue8m0 ? Code(120 + rng() % 16) : random_code(at.scale, Mix::uniform, rng);
      return s;
    };
    o.scale_a = scale(M, K / at.scale_block);
    o.scale_b = scale(K / at.scale_block, N);
  }
  return o;
}

void expect_equal(const MatrixCode& engine, const MatrixCode& reference, const std::string& what) {
  REQUIRE(engine.rows() == reference.rows());
  std::size_t differing = 0;
  for (Eigen::Index i = 0; i < engine.size(); ++i) differing += engine.data()[i] != reference.data()[i];
  INFO(what);
  CHECK(differing == 0);
}

}  // namespace

TEST_CASE("every modeled instruction: engine == rational reference on random operands", "[mma][differential]") {
  std::mt19937_64 rng(2024);
  std::size_t compared = 0;
  for (const auto& name : instruction_names()) {
    const Instruction in = find_instruction(name.arch, name.name);
    if (name.name.find(fmt::format("n{}k", in.atom.n)) != std::string::npos && in.atom.n > 16) continue;  // the wide N twin
    for (Mix mix : {Mix::uniform, Mix::narrow, Mix::tiny, Mix::finite}) {
      const Operands o = random_operands(in.atom, 3, 2, in.atom.k, mix, false, rng);
      expect_equal(gemm(in, o.view(in.atom)), reference_gemm(in, o.view(in.atom)), name.arch + " " + name.name);
      compared += 6;
    }
  }
  CHECK(compared > 4000);
}

TEST_CASE("whole tiles: engine == rational reference", "[mma][differential]") {
  std::mt19937_64 rng(99);
  for (const auto& [arch, name] : std::vector<std::pair<const char*, const char*>>{
           {"sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"},
           {"sm_90", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32"},
           {"sm_90", "wgmma.mma_async.sync.aligned.m64n16k32.f32.e5m2.e4m3"},
           {"sm_89", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"},
           {"sm_80", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"},
           {"sm_120", "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"},
       }) {
    const Instruction in = find_instruction(arch, name);
    const Atom& at = in.atom;
    for (Mix mix : {Mix::uniform, Mix::narrow}) {
      const Operands o = random_operands(at, at.m, at.n, at.k, mix, false, rng);
      const TileInputs inputs{{o.a.data(), std::size_t(o.a.size())},
                              {o.b.data(), std::size_t(o.b.size())},
                              {o.c.data(), std::size_t(o.c.size())},
                              {o.scale_a.data(), std::size_t(o.scale_a.size())},
                              {o.scale_b.data(), std::size_t(o.scale_b.size())}};
      INFO(name);
      CHECK(execute(in, inputs) == reference_execute(in, inputs));
    }
  }
}

TEST_CASE("the K loop (chained, flushed into fp32, padded): engine == reference", "[mma][differential][gemm]") {
  std::mt19937_64 rng(5);
  for (const auto& [arch, name] : std::vector<std::pair<const char*, const char*>>{
           {"sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"},
           {"sm_90", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"},
           {"sm_90", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"},
           {"sm_90", "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"},
           {"sm_80", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"},
           {"sm_90", "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32"},
           {"sm_120", "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m3.e3m2.f32.ue8m0"},
       }) {
    const Instruction in = find_instruction(arch, name);
    const Atom& at = in.atom;
    for (int flush : {0, 1, 2}) {
      if (flush && at.d == formats::s32) continue;
      for (bool pad : {false, true}) {
        if (pad && at.block_scaled()) continue;
        const Eigen::Index K = 3 * at.k + (pad ? at.k / 2 + 1 : 0);
        const Operands o = random_operands(at, 5, 3, K, Mix::narrow, flush > 0, rng);
        const KLoop loop{flush, pad};
        expect_equal(gemm(in, o.view(at), loop), reference_gemm(in, o.view(at), loop),
                     fmt::format("{} flush {} K {}", name, flush, K));
      }
    }
  }
}

TEST_CASE("the K loop is the instruction chained (and flushed) as a kernel does", "[mma][gemm]") {
  // Built from execute() alone: no reference arithmetic involved.
  std::mt19937_64 rng(11);
  const Instruction in = find_instruction("sm_90", "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3");
  const Atom& at = in.atom;
  const Eigen::Index K = 4 * at.k;
  const Operands o = random_operands(at, at.m, at.n, K, Mix::finite, true, rng);
  const auto step = [&](int s, const MatrixCode& c) {
    const MatrixCode a = o.a.middleCols(s * at.k, at.k), b = o.b.middleRows(s * at.k, at.k);
    const auto d = execute(in, {{a.data(), std::size_t(a.size())}, {b.data(), std::size_t(b.size())},
                                {c.data(), std::size_t(c.size())}});
    return MatrixCode(MatrixView<std::uint32_t>(d.data(), at.m, at.n));
  };
  // One accumulator through all four MMAs.
  MatrixCode chained = o.c;
  for (int s = 0; s < 4; ++s) chained = step(s, chained);
  CHECK(gemm(in, o.view(at)) == chained);
  // Two MMAs per register, each register added into the fp32 accumulator C.
  const MatrixCode zero = MatrixCode::Zero(at.m, at.n);
  MatrixCode outer = o.c;
  for (int s = 0; s < 4; s += 2) {
    const MatrixCode inner = step(s + 1, step(s, zero));
    for (Eigen::Index i = 0; i < outer.size(); ++i) {
      const float sum = std::bit_cast<float>(outer.data()[i]) + std::bit_cast<float>(inner.data()[i]);
      outer.data()[i] = std::isnan(sum) ? 0x7fff'ffffu : std::bit_cast<std::uint32_t>(sum);
    }
  }
  CHECK(gemm(in, o.view(at), KLoop{2}) == outer);
}

TEST_CASE("GEMM inputs that do not fit are errors naming the operand", "[mma][gemm]") {
  const Instruction in = find_instruction("sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
  const MatrixCode a = MatrixCode::Zero(4, 20), b = MatrixCode::Zero(20, 3), c = MatrixCode::Zero(4, 3);
  CHECK_THROWS_WITH(gemm(in, {a, b, c}), Catch::Contains("K = 20 is not a multiple of the instruction's k = 16"));
  CHECK_NOTHROW(gemm(in, {a, b, c}, KLoop{0, true}));
  const MatrixCode b_wrong = MatrixCode::Zero(16, 3);
  CHECK_THROWS_WITH(gemm(in, {a, b_wrong, c}, KLoop{0, true}), Catch::Contains("B is 16 x 3, expected 20 x 3"));
  MatrixCode wide = a;
  wide(1, 2) = 0x1'0000;
  CHECK_THROWS_WITH(gemm(in, {wide, b, c}, KLoop{0, true}), Catch::Contains("A element (1, 2) is 0x10000"));
  CHECK_THROWS_WITH(gemm(in, {a, b, c}, KLoop{-1, true}), Catch::Contains("negative"));
  const Instruction s8 = find_instruction("sm_90", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32");
  const MatrixCode a8 = MatrixCode::Zero(2, 32), b8 = MatrixCode::Zero(32, 2), c8 = MatrixCode::Zero(2, 2);
  CHECK_THROWS_WITH(gemm(s8, {a8, b8, c8}, KLoop{1}), Catch::Contains("integer accumulators"));
  const std::vector<Code> tile_a(16 * 16, 0), tile_b(16 * 8, 0);
  const std::vector<std::uint32_t> tile_c(7, 0);
  CHECK_THROWS_WITH(execute(in, {tile_a, tile_b, tile_c}), Catch::Contains("C has 7 elements, the instruction takes 128"));
}
