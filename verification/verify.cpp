#include "verification/verify.hpp"

#include <set>

#include <fmt/format.h>

#include "emulation/mma/arithmetic.hpp"
#include "emulation/mma/gemm.hpp"

namespace lowbit::mma {
namespace {

// Scale factors travel in the line's extra fields "scale_a" (m x k/block) and "scale_b"
// (k/block x n), 2 hex digits per code, row-major.
std::optional<std::string> read_scales(const Tile& tile, const char* name, std::size_t count, std::vector<Code>& out) {
  if (!tile.extra.contains(name) || !tile.extra[name].is_string())
    return fmt::format("field '{}' (a hex string of {} scale codes) is missing", name, count);
  const auto& s = tile.extra[name].get_ref<const std::string&>();
  if (s.size() != 2 * count) return fmt::format("field '{}' has {} hex digits, expected {}", name, s.size(), 2 * count);
  if (auto e = read_hex_codes(s, 2, out)) return fmt::format("field '{}': {}", name, *e);
  return std::nullopt;
}

int hex_digits(const Format& f) { return f.storage_bits / 4; }

}  // namespace

TileVerdict verify_tile(const Tile& tile, const std::optional<Model>& model) {
  TileVerdict v;
  try {
    v.instruction = find_instruction(tile.arch, tile.instruction);
    if (model) v.instruction->model = *model;
  } catch (const UnknownInstruction& e) {
    const std::string message = e.what();
    v.error = message.substr(0, message.find('\n'));
    v.unknown_instruction = true;
    return v;
  }
  const Atom& at = v.instruction->atom;
  // A K-loop tile (field "mmas_per_flush") runs the instruction over K = tile.k as gemm() does.
  std::optional<int> flush;
  if (tile.extra.contains("mmas_per_flush")) {
    const auto& f = tile.extra["mmas_per_flush"];
    if (!f.is_number_integer() || f.get<long long>() < 0 || f.get<long long>() > tile.k)
      return v.error = fmt::format("field 'mmas_per_flush' is {}, not an integer in 0..K", f.dump()), v;
    flush = f.get<int>();
  }
  if (tile.m != at.m || tile.n != at.n || (flush ? tile.k % at.k != 0 : tile.k != at.k)) {
    v.error = flush ? fmt::format("K-loop shape m{}n{}k{} in the line, but {} needs m{}n{} and K a multiple of {}",
                                  tile.m, tile.n, tile.k, at.name.view(), at.m, at.n, at.k)
                    : fmt::format("shape m{}n{}k{} in the line, but {} is m{}n{}k{}", tile.m, tile.n, tile.k, at.name.view(),
                                  at.m, at.n, at.k);
    return v;
  }
  if (tile.a_digits != hex_digits(at.a) || tile.b_digits != hex_digits(at.b)) {
    v.error = fmt::format("A/B codes have {}/{} hex digits, but {} takes {} x {} ({}/{} digits)", tile.a_digits,
                          tile.b_digits, at.name.view(), format_name(at.a), format_name(at.b), hex_digits(at.a),
                          hex_digits(at.b));
    return v;
  }
  // Flushed K loops keep C and D in the fp32 accumulator the kernel adds into.
  const Format& c_format = flush > 0 ? formats::fp32 : at.c;
  const Format& d_format = flush > 0 ? formats::fp32 : at.d;
  for (auto [field, accumulator] : {std::pair{"c_type", &c_format}, std::pair{"d_type", &d_format}}) {
    if (!tile.extra.contains(field)) continue;
    const auto& value = tile.extra[field];
    const std::string_view expected = accumulator_type(*accumulator);
    if (!value.is_string() || value.get_ref<const std::string&>() != expected)
      return v.error = fmt::format("field '{}' is {}, but {} takes {}", field, value.dump(), at.name.view(), expected), v;
  }
  std::vector<Code> scale_a, scale_b;
  if (at.block_scaled()) {
    const auto columns = std::size_t(tile.k / at.scale_block);
    if (auto e = read_scales(tile, "scale_a", std::size_t(at.m) * columns, scale_a)) return v.error = *e, v;
    if (auto e = read_scales(tile, "scale_b", columns * std::size_t(at.n), scale_b)) return v.error = *e, v;
  }
  // Files hold fp16 accumulators widened to binary32 (accumulator_word); the model takes codes.
  std::vector<std::uint32_t> c(tile.c);
  for (std::size_t i = 0; i < c.size(); ++i) {
    const auto code = accumulator_code(c_format, c[i]);
    if (!code) return v.error = fmt::format("C word {} (0x{:08x}) is not a value of {}", i, c[i], format_name(c_format)), v;
    c[i] = *code;
  }
  if (tile.d.size() != tile.c.size()) return v.error = "D and C differ in size", v;
  std::vector<std::uint32_t> d;
  if (flush) {
    const auto matrix = [](const auto& codes, int rows, int cols) {
      return MatrixCode(MatrixView<std::uint32_t>(codes.data(), rows, cols));
    };
    const MatrixCode a = matrix(tile.a, tile.m, tile.k), b = matrix(tile.b, tile.k, tile.n), cm = matrix(c, tile.m, tile.n);
    const int blocks = at.block_scaled() ? tile.k / at.scale_block : 0;
    const MatrixCode sa = matrix(scale_a, at.block_scaled() ? tile.m : 0, blocks), sb = matrix(scale_b, blocks, at.block_scaled() ? tile.n : 0);
    try {
      const MatrixCode out = gemm(*v.instruction, {a, b, cm, at.block_scaled() ? &sa : nullptr, at.block_scaled() ? &sb : nullptr},
                                  KLoop{*flush, false});
      d.assign(out.data(), out.data() + out.size());
    } catch (const std::invalid_argument& e) {
      return v.error = e.what(), v;
    }
  } else {
    const TileInputs in{tile.a, tile.b, c, scale_a, scale_b};
    if (auto why = check_inputs(at, in)) return v.error = *why, v;
    d = execute(*v.instruction, in);
  }
  v.outputs = d.size();
  for (std::size_t i = 0; i < d.size(); ++i)
    if (const std::uint32_t emulated = accumulator_word(d_format, d[i]); emulated != tile.d[i])
      v.mismatches.push_back({int(i) / at.n, int(i) % at.n, tile.d[i], emulated});
  v.outcome = v.mismatches.empty() ? TileVerdict::Outcome::passed : TileVerdict::Outcome::mismatched;
  return v;
}

std::vector<NeighbourModel> neighbouring_models(const Model& model) {
  std::vector<NeighbourModel> out;
  if (model.arithmetic != Arithmetic::fused_dot_add) return out;
  const auto add = [&](std::string change, auto edit) {
    Model m = model;
    edit(m.fused);
    out.push_back({std::move(change), m});
  };
  const FusedDotAdd& p = model.fused;
  add(fmt::format("F = {}", p.fraction_bits - 1), [](FusedDotAdd& q) { --q.fraction_bits; });
  add(fmt::format("F = {}", p.fraction_bits + 1), [](FusedDotAdd& q) { ++q.fraction_bits; });
  if (p.chunk % 2 == 0 && (p.interleave == 0 || (p.chunk / 2) % p.interleave == 0))
    add(fmt::format("L = {}", p.chunk / 2), [](FusedDotAdd& q) { q.chunk /= 2; });
  if (p.rounding != OutputRounding::rne_fp16)
    add(p.rounding == OutputRounding::rz_fp32 ? "RZ to e8m13" : "RZ to fp32", [](FusedDotAdd& q) {
      q.rounding = q.rounding == OutputRounding::rz_fp32 ? OutputRounding::rz_e8m13 : OutputRounding::rz_fp32;
    });
  add(p.c_entry == CEntry::aligned ? "C added after (RNE)" : "C aligned with the products", [](FusedDotAdd& q) {
    q.c_entry = q.c_entry == CEntry::aligned ? CEntry::added_after : CEntry::aligned;
  });
  add(p.rounded_zero_keeps_sign ? "rounded zeros +0" : "rounded zeros keep their sign",
      [](FusedDotAdd& q) { q.rounded_zero_keeps_sign = !q.rounded_zero_keeps_sign; });
  if (p.unpack_to) add("operands not unpacked", [](FusedDotAdd& q) { q.unpack_to.reset(); });
  if (p.interleave) add("consecutive chunks", [](FusedDotAdd& q) { q.interleave = 0; });
  // A ladder around it (do the tiles pin e_zero to one integer, or to an interval?) and a few far values.
  const int z = p.zero_exponent;
  for (int e : std::set<int>{z - 4, z - 2, z - 1, z + 1, z + 2, z + 4, -126, -140, -1000})
    if (e != p.zero_exponent) add(fmt::format("e_zero = {}", e), [e](FusedDotAdd& q) { q.zero_exponent = e; });
  return out;
}

}  // namespace lowbit::mma
