// Every tile recorded on hardware (verification/vectors/) against the models, bit for bit; what the
// recorded outputs say about signed zeros and overflow; and which model parameters the recorded
// tiles pin down (a neighbouring model must fail some tile, or the parameter is not verified).
#include <catch2/catch.hpp>

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulation/mma/arithmetic.hpp"
#include "emulation/mma/gemm.hpp"
#include "verification/vector_file.hpp"
#include "verification/verify.hpp"

using namespace lowbit;
using namespace lowbit::mma;

namespace {

const std::filesystem::path kVectors = std::filesystem::path(LOWBIT_SOURCE_DIR) / "verification" / "vectors";

std::vector<Tile> read_tiles(const std::filesystem::path& file) {
  std::vector<Tile> tiles;
  const auto error = for_each_line(file.string(), [&](std::size_t number, std::string_view text) {
    auto parsed = parse_tile_line(text);
    INFO(file.string() << ":" << number << ": " << parsed.error);
    REQUIRE(parsed.tile);
    tiles.push_back(std::move(*parsed.tile));
  });
  REQUIRE(!error);
  return tiles;
}

// The tiles of every vector file the directory iterator yields.
template <class DirectoryIterator>
std::vector<Tile> tiles_in(DirectoryIterator files) {
  std::vector<Tile> tiles;
  for (const auto& entry : files)
    if (const auto name = entry.path().string(); name.ends_with(".jsonl.gz") || name.ends_with(".jsonl"))
      for (auto& t : read_tiles(entry.path())) tiles.push_back(std::move(t));
  return tiles;
}

// The tiles recorded on the H200 (copied from the shared inputs): the top folder's files.
std::vector<Tile> shared_h200_tiles() { return tiles_in(std::filesystem::directory_iterator(kVectors)); }

// Every recorded tile: the H200's and the probes' (sm90/, sm90-regressions/).
std::vector<Tile> all_tiles() { return tiles_in(std::filesystem::recursive_directory_iterator(kVectors)); }

// The committed manifest (verification/vectors/manifest.txt, "<tiles> <file>" a line): every vector
// file, relative to verification/vectors, with its number of tiles.
std::map<std::string, std::size_t> manifest() {
  std::ifstream in(kVectors / "manifest.txt");
  REQUIRE(in);
  std::map<std::string, std::size_t> files;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::size_t tiles = 0;
    std::string file;
    INFO("manifest.txt: " << line);
    REQUIRE((fields >> tiles >> file));
    REQUIRE(files.emplace(file, tiles).second);
  }
  return files;
}

// The lines of a vector file, read with zlib apart from the code under test (gzread passes
// uncompressed files through).
std::vector<std::string> raw_lines(const std::filesystem::path& file) {
  gzFile in = gzopen(file.c_str(), "rb");
  INFO(file.string());
  REQUIRE(in != nullptr);
  std::string text;
  char buffer[1 << 16];
  for (int n; (n = gzread(in, buffer, sizeof buffer)) > 0;) text.append(buffer, std::size_t(n));
  gzclose(in);
  std::vector<std::string> lines;
  for (std::size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    lines.push_back(text.substr(start, end - start));
  return lines;
}

// How many tiles of `instruction` on `arch` fail when they run `model` instead of its own.
std::size_t failing_tiles(const std::vector<Tile>& tiles, const std::string& arch, const std::string& instruction,
                          const Model& model) {
  std::size_t failing = 0;
  for (const auto& t : tiles)
    if (t.arch == arch && t.instruction == instruction) failing += verify_tile(t, model).outcome != TileVerdict::Outcome::passed;
  return failing;
}

}  // namespace

TEST_CASE("the manifest lists every recorded vector file with its exact number of tiles", "[mma][vectors]") {
  const auto listed = manifest();
  std::set<std::string> on_disk;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kVectors))
    if (const auto name = entry.path().string(); name.ends_with(".jsonl.gz") || name.ends_with(".jsonl"))
      on_disk.insert(entry.path().lexically_relative(kVectors).string());
  for (const auto& file : on_disk) {
    INFO(file << " is not in verification/vectors/manifest.txt (scripts/vector_manifest.py writes it)");
    CHECK(listed.contains(file));
  }
  std::size_t tiles = 0;
  for (const auto& [file, count] : listed) {
    INFO(file << " is listed in verification/vectors/manifest.txt");
    REQUIRE(on_disk.contains(file));
    CHECK(raw_lines(kVectors / file).size() == count);
    tiles += count;
  }
  fmt::print("verification/vectors/manifest.txt: {} files, {} tiles, as recorded\n", listed.size(), tiles);
}

