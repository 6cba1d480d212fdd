// Input tiles for probing MMA instructions: test families, each tile reproducible from
// (seed, instruction, index, family) alone, so any recorded tile can be regenerated and any batch
// split changes nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "emulation/format.hpp"
#include "emulation/mma/atom.hpp"
#include "verification/vectors.hpp"

namespace lowbit::mma {

// By default families cycle with the tile index (index mod kCycledFamilies): the first six are
// the families of ../shared/spec/mma-vectors.md in its order (t mod 6 there). The targeted
// families after them settle single questions about a model and run only when asked for.
enum class Family : std::uint8_t {
  random,        // random finite codes over all exponents (subnormals, zeros too), random C
  zero_ab,       // A and B zeros of either sign, random C
  narrow_band,   // codes with exponents in [0, 1] (integers in [-3, 3]), C = 0
  dominant,      // one dominant A element per row, small others, random C
  random_c0,     // random finite codes, C = 0
  exact,         // values 0, +-0.5, +-1, +-2 (integers 0, +-1, +-2), C = 0: every model agrees
  specials,      // NaN / Inf / max finite / zeros sprinkled into A, B and C; integers: extreme
                 // codes with C near the s32 limits (overflow)
  cancellation,  // products cancel in pairs (exact sum 0) with C = +-0; half the tiles get one
                 // perturbed A element
  wide_band,     // codes with exponents in [-8, 8], C with exponents in [-8, 16]
  // Targeted (floating accumulators only):
  tiny_products,  // operand exponents in [-80, -64] (clipped to the format), C = +-0: product
                  // exponents around -160 .. -128, below the zero term's exponent e_zero, so the
                  // sum is truncated where e_zero says (bf16 and wider ranges; f16 and fp8
                  // products never get there)
  subnormal_c,    // C subnormal in the accumulator format (both signs, the extreme codes too);
                  // A and B all zeros in half the tiles (D = C + 0 shows whether the add flushes
                  // subnormals), the smallest codes of the format in the others
};
inline constexpr int kCycledFamilies = 9;
inline constexpr int kFamilyCount = 11;

// The family of tile `index` in the default cycle.
Family family_of(std::uint64_t index);
std::string_view to_string(Family f);
std::optional<Family> parse_family(std::string_view name);
// Whether tiles of family f mean anything for the instruction (the targeted families need
// floating accumulators).
bool applies(Family f, const Atom& atom);

// Tile `index` of the stream `seed` for the instruction, of `family` (default: family_of(index)):
// A is m x depth, B depth x n (depth: the instruction's k, or a K loop's K; 0 for atom.k);
// arch/device empty, a, b, c filled, d empty. The codes depend on (seed, instruction name, index,
// family) only, and the depth on how many there are. extra holds "family", "seed", "index", and "c_type"/"d_type" ("f16",
// "s32") when the accumulator is not fp32 (C and D words as accumulator_word() in vectors.hpp
// stores them).
Tile make_input_tile(const Atom& atom, std::uint64_t seed, std::uint64_t index, std::optional<Family> family = std::nullopt,
                     int depth = 0);

// Where the arithmetic is exact, every model agrees: integer instructions (the exact sum,
// wrapped to 32 bits, or saturated when the name has ".satfinite") and the `exact` family of
// floating ones (sums of multiples of 1/4 below 2^8). Says whether d holds that result
// (floating results compared as values: the sign of an exact zero sum is the models'
// business); nothing for other tiles (the family is read from the tile's "family" field). A check of layouts and recording that needs no model.
// The tile's k is its depth (a K loop's K for K-loop tiles).
std::optional<bool> exact_check(const Atom& atom, const Tile& tile);

}  // namespace lowbit::mma
