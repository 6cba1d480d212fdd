// Hand-built cases of the fused dot-product-add, each with its expected bits worked out by hand
// (in the comment beside it), checked against both the integer engine and the exact-rational
// reference. Where a rule is measured on hardware, published only, or our assumption, the case
// says so (docs/mma-models.md lists the rules).
#include <catch2/catch.hpp>

#include <cmath>

#include "tests/mma/support.hpp"

// Dot literals leave out the fields a case does not need (raw codes, scales).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

using namespace lowbit;
using namespace lowbit::mma;
using namespace lowbit::mma::test;

namespace {

const char* const kH16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
const char* const kBf16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
const char* const kH16Out = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16";
const char* const kSyncE4 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32";
const char* const kSyncE5 = "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32";
const char* const kWgE4 = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3";
const char* const kWgE5 = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2";
const char* const kWg16 = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16";

std::uint32_t both(const char* arch, const char* name, const Dot& dot) {
  const auto r = run_dot(find_instruction(arch, name), dot);
  INFO(name << " on " << arch);
  CHECK(r.engine == r.reference);
  return r.engine;
}

std::vector<double> with(std::vector<double> v, std::size_t size, double fill) {
  v.resize(size, fill);
  return v;
}

double two(int e) { return std::ldexp(1.0, e); }

}  // namespace

