// Which model explains Hopper's fp8 tensor-core results where the emulator's registry does not?
// Candidate models, read off the SASS of the probes (results/gpu/sass-summary.md), checked on
// recorded tiles:
//
//   f16-first       mma.sync m16n8k32 fp8 -> f32: the operands are converted to f16 first
//                   (F2FP.F16.E4M3/E5M2.UNPACK_B; e4m3 subnormals become normal f16 numbers),
//                   then the registry's model runs on the f16 operands.
//   f16-hadd2       mma.sync m16n8k32 f16.e4m3.e4m3.f16: f16 operands, X = HMMA.F16 over
//                   k mod 4 in {0,1} from +0, Y = HMMA.F16 over k mod 4 in {2,3} from X
//                   (L = 16, F = 25, nearest even to f16), D = HADD2(Y, C): an f16 add, nearest
//                   even.
//   l32-f13-rne16   wgmma m64nNk32 f16.e4m3.e4m3: the fp8 wgmma model (L = 32, F = 13, C aligned)
//                   rounding to nearest even f16 instead of toward zero to e8m13.
//
// usage: hopper-fp8-models FILE.jsonl[.gz]...   prints, per file and candidate, the tiles it matches.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "emulation/convert.hpp"
#include "emulation/mma/arithmetic.hpp"
#include "emulation/mma/vector_file.hpp"
#include "emulation/mma/vectors.hpp"

using namespace lowbit;
using namespace lowbit::mma;

namespace {

constexpr ConversionOptions kExact{Rounding::nearest_even, Overflow::inf};  // fp8 -> f16 is exact

std::vector<Code> to_f16(const Format& from, const std::vector<Code>& codes) {
  std::vector<Code> out(codes.size());
  for (std::size_t i = 0; i < codes.size(); ++i) out[i] = encode(formats::fp16, decode(from, codes[i]), kExact);
  return out;
}

std::vector<std::uint32_t> accumulator_codes(const Format& f, const std::vector<std::uint32_t>& words) {
  std::vector<std::uint32_t> out(words.size());
  for (std::size_t i = 0; i < words.size(); ++i) out[i] = *accumulator_code(f, words[i]);
  return out;
}

// The model of a modeled sibling instruction with other formats and output rounding.
Instruction sibling(const std::string& name, int n, const Format& operands, const Format& accumulator) {
  Instruction i = find_instruction("sm_90", name);
  i.atom.n = n;
  i.atom.a = i.atom.b = operands;
  i.atom.c = i.atom.d = accumulator;
  if (accumulator == formats::fp16) i.model.fused.rounding = OutputRounding::rne_fp16;
  return i;
}

// D as recorded (f16 accumulators widened), or nothing when the candidate does not apply.
std::optional<std::vector<std::uint32_t>> candidate(const std::string& which, const Tile& t) {
  const bool sync = t.instruction.starts_with("mma.sync.aligned.m16n8k32.row.col.");
  const bool wgmma = t.instruction.starts_with("wgmma.mma_async.sync.aligned.m64n");
  if (which == "f16-first" && sync && t.instruction.ends_with(".f32")) {
    const Atom fp8 = find_instruction("sm_90", t.instruction).atom;
    const Instruction i = sibling(t.instruction, t.n, formats::fp16, formats::fp32);
    return execute(i, {to_f16(fp8.a, t.a), to_f16(fp8.b, t.b), t.c});
  }
  if (which == "f16-hadd2" && sync && t.instruction.ends_with(".f16.e4m3.e4m3.f16")) {
    Instruction chained = sibling("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", t.n, formats::fp16, formats::fp16);
    chained.model.fused.c_entry = CEntry::aligned;  // from +0: C joins afterwards
    const std::vector<std::uint32_t> zero(t.c.size(), 0);
    const auto y = execute(chained, {to_f16(formats::e4m3, t.a), to_f16(formats::e4m3, t.b), zero});
    std::vector<std::uint32_t> d(y.size());
    const auto c = accumulator_codes(formats::fp16, t.c);
    for (std::size_t k = 0; k < d.size(); ++k) {
      const double sum = decode(formats::fp16, y[k]) + decode(formats::fp16, c[k]);  // exact in double
      d[k] = accumulator_word(formats::fp16, std::isnan(sum) ? 0x7fffu : encode(formats::fp16, sum, kExact));
    }
    return d;
  }
  if (which == "l32-f13-rne16" && wgmma && t.instruction.ends_with("k32.f16.e4m3.e4m3")) {
    const Instruction i = sibling("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", t.n, formats::e4m3, formats::fp16);
    auto d = execute(i, {t.a, t.b, accumulator_codes(formats::fp16, t.c)});
    for (auto& w : d) w = accumulator_word(formats::fp16, w);
    return d;
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.jsonl[.gz]...\n", argv[0]);
    return 2;
  }
  for (int f = 1; f < argc; ++f)
    for (const std::string which : {"f16-first", "f16-hadd2", "l32-f13-rne16"}) {
      std::size_t tiles = 0, matched = 0, applicable = 0;
      const auto error = for_each_line(argv[f], [&](std::size_t number, std::string_view line) {
        const auto parsed = parse_tile_line(line);
        if (!parsed.tile) {
          std::fprintf(stderr, "%s:%zu: %s\n", argv[f], number, parsed.error.c_str());
          return;
        }
        ++tiles;
        const auto d = candidate(which, *parsed.tile);
        applicable += d.has_value();
        matched += d && *d == parsed.tile->d;
      });
      if (error) {
        std::fprintf(stderr, "%s\n", error->c_str());
        return 1;
      }
      if (applicable)
        std::printf("%-14s %6zu of %6zu tiles match (%zu in the file)  %s\n", which.c_str(), matched, applicable, tiles, argv[f]);
    }
  return 0;
}
