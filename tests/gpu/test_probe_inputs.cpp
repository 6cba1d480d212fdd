// The GPU probes' inputs and recording, checked on the CPU: the test families have the
// properties docs/gpu-probes.md claims, tiles are reproducible from (seed, index, family) (the
// recorded samples too), the targeted families can tell the models they target apart, f16
// accumulator words round-trip, and the exact check tells right from wrong results.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <filesystem>

#include "emulation/convert.hpp"
#include "emulation/mma/arithmetic.hpp"
#include "verification/families.hpp"
#include "verification/tile_codes.hpp"
#include "verification/vector_file.hpp"
#include "verification/verify.hpp"

using namespace lowbit;
using namespace lowbit::mma;

namespace {

constexpr Atom kFp8 = mma_sync_atom(16, 8, 32, formats::fp32, formats::e4m3, formats::e5m2, formats::fp32);
constexpr Atom kF16Acc = wgmma_atom(8, 16, formats::fp16, formats::fp16, formats::fp16);
constexpr Atom kS4Sat = mma_sync_atom(16, 8, 64, formats::s32, formats::int4, formats::int4, formats::s32, true);
static_assert(kFp8.name.view() == "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32");
static_assert(kF16Acc.name.view() == "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16");
static_assert(kS4Sat.name.view() == "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.s4.s4.s32");

double value(const Format& f, Code c) { return decode(f, c); }

// D computed exactly in double (valid where exact_check applies), stored as accumulator words.
void fill_exact_d(const Atom& s, Tile& t) {
  t.d.resize(t.c.size());
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      double sum = value(s.c, *accumulator_code(s.c, t.c[std::size_t(i) * s.n + j]));
      for (int k = 0; k < s.k; ++k) sum += value(s.a, t.a[std::size_t(i) * s.k + k]) * value(s.b, t.b[std::size_t(k) * s.n + j]);
      if (s.c.is_integer()) sum = std::clamp(sum, lowest_finite(s.c), max_finite(s.c));
      t.d[std::size_t(i) * s.n + j] = accumulator_word(s.c, encode(s.c, sum));
    }
}

}  // namespace

TEST_CASE("tiles are reproducible from seed and index, and differ otherwise", "[probes]") {
  const Tile a = make_input_tile(kFp8, 7, 12), b = make_input_tile(kFp8, 7, 12);
  CHECK(a.a == b.a);
  CHECK(a.b == b.b);
  CHECK(a.c == b.c);
  CHECK(make_input_tile(kFp8, 8, 12).a != a.a);
  CHECK(make_input_tile(kFp8, 7, 12 + kCycledFamilies).a != a.a);
  CHECK(a.extra["family"] == "dominant");  // 12 mod 9 = 3
}

TEST_CASE("each family has its property", "[probes]") {
  for (std::uint64_t index = 0; index < 4 * kCycledFamilies; ++index) {
    const Tile t = make_input_tile(kFp8, 1, index);
    REQUIRE(t.a.size() == 16u * 32);
    REQUIRE(t.b.size() == 32u * 8);
    const Family family = family_of(index);
    CHECK(t.extra["family"] == std::string(to_string(family)));
    const auto finite = [](const Format& f, Code c) { return !f.is_nan_code(c) && !f.is_inf_code(c); };
    switch (family) {
      case Family::zero_ab:
        for (Code c : t.a) CHECK(value(formats::e4m3, c) == 0.0);
        for (Code c : t.b) CHECK(value(formats::e5m2, c) == 0.0);
        break;
      case Family::random_c0:
      case Family::narrow_band:
      case Family::exact:
        for (auto w : t.c) CHECK(w == 0u);
        for (Code c : t.a) CHECK(finite(formats::e4m3, c));
        break;
      case Family::cancellation:
        for (auto w : t.c) CHECK(std::bit_cast<float>(w) == 0.0f);
        break;
      default: break;
    }
  }
  // Specials: across a few tiles, NaN and Inf appear in B (e5m2 has both) and NaN in A (e4m3).
  bool a_nan = false, b_nan = false, b_inf = false, c_nan = false;
  for (std::uint64_t index = 6; index < 60 * kCycledFamilies; index += kCycledFamilies) {
    const Tile t = make_input_tile(kFp8, 1, index);
    for (Code c : t.a) a_nan |= formats::e4m3.is_nan_code(c);
    for (Code c : t.b) b_nan |= formats::e5m2.is_nan_code(c), b_inf |= formats::e5m2.is_inf_code(c);
    for (auto w : t.c) c_nan |= std::isnan(std::bit_cast<float>(w));
  }
  CHECK(a_nan);
  CHECK(b_nan);
  CHECK(b_inf);
  CHECK(c_nan);
}

TEST_CASE("cancellation tiles sum to zero unless perturbed", "[probes]") {
  int zero_tiles = 0;
  for (std::uint64_t index = 7; index < 40 * kCycledFamilies; index += kCycledFamilies) {
    Tile t = make_input_tile(kS4Sat, 3, index);
    fill_exact_d(kS4Sat, t);
    const bool all_zero = std::all_of(t.d.begin(), t.d.end(), [](auto w) { return w == 0u; });
    zero_tiles += all_zero;
  }
  CHECK(zero_tiles > 5);
  CHECK(zero_tiles < 40);
}