TEST_CASE("every recorded tile passes bit for bit", "[mma][vectors]") {
  std::map<std::string, std::size_t> passed;
  for (const auto& tile : all_tiles()) {
    const auto verdict = verify_tile(tile);
    INFO(tile.arch << " " << tile.instruction << ": " << verdict.error << " " << verdict.mismatches.size()
                   << " outputs differ");
    CHECK(verdict.outcome == TileVerdict::Outcome::passed);
    passed[tile.instruction] += verdict.outcome == TileVerdict::Outcome::passed;
  }
  // Each instruction's tiles, counted from the files as the manifest lists them (zlib and a JSON
  // parser apart from the code under test): every one was read and passed.
  std::map<std::string, std::size_t> recorded;
  std::size_t total = 0;
  for (const auto& [file, count] : manifest())
    for (const auto& line : raw_lines(kVectors / file)) {
      recorded[nlohmann::json::parse(line).at("instruction").get<std::string>()] += 1;
      ++total;
    }
  CHECK(passed == recorded);
  fmt::print("{} recorded tiles of {} instructions, all passed\n", total, recorded.size());
}

TEST_CASE("'verified' means recorded: the registry and the recorded tiles agree", "[mma][vectors]") {
  std::set<std::string> recorded;
  for (const auto& tile : all_tiles()) recorded.insert(tile.arch + " " + tile.instruction);
  // Every listed name, and the wgmma names at every N (the list gives N = 8 and 256 only).
  std::set<std::pair<std::string, std::string>> names;
  for (const auto& name : instruction_names()) {
    names.insert({name.arch, name.name});
    if (const auto at = name.name.find(".m64n8k"); at != std::string::npos && name.name.starts_with("wgmma."))
      for (int n = 16; n <= 256; n += 8) {
        std::string other = name.name;
        other.replace(at, 7, ".m64n" + std::to_string(n) + "k");
        names.insert({name.arch, other});
      }
  }
  for (const auto& [arch, name] : names) {
    const bool verified = find_instruction(arch, name).source.status == Verification::verified;
    INFO(arch << " " << name);
    CHECK(verified == recorded.contains(arch + " " + name));
  }
  CHECK(names.size() > 600);
}

