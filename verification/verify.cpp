#include "verification/verify.hpp"

#include <charconv>
#include <set>
#include <tuple>

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
  if (model)
    if (auto why = check_model(*v.instruction)) return v.error = "the model cannot run this instruction: " + *why, v;
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
  if (tile.a_digits != element_digits(at.a) || tile.b_digits != element_digits(at.b)) {
    v.error = fmt::format("A/B codes have {}/{} hex digits, but {} takes {} x {} ({}/{} digits)", tile.a_digits,
                          tile.b_digits, at.name.view(), format_name(at.a), format_name(at.b), element_digits(at.a),
                          element_digits(at.b));
    return v;
  }
  // Files hold elements as their storage words (element_word: tf32 as binary32); the model takes codes.
  std::vector<Code> a(tile.a.size()), b(tile.b.size());
  for (auto [operand, words, codes, format] : {std::tuple{"A", &tile.a, &a, &at.a}, std::tuple{"B", &tile.b, &b, &at.b}})
    for (std::size_t i = 0; i < words->size(); ++i) {
      const auto code = element_code(*format, (*words)[i]);
      if (!code)
        return v.error = fmt::format("{} word {} (0x{:08x}) is not a {} value (its low bits must be zero)", operand, i,
                                     (*words)[i], format_name(*format)),
               v;
      (*codes)[i] = *code;
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
    const MatrixCode am = matrix(a, tile.m, tile.k), bm = matrix(b, tile.k, tile.n), cm = matrix(c, tile.m, tile.n);
    const int blocks = at.block_scaled() ? tile.k / at.scale_block : 0;
    const MatrixCode sa = matrix(scale_a, at.block_scaled() ? tile.m : 0, blocks), sb = matrix(scale_b, blocks, at.block_scaled() ? tile.n : 0);
    try {
      const MatrixCode out = gemm(*v.instruction, {am, bm, cm, at.block_scaled() ? &sa : nullptr, at.block_scaled() ? &sb : nullptr},
                                  KLoop{*flush, false});
      d.assign(out.data(), out.data() + out.size());
    } catch (const std::invalid_argument& e) {
      return v.error = e.what(), v;
    }
  } else {
    const TileInputs in{a, b, c, scale_a, scale_b};
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

std::vector<NeighbourModel> neighbouring_models(const Instruction& instruction) {
  std::vector<NeighbourModel> out;
  const Model& model = instruction.model;
  if (model.arithmetic != Arithmetic::fused_dot_add) return out;
  const auto add = [&](std::string change, auto edit) {
    Instruction neighbour = instruction;
    edit(neighbour.model.fused);
    out.push_back({std::move(change), neighbour.model, check_model(neighbour).value_or("")});
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

Model ModelChange::applied_to(Model model) const {
  FusedDotAdd& p = model.fused;
  if (chunk) p.chunk = *chunk;
  if (fraction_bits) p.fraction_bits = *fraction_bits;
  if (interleave) p.interleave = *interleave;
  if (zero_exponent) p.zero_exponent = *zero_exponent;
  if (c_entry) p.c_entry = *c_entry;
  if (rounding) p.rounding = *rounding;
  if (unpack_to) p.unpack_to = *unpack_to;
  if (rounded_zero_keeps_sign) p.rounded_zero_keeps_sign = *rounded_zero_keeps_sign;
  return model;
}

std::variant<ModelChange, std::string> parse_model_change(std::string_view text) {
  ModelChange change;
  if (text.empty()) return std::string("an empty change (give key=value, ...)");
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    const std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) return fmt::format("'{}' is not key=value", item);
    const std::string_view key = item.substr(0, equals), value = item.substr(equals + 1);
    const auto number = [&](std::optional<int>& out) -> std::optional<std::string> {
      int v = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc{} || end != value.data() + value.size()) return fmt::format("{}: '{}' is not an integer", key, value);
      out = v;
      return std::nullopt;
    };
    const auto word = [&]<class T>(std::optional<T>& out, std::initializer_list<std::pair<std::string_view, T>> words)
        -> std::optional<std::string> {
      std::string known;
      for (const auto& [name, v] : words) {
        if (name == value) return out = v, std::nullopt;
        known += (known.empty() ? "" : ", ") + std::string(name);
      }
      return fmt::format("{}: '{}' is not one of {}", key, value, known);
    };
    std::optional<std::string> error;
    if (key == "L") error = number(change.chunk);
    else if (key == "F") error = number(change.fraction_bits);
    else if (key == "interleave") error = number(change.interleave);
    else if (key == "e_zero") error = number(change.zero_exponent);
    else if (key == "c") error = word(change.c_entry, {{"aligned", CEntry::aligned}, {"after", CEntry::added_after}});
    else if (key == "rounding")
      error = word(change.rounding, {{"rz-fp32", OutputRounding::rz_fp32}, {"rz-e8m13", OutputRounding::rz_e8m13},
                                     {"rne-fp16", OutputRounding::rne_fp16}});
    else if (key == "unpack")
      error = word(change.unpack_to, {{"none", std::optional<Format>{}}, {"f16", std::optional<Format>{formats::fp16}}});
    else if (key == "zero") error = word(change.rounded_zero_keeps_sign, {{"keep-sign", true}, {"plus", false}});
    else error = fmt::format("unknown key '{}' (L, F, interleave, c, rounding, unpack, e_zero, zero)", key);
    if (error) return *error;
  }
  return change;
}

}  // namespace lowbit::mma
