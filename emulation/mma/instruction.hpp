// The MMA registry: tensor-core instructions as data, each an atom (the constexpr record of
// emulation/mma/atom.hpp: PTX name, shape, operand formats, fragment layouts) plus how it computes
// on an architecture (a model: one arithmetic algorithm with parameters) and where the model
// comes from.
//
//   Instruction i = find_instruction("sm_90", "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3");
//   i.atom.n == 256; i.model.fused.fraction_bits == 13; i.source.status == Verification::inferred
//
// The arithmetic (emulation/mma/arithmetic.hpp) reads only Model; the probes and layouts read
// only Atom.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "emulation/format.hpp"
#include "emulation/mma/atom.hpp"

namespace lowbit::mma {

// ---------------------------------------------------------------------------------------------
// The arithmetic model
// ---------------------------------------------------------------------------------------------

// How C (the accumulator input) enters.
enum class CEntry : std::uint8_t {
  aligned,         // C is one more term of the first chunk's fused sum (its exponent takes part in the
                   // max; truncated to F bits like the products); later chunks take the running sum.
  added_after,     // the chunks start from +0; C is added at the end by a round-to-nearest-even add in
                   // the accumulator's format (Hopper mma.sync FP8: software ending in FADD or HADD2).
};

// How each chunk's exact sum becomes the accumulator value.
enum class OutputRounding : std::uint8_t {
  rz_fp32,   // toward zero to binary32; a result of magnitude >= 2^128 is +-Inf
  rz_e8m13,  // toward zero to 1+8+13 bits ("FP22"), held in a binary32 register (low 10 bits zero)
  rne_fp16,  // to nearest even to binary16 (f16 accumulators)
};

// Block scaling (sm_100/sm_120 block_scale instructions).
enum class ScaleMode : std::uint8_t {
  none,
  per_product,  // each product's exponent is offset by the exponents of scale_a * scale_b (MXF8F6F4)
  per_group,    // products are summed exactly in groups of `group`; each group sum, times the
                // scales' significands, is one term whose exponent is the scales' (MXF4 / NVFP4)
};

// The truncated fused dot-product-add (MMA-Sim's T-FDPA / ST-FDPA / GST-FDPA, see
// docs/mma-models.md). For each chunk of `chunk` products, chained through the accumulator:
//   terms = products (significand sa*sb in [1,4) or subnormal, exponent ea+eb) + accumulator;
//   a zero term has exponent zero_exponent;  E = max exponent;
//   S = exact sum of trunc(term * 2^(F - E));  accumulator = round(S * 2^(E - F)).
struct FusedDotAdd {
  int chunk = 16;          // L: products fused per step
  int interleave = 0;      // 0: chunk c holds k in [cL, cL + L). g > 0: k is dealt to chunks in runs of
                           // g consecutive k: chunk(k) = (k / g) mod (K / L) (Hopper FP8 mma.sync: 2)
  int fraction_bits = 25;  // F: bits kept below the largest term's leading bit
  CEntry c_entry = CEntry::aligned;
  OutputRounding rounding = OutputRounding::rz_fp32;
  int zero_exponent = -133;  // exponent a zero term takes in the max
  ScaleMode scale_mode = ScaleMode::none;
  int group = 0;  // products per exact group sum (ScaleMode::per_group)
  // The format the operands are converted to (exactly) before the arithmetic sees them, or none.
  // Significands and exponents of the products are then this format's: Hopper mma.sync FP8
  // unpacks to f16 (F2FP) before HMMA, so an e4m3 subnormal is a normal f16 number there.
  std::optional<Format> unpack_to;
  // A nonzero sum that rounds to zero: -0 when negative (MMA-Sim's rule, kept for the published
  // models) or +0 whatever its sign (measured on Hopper).
  bool rounded_zero_keeps_sign = true;

  // Why these parameters cannot run an instruction of depth k, or nothing.
  std::optional<std::string> validate(int k) const;
  // The format whose significands and exponents the arithmetic sees for operand format f.
  const Format& arithmetic_format(const Format& f) const { return unpack_to ? *unpack_to : f; }
  friend bool operator==(const FusedDotAdd&, const FusedDotAdd&) = default;
};

// Integer MMA: the exact sum of products plus C, wrapped to 32 bits or saturated (.satfinite).
struct IntegerDotAdd {
  bool saturate = false;
  friend bool operator==(const IntegerDotAdd&, const IntegerDotAdd&) = default;
};

enum class Arithmetic : std::uint8_t { fused_dot_add, integer };

struct Model {
  Arithmetic arithmetic = Arithmetic::fused_dot_add;
  FusedDotAdd fused;      // when arithmetic == fused_dot_add
  IntegerDotAdd integer;  // when arithmetic == integer
};

// How far a model is backed by hardware.
enum class Verification : std::uint8_t {
  verified,   // every recorded tile of this exact instruction passes (verification/vectors/)
  reported,   // measured on our H200 per shared/notes/hopper-numerics-facts.md; no tiles recorded here
  inferred,   // same model as a verified instruction (other N, other input pairing); not recorded
  published,  // a published reference only (MMA-Sim); no such GPU here
};
std::string_view to_string(Verification v);

struct ModelSource {
  std::string_view reference;  // where the model and its parameters come from
  Verification status = Verification::published;
  std::string_view note;  // what is assumed rather than measured
};

// ---------------------------------------------------------------------------------------------
// Instructions
// ---------------------------------------------------------------------------------------------

std::string_view to_string(Issue i);

struct Instruction {
  std::string arch;  // "sm_90" (a trailing a/f of sm_90a, sm_120a is dropped)
  Atom atom;
  Model model;
  ModelSource source;
};

// Thrown for an instruction the emulator does not model; what() lists the modeled ones.
class UnknownInstruction : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The instruction `name` on `arch` ("sm_90", "sm_90a", ...). N is read from the name for any
// legal N. Throws UnknownInstruction naming what is wrong and listing the modeled instructions.
Instruction find_instruction(std::string_view arch, std::string_view name);

// Every modeled instruction (each type combination; N at the family's smallest and largest).
struct InstructionName {
  std::string arch, name;
};
std::vector<InstructionName> instruction_names();

// One line per modeled family, e.g.
// "sm_90  wgmma.mma_async.sync.aligned.m64nNk32.f32.{e4m3|e5m2}.{e4m3|e5m2}  (N = 8..256 step 8)  verified".
std::vector<std::string> modeled_instructions();

}  // namespace lowbit::mma
