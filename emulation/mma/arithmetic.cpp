#include "emulation/mma/arithmetic.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "emulation/mma/engine.hpp"

namespace lowbit::mma {
namespace {

// The largest code an operand may hold: the format's codes; a UE4M3 scale may carry the sign bit
// of the e4m3 byte it is stored in (ignored, as MMA-Sim does).
std::uint32_t largest_code(const Format& f) { return f == formats::ue4m3 ? 0xffu : f.code_count_minus_one(); }

std::optional<std::string> check_operand(std::string_view name, std::span<const std::uint32_t> codes, std::size_t count,
                                         const Format& f) {
  if (codes.size() != count)
    return fmt::format("{} has {} elements, the instruction takes {}", name, codes.size(), count);
  const std::uint32_t largest = largest_code(f);
  for (std::size_t i = 0; i < codes.size(); ++i)
    if (codes[i] > largest)
      return fmt::format("{} element {} is 0x{:x}, not a {} code", name, i, codes[i], format_name(f));
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_inputs(const Atom& at, const TileInputs& in) {
  const auto m = std::size_t(at.m), n = std::size_t(at.n), k = std::size_t(at.k);
  if (auto e = check_operand("A", in.a, m * k, at.a)) return e;
  if (auto e = check_operand("B", in.b, k * n, at.b)) return e;
  if (auto e = check_operand("C", in.c, m * n, at.c)) return e;
  const auto columns = std::size_t(at.scale_columns());
  if (at.block_scaled()) {
    if (auto e = check_operand("scale_a", in.scale_a, m * columns, at.scale)) return e;
    if (auto e = check_operand("scale_b", in.scale_b, columns * n, at.scale)) return e;
  } else if (!in.scale_a.empty() || !in.scale_b.empty()) {
    return fmt::format("{} takes no scale factors", at.name.view());
  }
  return std::nullopt;
}

std::optional<std::string> check_model(const Instruction& instruction) {
  try {
    const detail::Engine engine(instruction);
  } catch (const std::invalid_argument& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

std::vector<std::uint32_t> execute(const Instruction& instruction, const TileInputs& in) {
  const Atom& at = instruction.atom;
  if (auto why = check_inputs(at, in)) throw std::invalid_argument(at.name.str() + ": " + *why);
  const detail::Engine engine(instruction);
  const auto a = engine.decode(in.a, at.m, at.k, at.k, in.scale_a, false);
  const auto b = engine.decode(in.b, at.n, at.k, at.k, in.scale_b, true);
  std::vector<std::uint32_t> d(std::size_t(at.m) * std::size_t(at.n));
  engine.run_all(a, b, in.c.data(), d.data(), KLoop{});
  return d;
}

}  // namespace lowbit::mma