TEST_CASE("f16 accumulator words round-trip every code", "[probes]") {
  for (Code code = 0; code < 0x10000; ++code) {
    const std::uint32_t word = accumulator_word(formats::fp16, code);
    const float v = std::bit_cast<float>(word);
    if (formats::fp16.is_nan_code(code)) {
      CHECK(std::isnan(v));
    } else {
      CHECK(double(v) == decode(formats::fp16, code));
      CHECK(std::signbit(v) == bool(code & 0x8000));
    }
    const auto back = accumulator_code(formats::fp16, word);
    REQUIRE(back.has_value());
    CHECK(*back == code);
  }
  CHECK_FALSE(accumulator_code(formats::fp16, std::bit_cast<std::uint32_t>(1.0f + 0x1p-20f)).has_value());
  CHECK_FALSE(accumulator_code(formats::fp16, std::bit_cast<std::uint32_t>(0x1p20f)).has_value());
  CHECK(accumulator_code(formats::s32, 0xdeadbeef) == Code{0xdeadbeef});
}

TEST_CASE("exact_check accepts the exact result and rejects a changed bit", "[probes]") {
  for (const Atom* spec : {&kFp8, &kF16Acc, &kS4Sat}) {
    const std::uint64_t index = 5;  // the exact family
    REQUIRE(family_of(index) == Family::exact);
    Tile t = make_input_tile(*spec, 11, index);
    fill_exact_d(*spec, t);
    CHECK(exact_check(*spec, t) == std::optional<bool>(true));
    t.d[3] ^= 1u << 13;  // one ulp of f16 in the widened word; 2^13 for the others
    CHECK(exact_check(*spec, t) == std::optional<bool>(false));
  }
  Tile random = make_input_tile(kFp8, 11, 0);
  random.d = random.c;
  CHECK_FALSE(exact_check(kFp8, random).has_value());
}

TEST_CASE("exact_check wraps plain s32 and saturates .satfinite", "[probes]") {
  constexpr Atom plain = mma_sync_atom(16, 8, 64, formats::s32, formats::int4, formats::int4, formats::s32);
  const std::uint64_t index = 6;  // specials: extreme codes, C near the s32 limits
  REQUIRE(family_of(index) == Family::specials);
  bool overflowed = false;
  Tile sat = make_input_tile(kS4Sat, 2, index), wrap = make_input_tile(plain, 2, index);
  fill_exact_d(kS4Sat, sat);
  CHECK(exact_check(kS4Sat, sat) == std::optional<bool>(true));
  wrap.d = sat.d;  // saturated values are wrong for the plain instruction wherever it overflowed
  for (std::size_t i = 0; i < sat.d.size(); ++i)
    overflowed |= sat.d[i] == 0x7fffffffu || sat.d[i] == 0x80000000u;
  REQUIRE(overflowed);
  CHECK(exact_check(plain, wrap) == std::optional<bool>(false));
}

TEST_CASE("tiles survive a gzip JSON Lines round trip", "[probes]") {
  const auto path = (std::filesystem::temp_directory_path() / "lowbit-test-tiles.jsonl.gz").string();
  std::vector<Tile> tiles;
  for (std::uint64_t i = 0; i < 2 * kCycledFamilies; ++i) {
    tiles.push_back(make_input_tile(kF16Acc, 5, i));
    tiles.back().d = tiles.back().c;
  }
  {
    LineWriter out(path);
    for (const auto& t : tiles) out.write(to_json_line(t));
    out.close();
  }
  std::size_t count = 0;
  const auto error = for_each_line(path, [&](std::size_t number, std::string_view line) {
    REQUIRE(number <= tiles.size());
    const Tile& t = tiles[number - 1];
    const auto parsed = parse_tile_line(line);
    REQUIRE(parsed.tile.has_value());
    CHECK(parsed.tile->a == t.a);
    CHECK(parsed.tile->c == t.c);
    CHECK(parsed.tile->extra["c_type"] == "f16");
    ++count;
  });
  CHECK_FALSE(error.has_value());
  CHECK(count == tiles.size());
  std::filesystem::remove(path);
}