TEST_CASE("the recorded outputs: signed zeros and overflow", "[mma][vectors]") {
  // Reported in docs/mma-models.md. Every zero output on the H200 is +0 (all had C = +0 or a
  // nonzero C); the bf16 tiles overflow to +-Inf, never to the largest finite value.
  std::size_t positive_zero = 0, negative_zero = 0, infinite = 0, largest_finite = 0, negative_zero_c = 0;
  for (const auto& tile : shared_h200_tiles()) {
    for (std::size_t i = 0; i < tile.d.size(); ++i) {
      positive_zero += tile.d[i] == 0;
      negative_zero += tile.d[i] == 0x8000'0000u;
      negative_zero_c += tile.c[i] == 0x8000'0000u;
      infinite += (tile.d[i] & 0x7fff'ffffu) == 0x7f80'0000u;
      largest_finite += (tile.d[i] & 0x7fff'ffffu) == 0x7f7f'ffffu;
    }
  }
  CHECK(positive_zero == 297);
  CHECK(negative_zero == 0);
  CHECK(negative_zero_c == 0);  // so -0 + -0 was never asked
  CHECK(infinite == 15979);
  CHECK(largest_finite == 0);
}

TEST_CASE("the recorded tiles reject every neighbouring model", "[mma][vectors]") {
  const auto tiles = all_tiles();
  // (arch, instruction) -> whether our probes' targeted tiles hold it, and whether all its tiles
  // are Khattak & Mikaitis' (external/, field "gpu_recorded": one ordinary dot product each).
  std::map<std::pair<std::string, std::string>, std::pair<bool, bool>> recorded;
  for (const auto& t : tiles) {
    auto [it, fresh] = recorded.try_emplace({t.arch, t.instruction}, false, true);
    it->second.first = it->second.first || t.extra.value("family", "") == "tiny_products";
    it->second.second = it->second.second && t.extra.contains("gpu_recorded");
  }
  for (const auto& [key, kinds] : recorded) {
    const auto& [arch, name] = key;
    const auto [with_tiny_products, external_only] = kinds;
    const Instruction instruction = find_instruction(arch, name);
    const Atom& at = instruction.atom;
    const FusedDotAdd& p = instruction.model.fused;
    // The zero-term exponent shows only where products reach below it: bf16 (e_zero = -133) and
    // f16 with an f16 accumulator (e_zero = -21), in the tiny_products tiles; elsewhere no tile can
    // tell it (docs/mma-models.md). Unpacking to f16 changes nothing for e5m2 x e5m2 (its
    // subnormals are f16 subnormals) nor, provably, for e4m3 x e4m3 (test_mma_arithmetic); with
    // mixed pairings it moves fp32 results by an ulp, which no recorded f16 result shows.
    // Likewise the sign of a zero result: only where tiny products can round to zero (bf16 -> f32,
    // f16 accumulators unless both operands are e4m3, whose products stay above 2^-18).
    const bool bf16 = at.a == formats::bf16;
    const bool f16_to_f16 = at.a == formats::fp16 && at.c == formats::fp16;
    const bool zero_exponent_pinned = with_tiny_products && (bf16 || f16_to_f16);
    const bool e4m3_only = at.a == formats::e4m3 && at.b == formats::e4m3;
    const bool zero_sign_pinned = with_tiny_products && (bf16 || (at.c == formats::fp16 && !e4m3_only));
    const bool mixed_fp8_to_f32 = at.c == formats::fp32 &&
                                  (name.find("e4m3.e5m2") != std::string::npos || name.find("e5m2.e4m3") != std::string::npos);
    // Khattak & Mikaitis' tiles (external/): rounding to an f16 accumulator hides the last bits of
    // F >= 23 in every sampled tile, and FP8 through f16 HMMA to f32 (sm_100) keeps every product
    // bit whatever the chunking or F (docs/mma-models.md, "External evidence").
    const bool f16_hides_f = external_only && at.c == formats::fp16 && p.fraction_bits >= 23;
    const bool fp8_hmma_to_f32 = external_only && p.unpack_to && at.c == formats::fp32;
    for (const auto& neighbour : neighbouring_models(instruction)) {
      INFO(arch << " " << name << " with " << neighbour.change);
      CHECK(neighbour.skipped.empty());
      const std::string& change = neighbour.change;
      const bool unobservable = (change.starts_with("e_zero") && !zero_exponent_pinned) ||
                                (change.starts_with("rounded zeros") && !zero_sign_pinned) ||
                                (change == "operands not unpacked" && !mixed_fp8_to_f32) ||
                                (change.starts_with("F = ") && (f16_hides_f || fp8_hmma_to_f32)) ||
                                ((change.starts_with("L = ") || change == "consecutive chunks") && fp8_hmma_to_f32);
      if (unobservable)
        CHECK(failing_tiles(tiles, arch, name, neighbour.model) == 0);
      else
        CHECK(failing_tiles(tiles, arch, name, neighbour.model) > 0);
    }
  }
  CHECK(recorded.size() == 71 + 26);  // sm_90: 70 probed + tf32; external: 26 on other GPUs
}

// --neighbours must run every neighbour or say why it cannot (a chunk without a product-sum
// kernel once fell into the block-scale path and divided by zero on every sm_80 m16n8k16 tile).
TEST_CASE("every neighbouring model of every modeled instruction runs or says why not", "[mma][vectors]") {
  std::mt19937_64 rng(11);
  std::size_t ran = 0;
  for (const auto& n : instruction_names()) {
    const Instruction in = find_instruction(n.arch, n.name);
    if (in.atom.n > 64) continue;  // the wide wgmma and tcgen05 twins share their models with N <= 64
    const Atom& at = in.atom;
    std::vector<Code> a(std::size_t(at.m * at.k)), b(std::size_t(at.k * at.n)), sa, sb;
    std::vector<std::uint32_t> c(std::size_t(at.m * at.n));
    for (auto& x : a) x = Code(rng()) & at.a.code_count_minus_one();
    for (auto& x : b) x = Code(rng()) & at.b.code_count_minus_one();
    if (at.block_scaled()) {
      sa.assign(std::size_t(at.m * at.scale_columns()), 127);
      sb.assign(std::size_t(at.scale_columns() * at.n), 127);
    }
    for (const auto& neighbour : neighbouring_models(in)) {
      INFO(n.arch << " " << n.name << " with " << neighbour.change << ": " << neighbour.skipped);
      Instruction other = in;
      other.model = neighbour.model;
      if (!neighbour.skipped.empty()) {
        CHECK(check_model(other) == std::optional<std::string>(neighbour.skipped));
        continue;
      }
      CHECK_NOTHROW(execute(other, {a, b, c, sa, sb}));
      ++ran;
    }
  }
  const Instruction sm80 = find_instruction("sm_80", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
  const auto neighbours = neighbouring_models(sm80);
  CHECK(std::any_of(neighbours.begin(), neighbours.end(), [](const NeighbourModel& m) { return m.change == "L = 4" && m.skipped.empty(); }));
  CHECK(ran > 3000);
}

TEST_CASE("vector lines of block-scaled and f16-accumulator instructions", "[mma][vectors]") {
  // Lines written here with the emulator's own D: this checks the line handling (scale fields,
  // fp16 accumulators widened to binary32 words), not the arithmetic.
  std::mt19937_64 rng(3);
  const auto make = [&](const char* arch, const char* name) {
    const Instruction in = find_instruction(arch, name);
    const Atom& at = in.atom;
    Tile t;
    t.arch = arch;
    t.device = "emulated";
    t.instruction = name;
    t.m = at.m, t.n = at.n, t.k = at.k;
    t.a_digits = at.a.storage_bits / 4, t.b_digits = at.b.storage_bits / 4;
    for (int i = 0; i < at.m * at.k; ++i) t.a.push_back(Code(rng()) & at.a.code_count_minus_one());
    for (int i = 0; i < at.k * at.n; ++i) t.b.push_back(Code(rng()) & at.b.code_count_minus_one());
    std::vector<std::uint32_t> c;
    for (int i = 0; i < at.m * at.n; ++i) c.push_back(std::uint32_t(rng()) & at.c.code_count_minus_one());
    std::vector<Code> sa, sb;
    if (at.block_scaled()) {
      for (int i = 0; i < at.m * at.scale_columns(); ++i) sa.push_back(Code(120 + rng() % 16));
      for (int i = 0; i < at.scale_columns() * at.n; ++i) sb.push_back(Code(120 + rng() % 16));
      const auto hex = [](const std::vector<Code>& v) {
        std::string s;
        for (Code x : v) s += fmt::format("{:02x}", x);
        return s;
      };
      t.extra["scale_a"] = hex(sa);
      t.extra["scale_b"] = hex(sb);
    }
    // Files hold accumulators as binary32 words, fp16 ones widened (vectors.hpp).
    for (std::uint32_t code : c) t.c.push_back(accumulator_word(at.c, code));
    for (std::uint32_t code : execute(in, {t.a, t.b, c, sa, sb})) t.d.push_back(accumulator_word(at.d, code));
    return t;
  };
  const Tile scaled = make("sm_120", "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m3.e4m3.f32.ue8m0");
  const Tile half = make("sm_90", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16");
  for (const Tile& t : {scaled, half}) {
    const auto reread = parse_tile_line(to_json_line(t));
    REQUIRE(reread.tile);
    CHECK(verify_tile(*reread.tile).outcome == TileVerdict::Outcome::passed);
  }
  Tile missing = scaled;
  missing.extra.erase("scale_b");
  CHECK_THAT(verify_tile(missing).error, Catch::Contains("field 'scale_b'"));
  Tile short_scale = scaled;
  short_scale.extra["scale_a"] = "7f";
  CHECK_THAT(verify_tile(short_scale).error, Catch::Contains("field 'scale_a' has 2 hex digits, expected 32"));
  Tile wide_c = half;
  wide_c.c[3] = 0b0'01111111'00000000000000000000001;  // 1 + 2^-23: a binary32 word no fp16 widens to
  CHECK_THAT(verify_tile(wide_c).error, Catch::Contains("C word 3 (0x3f800001) is not a value of fp16"));
}

TEST_CASE("tf32 elements are recorded as binary32 words, as the GPU holds them", "[mma][vectors]") {
  const char* const name = "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32";
  const Instruction in = find_instruction("sm_80", name);
  CHECK(element_digits(formats::tf32) == 8);
  const Code one = 0b0'01111111'0000000000;  // 1.0 in tf32 (s e8 m10)
  CHECK(element_word(formats::tf32, one) == 0x3f80'0000u);
  CHECK(element_code(formats::tf32, 0x3f80'0000u) == one);
  CHECK_FALSE(element_code(formats::tf32, 0x3f80'0001u).has_value());  // a binary32 value tf32 cannot hold
  CHECK(element_word(formats::e2m3, 0b0'01'101) == 0b0'01'101);         // narrow containers hold the code low
  Tile t;
  t.arch = "sm_80";
  t.device = "emulated";
  t.instruction = name;
  t.m = 16, t.n = 8, t.k = 4;
  t.a_digits = t.b_digits = 8;
  t.a.assign(16 * 4, 0);
  t.b.assign(4 * 8, 0);
  t.c.assign(16 * 8, 0);
  t.a[0] = t.a[1] = 0x3fc0'0000u;  // 1.5
  t.b[0] = 0x4000'0000u;           // 2
  t.b[8] = 0xbe80'0000u;           // -0.25
  t.c[0] = 0x3f80'0000u;           // 1
  t.d = t.c;
  t.d[0] = std::bit_cast<std::uint32_t>(1.0f + 3.0f - 0.375f);
  const auto reread = parse_tile_line(to_json_line(t));
  REQUIRE(reread.tile);
  CHECK(verify_tile(*reread.tile).outcome == TileVerdict::Outcome::passed);
  Tile low_bits = t;
  low_bits.b[8] |= 1;
  CHECK_THAT(verify_tile(low_bits).error, Catch::Contains("B word 8 (0xbe800001) is not a tf32 value"));
}

TEST_CASE("K-loop lines: the instruction over K in steps, as gemm() runs it", "[mma][vectors]") {
  // D written here with gemm() itself: this checks how verify_tile reads a K-loop line (the field
  // mmas_per_flush, K a multiple of k, fp32 C and D once flushed), not the arithmetic.
  const char* const name = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3";
  const Instruction in = find_instruction("sm_90", name);
  std::mt19937_64 rng(5);
  const int K = 4 * in.atom.k;
  Tile t;
  t.arch = "sm_90";
  t.device = "emulated";
  t.instruction = name;
  t.m = in.atom.m, t.n = in.atom.n, t.k = K;
  t.a_digits = t.b_digits = 2;
  MatrixCode a(t.m, K), b(K, t.n), c(t.m, t.n);
  for (auto* m : {&a, &b})
    for (Eigen::Index i = 0; i < m->size(); ++i) m->data()[i] = Code(rng() % 0x7f) | Code(rng() & 0x80);
  for (Eigen::Index i = 0; i < c.size(); ++i) c.data()[i] = std::bit_cast<std::uint32_t>(float(rng() % 1000) / 64.0f);
  t.a.assign(a.data(), a.data() + a.size());
  t.b.assign(b.data(), b.data() + b.size());
  t.c.assign(c.data(), c.data() + c.size());
  for (int flush : {0, 1, 2, 4}) {
    INFO("mmas_per_flush = " << flush);
    const MatrixCode d = gemm(in, {a, b, c}, KLoop{flush, false});
    Tile line = t;
    line.d.assign(d.data(), d.data() + d.size());
    line.extra["mmas_per_flush"] = flush;
    const auto reread = parse_tile_line(to_json_line(line));
    REQUIRE(reread.tile);
    CHECK(verify_tile(*reread.tile).outcome == TileVerdict::Outcome::passed);
    Tile changed = line;
    changed.d[17] ^= 1u << 10;  // the last bit FP22 keeps
    CHECK(verify_tile(changed).outcome == TileVerdict::Outcome::mismatched);
  }
  // Flushing changes the result: one chained FP22 accumulator is not an fp32 buffer every MMA.
  CHECK(gemm(in, {a, b, c}, KLoop{0, false}) != gemm(in, {a, b, c}, KLoop{1, false}));
  Tile ragged = t;
  ragged.d = t.c;
  ragged.extra["mmas_per_flush"] = 1;
  ragged.k = K - 1;
  ragged.a.resize(std::size_t(t.m * (K - 1)));
  ragged.b.resize(std::size_t((K - 1) * t.n));
  CHECK_THAT(verify_tile(ragged).error, Catch::Contains("needs m64n8 and K a multiple of 32"));
  Tile negative = t;
  negative.d = t.c;
  negative.extra["mmas_per_flush"] = -1;
  CHECK_THAT(verify_tile(negative).error, Catch::Contains("field 'mmas_per_flush' is -1"));
  Tile single = t;  // without the field, a line must have the instruction's own k
  single.d = t.c;
  CHECK_THAT(verify_tile(single).error, Catch::Contains("shape m64n8k128 in the line"));
}