TEST_CASE("a dominant product truncates the others F bits below its leading bit", "[mma][arithmetic]") {
  // Hopper f16 (F = 25): 1024*1 sets E = 10, so terms are cut at 2^(10-25) = 2^-15. Fifteen
  // products 2^-8 * 2^-8 = 2^-16 each truncate to 0: D = 1024 = 0x44800000. (The exact sum
  // 1024 + 15*2^-16 would round toward zero to 1024 + 2^-13 = 0x44800001.)
  const Dot dot{with({1024}, 16, two(-8)), with({1}, 16, two(-8))};
  CHECK(both("sm_90", kH16, dot) == 0x4480'0000u);
}

TEST_CASE("a term exactly at the last kept bit survives, one bit below does not", "[mma][arithmetic]") {
  // 1024 - 1024 + 2^-7 * 2^-8: E = 10, 2^-15 is exactly one unit of 2^(10-25): D = 2^-15.
  CHECK(both("sm_90", kH16, {{1024, -1024, two(-7)}, {1, 1, two(-8)}}) == 0x3800'0000u);
  // 2^-8 * 2^-8 = 2^-16 is half a unit: truncated, the sum is an exact zero, D = +0.
  CHECK(both("sm_90", kH16, {{1024, -1024, two(-8)}, {1, 1, two(-8)}}) == 0x0000'0000u);
}

TEST_CASE("an exact zero sum is +0, also with C = -0 (recorded: the cancellation and specials tiles)", "[mma][arithmetic]") {
  // C = -0 and products that cancel: the model's integer sum has no sign. The H100 probe tiles
  // (families cancellation and specials: C = -0 with products cancelling or zero) pass with +0.
  CHECK(both("sm_90", kH16, {{1, -1}, {1, 1}, 0x8000'0000u}) == 0u);
  CHECK(both("sm_90", kWgE4, {{0}, {0}, 0x8000'0000u}) == 0u);
  CHECK(both("sm_90", kWgE4, {{-1}, {0}, 0x8000'0000u}) == 0u);
}

TEST_CASE("a nonzero sum that rounds to zero is +0 (measured on an H100)", "[mma][arithmetic]") {
  // bf16: -2^-90 * 2^-60 = -2^-150, kept by the truncation (E = e_zero = -133 cuts at 2^-158) but
  // below half the smallest binary32 subnormal 2^-149: RZ gives zero, and the tensor cores write
  // +0, not -0 (recorded tiny_products tiles; docs/mma-models.md).
  CHECK(both("sm_90", kBf16, {{-two(-90)}, {two(-60)}}) == 0u);
  // f16 accumulator: -2^-12 * 2^-14 = -2^-26 (kept: e_zero = -21 cuts at 2^-46), below half the
  // smallest f16 subnormal 2^-24: RNE to zero, written +0.
  CHECK(both("sm_90", kH16Out, {{-two(-12)}, {two(-14)}}) == 0u);
  // The same magnitude with a nonzero result keeps its sign: -2^-24 exactly is 0x8001.
  CHECK(both("sm_90", kH16Out, {{-two(-10)}, {two(-14)}}) == 0x8001u);
  // The published models of other GPUs keep MMA-Sim's rule, -0 (unmeasured: no such GPU here).
  // sm_80 fuses 8 products per chunk, and a later chunk that sums to an exact zero gives +0, so
  // the product sits in the last chunk (k = 8).
  const auto at_k8 = [](double v) { return with(with({}, 8, 0.0), 9, v); };
  CHECK(both("sm_80", kBf16, {at_k8(-two(-90)), at_k8(two(-60))}) == 0x8000'0000u);
  CHECK(both("sm_80", kH16Out, {at_k8(-two(-12)), at_k8(two(-14))}) == 0x8000u);
}

TEST_CASE("a subnormal input counts at the format's smallest normal exponent", "[mma][arithmetic]") {
  // f16 2^-24 (subnormal) * 2^15: exponent -14 + 15 = 1 although the value is 2^-9, so E = 1 and
  // terms are cut at 2^-24. The second product (1+2^-10)^2 * 2^-28 truncates to 0: D = 2^-9.
  const double s = two(-14) * (1 + two(-10));
  CHECK(both("sm_90", kH16, {{two(-24), s}, {two(15), s}}) == 0x3B00'0000u);
}

TEST_CASE("subnormal binary32 results round toward zero", "[mma][arithmetic]") {
  // bf16 2^-63 * 2^-63 = 2^-126, the smallest normal: 0x00800000.
  CHECK(both("sm_90", kBf16, {{two(-63)}, {two(-63)}}) == 0x0080'0000u);
  // (1+2^-7) 2^-63 * 2^-64 = 2^-127 + 2^-134: a subnormal, exactly 0x00400000 + 2^(149-134).
  CHECK(both("sm_90", kBf16, {{two(-63) * (1 + two(-7))}, {two(-64)}}) == 0x0040'8000u);
  // (1+2^-7) 2^-64 * 2^-80 = 2^-144 + 2^-151: the 2^-151 falls below the subnormal spacing 2^-149.
  CHECK(both("sm_90", kBf16, {{two(-64) * (1 + two(-7))}, {two(-80)}}) == 0x0000'0020u);
}

TEST_CASE("chunk boundaries: sm_80 fuses 8 products per step, sm_90 fuses 16", "[mma][arithmetic]") {
  // 1*1 + 2^-12*2^-12 in k 0..7, then -1*1 at k = 8.
  const Dot dot{with({1, two(-12), 0, 0, 0, 0, 0, 0, -1}, 16, 0), with({1, two(-12), 0, 0, 0, 0, 0, 0, 1}, 16, 0)};
  // sm_80 (L = 8, F = 24): the first chunk is 1 + 2^-24, rounded toward zero to binary32: 1.
  // The second chunk adds -1: D = +0.
  CHECK(both("sm_80", kH16, dot) == 0u);
  // sm_90 (L = 16, F = 25): one chunk keeps 2^-24 (a unit is 2^-25): D = 2^-24 = 0x33800000.
  CHECK(both("sm_90", kH16, dot) == 0x3380'0000u);
}

TEST_CASE("Hopper mma.sync FP8 deals k in pairs to two chained f16 MMAs (measured)", "[mma][arithmetic]") {
  // e5m2: 1*1 and 2^-12*2^-12 at k = 0, 1 (first HMMA: k mod 4 in {0,1}).
  // -1 at k = 2 goes to the second HMMA, after the first rounded 1 + 2^-24 to 1: D = +0.
  CHECK(both("sm_90", kSyncE5, {{1, two(-12), -1}, {1, two(-12), 1}}) == 0u);
  // -1 at k = 4 joins the first HMMA, which keeps 2^-24: D = 2^-24.
  CHECK(both("sm_90", kSyncE5, {{1, two(-12), 0, 0, -1}, {1, two(-12), 0, 0, 1}}) == 0x3380'0000u);
}

TEST_CASE("Hopper mma.sync FP8 unpacks to f16: an e4m3 subnormal is a normal f16 (measured)", "[mma][arithmetic]") {
  // e4m3 2^-9 (subnormal) * e5m2 2^15 = 2^6 at k = 0; 2^-1 * 2^-16 = 2^-17 at k = 1 (same HMMA).
  // Unpacked, 2^-9 is a normal f16 with exponent -9, so E = 6 and terms are cut at 2^(6-25) =
  // 2^-19: 2^-17 survives, D = 2^6 + 2^-17 = 0x42800001 (2^-17 is one ulp of 2^6). Read as an
  // e4m3 subnormal (exponent -6), E would be 9, the cut 2^-16, and D = 2^6 = 0x42800000.
  const Dot dot{{two(-9), two(-1)}, {two(15), two(-16)}};
  CHECK(both("sm_90", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32", dot) == 0x4280'0001u);
  Instruction not_unpacked = find_instruction("sm_90", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32");
  not_unpacked.model.fused.unpack_to.reset();
  const auto r = run_dot(not_unpacked, dot);
  CHECK(r.engine == r.reference);
  CHECK(r.engine == 0x4280'0000u);
}

namespace {
// Tiles of a Hopper mma.sync FP8 instruction where, in every row of A, products with an e4m3
// subnormal factor lead their chunks (large B codes at those k, small other products with bits
// as low as the formats allow): the case
// where unpacking to f16 moves a chunk's largest exponent. How many tiles D differs in, with and
// without unpacking.
int tiles_where_unpacking_matters(const char* name, int tiles) {
  const Instruction unpacked = find_instruction("sm_90", name);
  Instruction not_unpacked = unpacked;
  not_unpacked.model.fused.unpack_to.reset();
  const Atom& at = unpacked.atom;
  std::mt19937_64 rng(29);
  const auto band = [&](const Format& f, int lo, int hi) {  // random sign, exponent in [lo, hi], random mantissa
    const int e = lo + int(rng() % unsigned(hi - lo + 1));
    const double significand = 1.0 + double(rng() % (1u << f.mantissa_bits)) / double(1u << f.mantissa_bits);
    return code_of(f, (rng() & 1 ? -1.0 : 1.0) * std::ldexp(significand, e));
  };
  int differing = 0;
  for (int t = 0; t < tiles; ++t) {
    std::vector<Code> a(std::size_t(at.m * at.k)), b(std::size_t(at.k * at.n));
    std::vector<std::uint32_t> c(std::size_t(at.m * at.n));
    for (auto& x : a) x = band(at.a, -6, -3);
    for (auto& x : b) x = band(at.b, at.b.min_exponent(), at.b.min_exponent() + 3);  // fine low bits
    for (auto& x : c) x = rng() % 2 ? 0u : code_of(at.c, std::ldexp(double(rng() % 64), -10));
    for (int k = 0; k < at.k; k += 4) {  // k = 0, 4, ...: one subnormal-led product per chunk half
      for (int i = 0; i < at.m; ++i) a[std::size_t(i * at.k + k)] = Code(1 + rng() % 7) | (rng() & 1 ? at.a.sign_mask() : 0);
      for (int j = 0; j < at.n; ++j)  // one of the 16 largest finite codes
        b[std::size_t(k * at.n + j)] = (at.b.max_finite_magnitude() - Code(rng() % 16)) | (rng() & 1 ? at.b.sign_mask() : 0);
    }
    const TileInputs in{a, b, c};
    differing += execute(unpacked, in) != execute(not_unpacked, in);
  }
  return differing;
}
}  // namespace

TEST_CASE("unpacking fp8 to f16 changes D for mixed pairings only: e4m3 x e4m3 cannot tell", "[mma][arithmetic]") {
  // docs/mma-models.md gives the proof for e4m3 x e4m3: every product and every chained result is
  // a multiple of 2^-18, and a chunk led by a product with a subnormal factor has E <= -6 + 8, so
  // F = 25 keeps every bit either way; otherwise the largest exponent is the same in both readings.
  // The same tiles with e5m2 B (products down to 2^-25, a subnormal-led product up to 2^9) do
  // differ, which shows the tiles reach the case.
  CHECK(tiles_where_unpacking_matters("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32", 300) > 30);
  CHECK(tiles_where_unpacking_matters("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", 3000) == 0);
  CHECK(tiles_where_unpacking_matters("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16", 3000) == 0);
}

TEST_CASE("where C enters: aligned with the products (wgmma FP8) or added after (mma.sync FP8)", "[mma][arithmetic]") {
  // C = 1024, one product 2^-2 * 2^-2 = 2^-4.
  const Dot dot{{0.25}, {0.25}, fp32_bits(1024.0f)};
  // wgmma: C is a term: E = 10, F = 13 cuts at 2^-3, the product is lost: D = 1024.
  CHECK(both("sm_90", kWgE4, dot) == 0x4480'0000u);
  // mma.sync: the HMMAs give 2^-4 exactly, then an fp32 add: 1024.0625 = 0x44800200.
  CHECK(both("sm_90", kSyncE4, dot) == 0x4480'0200u);
}

TEST_CASE("FP22: every wgmma FP8 result keeps at most 14 significant bits", "[mma][arithmetic]") {
  // 1.5 + 1.5 + 2^-6 * 2^-7: E = 0 keeps 2^-13 in the sum 3 + 2^-13, but the output rounding to
  // e8m13 (13 fraction bits at 3 = 1.5 * 2^1) truncates it: D = 3 = 0x40400000. Binary32 would
  // keep it: 0x40400200.
  CHECK(both("sm_90", kWgE4, {{1.5, 1.5, two(-6)}, {1, 1, two(-7)}}) == 0x4040'0000u);
}

TEST_CASE("FP22: with A = B = 0, D is C with its 10 low mantissa bits cleared (measured)", "[mma][arithmetic]") {
  const Instruction wg8 = find_instruction("sm_90", kWgE4);
  const Instruction wg16 = find_instruction("sm_90", kWg16);
  std::mt19937_64 rng(7);
  std::size_t checked = 0;
  for (int round = 0; round < 40; ++round) {
    std::vector<std::uint32_t> c(64 * 8);
    for (auto& x : c) x = random_accumulator(rng);
    c[0] = 0x0000'03ffu, c[1] = 0x8000'03ffu, c[2] = 0x0000'0401u, c[3] = 0x7f7f'ffffu;  // edges
    const std::vector<Code> a8(64 * 32, 0), b8(32 * 8, 0), a16(64 * 16, 0), b16(16 * 8, 0);
    const auto d8 = execute(wg8, {a8, b8, c});
    const auto d16 = execute(wg16, {a16, b16, c});
    for (std::size_t i = 0; i < c.size(); ++i) {
      const float value = std::bit_cast<float>(c[i]);
      INFO("C = " << std::hex << c[i]);
      if (std::isnan(value)) {
        CHECK(d8[i] == 0x7fff'ffffu);  // canonical NaN (published)
        CHECK(d16[i] == 0x7fff'ffffu);
        continue;
      }
      const std::uint32_t cleared = c[i] & 0xffff'fc00u;
      // A result that truncates to zero is +0 (assumed, see "an exact zero sum is +0").
      CHECK(d8[i] == ((cleared & 0x7fff'ffffu) == 0 ? 0u : cleared));
      // Hopper f16 (F = 25) keeps all 24 bits of C.
      CHECK(d16[i] == ((c[i] & 0x7fff'ffffu) == 0 ? 0u : c[i]));
      ++checked;
    }
  }
  CHECK(checked > 19000);
}

TEST_CASE("NaN and Inf: propagation rules", "[mma][arithmetic]") {
  const std::uint32_t nan = 0x7fff'ffffu, inf = 0x7f80'0000u, minus_inf = 0xff80'0000u;
  const double infinity = HUGE_VAL;
  // Published (MMA-Sim) and assumed; no NaN/Inf inputs recorded yet.
  CHECK(both("sm_90", kWgE5, {{infinity}, {0}}) == nan);                  // Inf * 0
  CHECK(both("sm_90", kWgE5, {{infinity, -infinity}, {1, 1}}) == nan);    // +Inf + -Inf
  CHECK(both("sm_90", kWgE5, {{infinity, 1}, {1, 1}}) == inf);
  CHECK(both("sm_90", kWgE5, {{infinity}, {-1}}) == minus_inf);
  CHECK(both("sm_90", kWgE5, {{infinity}, {1}, minus_inf}) == nan);       // with C = -Inf
  CHECK(both("sm_90", kWgE5, {{}, {}, 0x7fc0'0001u}) == nan);              // a NaN C: canonical
  CHECK(both("sm_90", kWgE5, {{}, {1}, 0, {0x7f}}) == nan);                // e5m2 NaN code
  CHECK(both("sm_90", kWgE4, {{}, {1}, 0, {0xff}}) == nan);                // e4m3 NaN code (S.1111.111)
  CHECK(both("sm_90", kH16, {{}, {1}, 0, {0x7e01}}) == nan);               // f16 NaN with a payload
  // The mma.sync FP8 path: Inf from the HMMAs, then the fp32 add of C (IEEE).
  CHECK(both("sm_90", kSyncE5, {{infinity}, {1}, minus_inf}) == nan);
  CHECK(both("sm_90", kSyncE5, {{infinity}, {1}, fp32_bits(1.0f)}) == inf);
  // f16 accumulators: canonical NaN 0x7fff (published).
  CHECK(both("sm_90", kH16Out, {{infinity}, {0}}) == 0x7fffu);
}

TEST_CASE("a finite sum beyond binary32 is Inf although rounding is toward zero (measured)", "[mma][arithmetic]") {
  // The recorded bf16 tiles hold 15,979 such outputs, all +-Inf, none 0x7f7fffff.
  const double big = two(127);
  CHECK(both("sm_90", kBf16, {{big}, {big}}) == 0x7f80'0000u);              // 2^254
  CHECK(both("sm_90", kBf16, {{big}, {-big}}) == 0xff80'0000u);
  CHECK(both("sm_90", kBf16, {{big, big}, {1, 1}}) == 0x7f80'0000u);        // 2^127 + 2^127 = 2^128
  CHECK(both("sm_90", kBf16, {{big}, {1.5}}) == 0x7f40'0000u);              // 1.5 * 2^127 fits
  CHECK(both("sm_90", kBf16, {{big, -big}, {big, big}}) == 0u);             // 2^254 - 2^254: exact zero
  CHECK(both("sm_90", kH16Out, {{256}, {256}}) == 0x7c00u);                 // 65536 in f16: Inf
}

TEST_CASE("f16 accumulators round to nearest even (measured: H100 probe tiles)", "[mma][arithmetic]") {
  // C = 1 + 2^-10 (0x3c01) plus 2^-11: 1 + 1.5 ulp, a tie between 0x3c01 and 0x3c02: even.
  CHECK(both("sm_90", kH16Out, {{two(-11)}, {1}, 0x3c01u}) == 0x3c02u);
  // C = 1 plus 2^-11: a tie between 0x3c00 and 0x3c01: even.
  CHECK(both("sm_90", kH16Out, {{two(-11)}, {1}, 0x3c00u}) == 0x3c00u);
  // 1 + 2^-11 + 2^-20 is above the tie: up.
  CHECK(both("sm_90", kH16Out, {{two(-11), two(-10)}, {1, two(-10)}, 0x3c00u}) == 0x3c01u);
}

TEST_CASE("integer MMA: exact sums, wrapped or saturated (.satfinite)", "[mma][arithmetic]") {
  const char* wrap = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32";
  const char* sat = "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32";
  CHECK(both("sm_90", wrap, {{1}, {1}, 0x7fff'ffffu}) == 0x8000'0000u);
  CHECK(both("sm_90", sat, {{1}, {1}, 0x7fff'ffffu}) == 0x7fff'ffffu);
  CHECK(both("sm_90", wrap, {{-1}, {1}, 0x8000'0000u}) == 0x7fff'ffffu);
  CHECK(both("sm_90", sat, {{-1}, {1}, 0x8000'0000u}) == 0x8000'0000u);
  // u8 x s8: 32 * 255 * -128 = -1044480.
  CHECK(both("sm_90", "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32",
             {with({}, 32, 255), with({}, 32, -128)}) == std::uint32_t(-1044480));
  // s4: 64 * -8 * -8 = 4096.
  CHECK(both("sm_90", "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32", {with({}, 64, -8), with({}, 64, -8)}) == 4096u);
  CHECK(both("sm_90", "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8", {{-128}, {-128}, 5}) == 16389u);
}

TEST_CASE("block scales (published, emulation only)", "[mma][arithmetic]") {
  const char* mxf8 = "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0";
  // UE8M0 2^-3 (code 124) and 2^2 (129) scale 1 * 1 to 0.5.
  CHECK(both("sm_120", mxf8, {{1}, {1}, 0, {}, {}, {124}, {129}}) == 0x3f00'0000u);
  CHECK(both("sm_120", mxf8, {{1}, {1}, 0, {}, {}, {0xff}, {127}}) == 0x7fff'ffffu);  // NaN scale
  CHECK(both("sm_100", "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.m64n8k32.f32.e4m3.e4m3.ue8m0",
             {{1}, {1}, 0, {}, {}, {124}, {129}}) == 0x3f00'0000u);

  const char* nvfp4 = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3";
  // Group 0 (k 0..15): 6*6 - 6*6 = 0 with scales 448 (0x7e, 2^8 * 1.75) on both sides: the sum
  // cancels but the group keeps its exponent 8 + 8 = 16, so units are 2^(16-35) = 2^-19.
  // Group 1 (k 16..31): 0.5*0.5 with scales 2^-9 (0x01): 2^-20, below the unit: D = +0.
  std::vector<double> a = with({6, -6}, 16, 0), b = with({6, 6}, 16, 0);
  a.push_back(0.5);
  b.push_back(0.5);
  CHECK(both("sm_120", nvfp4, {a, b, 0, {}, {}, {0x7e, 0x01}, {0x7e, 0x01}}) == 0u);
  // All-zero group 0 takes e_zero = -139 instead: E = -6 - 6 = -12 keeps 2^-20 = 0x35800000.
  a[0] = a[1] = 0;
  CHECK(both("sm_120", nvfp4, {a, b, 0, {}, {}, {0x7e, 0x01}, {0x7e, 0x01}}) == 0x3580'0000u);
  // A UE4M3 scale's sign bit is ignored (MMA-Sim): 0xfe acts as 0x7e.
  a[0] = 6, a[1] = -6;
  CHECK(both("sm_120", nvfp4, {a, b, 0, {}, {}, {0xfe, 0x81}, {0x7e, 0x01}}) == 0u);
  CHECK(both("sm_120", nvfp4, {{6}, {0.5}, 0, {}, {}, {0x81}, {0x38}}) == fp32_bits(3.0f / 512));
}