TEST_CASE("every recorded probe tile is regenerated from its seed, index and family", "[probes]") {
  std::size_t regenerated = 0;
  for (const char* folder : {"sm90", "sm90-targeted", "sm90-kloop", "sm90-regressions"})
    for (const auto& entry : std::filesystem::directory_iterator(std::string(LOWBIT_SOURCE_DIR "/verification/vectors/") + folder)) {
      const auto error = for_each_line(entry.path().string(), [&](std::size_t, std::string_view line) {
        const auto parsed = parse_tile_line(line);
        REQUIRE(parsed.tile.has_value());
        const Tile& recorded = *parsed.tile;
        const auto family = parse_family(recorded.extra["family"].get<std::string>());
        REQUIRE(family.has_value());
        const Atom atom = find_instruction(recorded.arch, recorded.instruction).atom;
        // K-loop tiles are m x K by K x n for a K of several instructions' k.
        const Tile fresh = make_input_tile(atom, recorded.extra["seed"].get<std::uint64_t>(),
                                           recorded.extra["index"].get<std::uint64_t>(), *family, recorded.k);
        INFO(entry.path().filename().string() << " tile " << recorded.extra["index"]);
        CHECK(fresh.a == recorded.a);
        CHECK(fresh.b == recorded.b);
        CHECK(fresh.c == recorded.c);
        ++regenerated;
      });
      REQUIRE_FALSE(error.has_value());
    }
  CHECK(regenerated >= 3886 + 1760 + 60 + 196);
}

TEST_CASE("targeted families: chosen by name, floating accumulators only", "[probes]") {
  CHECK(parse_family("tiny_products") == Family::tiny_products);
  CHECK(parse_family("subnormal_c") == Family::subnormal_c);
  CHECK_FALSE(parse_family("tiny").has_value());
  for (int f = 0; f < kFamilyCount; ++f) CHECK(parse_family(to_string(Family(f))) == Family(f));
  CHECK(applies(Family::tiny_products, kFp8));
  CHECK_FALSE(applies(Family::tiny_products, kS4Sat));
  CHECK_FALSE(applies(Family::subnormal_c, kS4Sat));
  CHECK(applies(Family::random, kS4Sat));
  CHECK_THROWS_AS(make_input_tile(kS4Sat, 1, 0, Family::subnormal_c), std::invalid_argument);
  const Tile t = make_input_tile(kF16Acc, 1, 3, Family::subnormal_c);
  CHECK(t.extra["family"] == "subnormal_c");
  for (auto w : t.c) {
    const Code c = *accumulator_code(formats::fp16, w);
    CHECK((c & 0x7c00) == 0);  // exponent field 0
    CHECK((c & 0x03ff) != 0);  // not zero: a subnormal
  }
}

namespace {
// How many of `tiles` tiles of `family` fail when the model that produced D is replaced by
// `neighbour` (D computed by the registry's model, as the GPU would if the model is right).
std::size_t tiles_telling_apart(const char* instruction, Family family, const Model& neighbour, int tiles) {
  const Instruction in = find_instruction("sm_90", instruction);
  std::size_t failing = 0;
  for (int i = 0; i < tiles; ++i) {
    Tile t = make_input_tile(in.atom, 1, std::uint64_t(i), family);
    t.arch = "sm_90";
    t.d = execute(in, {t.a, t.b, t.c});
    failing += verify_tile(t, neighbour).outcome != TileVerdict::Outcome::passed;
  }
  return failing;
}
}  // namespace

TEST_CASE("tiny_products tiles pin the zero-term exponent of bf16 to one integer", "[probes]") {
  for (const char* name : {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"}) {
    const Model model = find_instruction("sm_90", name).model;
    REQUIRE(model.fused.zero_exponent == -133);
    for (int e : {-126, -132, -134, -140, -1000}) {
      Model neighbour = model;
      neighbour.fused.zero_exponent = e;
      INFO(name << ": e_zero = " << e);
      CHECK(tiles_telling_apart(name, Family::tiny_products, neighbour, 200) >= 10);
    }
  }
}

TEST_CASE("tiles become the probes' code arrays and back", "[probes]") {
  std::vector<Tile> tiles{make_input_tile(kF16Acc, 4, 0), make_input_tile(kF16Acc, 4, 1, Family::subnormal_c)};
  const TileCodes codes = tile_codes(kF16Acc, kF16Acc.k, tiles);
  REQUIRE(codes.count == 2);
  REQUIRE(codes.a.size() == 2u * 64 * 16);
  REQUIRE(codes.c.size() == 2u * 64 * 8);
  CHECK(codes.a[64 * 16] == tiles[1].a[0]);
  CHECK(codes.b.back() == tiles[1].b.back());
  // C is held as f16 codes (the files widen them to binary32); D comes back as the files' words.
  CHECK(codes.c[64 * 8] == *accumulator_code(formats::fp16, tiles[1].c[0]));
  CHECK((codes.c[64 * 8] & 0x7c00) == 0);
  TileCodes gpu = codes;
  gpu.d = gpu.c;  // as if D = C
  store_d(kF16Acc, gpu, tiles);
  CHECK(tiles[1].d == tiles[1].c);
  CHECK(tiles[0].d == tiles[0].c);

  Tile wrong = tiles[0];
  wrong.b.pop_back();
  CHECK_THROWS_WITH(tile_codes(kF16Acc, kF16Acc.k, std::vector<Tile>{tiles[0], wrong}),
                    Catch::Contains("tile 1 of wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16: field sizes"));
  wrong = tiles[0];
  wrong.c[3] = 0x3f800001;  // not an f16 value
  CHECK_THROWS_WITH(tile_codes(kF16Acc, kF16Acc.k, std::vector<Tile>{wrong}), Catch::Contains("C word 3"));
}
