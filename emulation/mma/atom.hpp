// A tensor-core instruction as a constexpr record, host and device: what it is (PTX name, issue
// kind, shape, operand and accumulator formats, register fragments), apart from how it computes
// (its arithmetic model, emulation/mma/instruction.hpp). Every field but the parts of the name
// is derived here from those parts, once: the name from the shape and formats, the fragments
// from layout.hpp. The MMA registry, the GPU probes, the quantizer's thread groups and the
// kernels all read this one record.
//
//   constexpr Atom s8 = atoms::wgmma_m64nNk32_s32_s8_s8(128);
//   s8.name.view() == "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8"
//   s8.c_fragment == layout::wgmma_m64_d(128);  s8.b_fragment.empty()  (B comes from shared memory)
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "emulation/format.hpp"
#include "emulation/layout.hpp"

namespace lowbit::mma {

enum class Issue : std::uint8_t {
  mma_sync,  // one warp, operands in registers
  wgmma,     // one warpgroup (sm_90a), B (and optionally A) from shared memory
  tcgen05,   // sm_100a, operands in shared/tensor memory
};

// The PTX type names of the formats tensor-core instructions take (a function, not a table
// variable, so that device code can read it).
struct PtxType {
  const char* name;
  Format format;
};
LOWBIT_HD constexpr std::array<PtxType, 16> ptx_types() {
  return {{{"f32", formats::fp32}, {"f16", formats::fp16}, {"bf16", formats::bf16}, {"tf32", formats::tf32},
           {"e4m3", formats::e4m3}, {"e5m2", formats::e5m2}, {"e3m2", formats::e3m2}, {"e2m3", formats::e2m3},
           {"e2m1", formats::e2m1}, {"s8", formats::int8}, {"u8", formats::uint8}, {"s4", formats::int4},
           {"u4", formats::uint4}, {"s32", formats::s32}, {"ue8m0", formats::ue8m0}, {"ue4m3", formats::ue4m3}}};
}

// The PTX name of format f, or "" when no instruction takes it.
LOWBIT_HD constexpr const char* ptx_type(const Format& f) {
  for (const auto& t : ptx_types())
    if (t.format == f) return t.name;
  return "";
}

// Text of fixed capacity that constant expressions and device code can build and keep.
struct AtomName {
  static constexpr int kCapacity = 127;
  char text[kCapacity + 1]{};
  int size = 0;
  bool overflowed = false;  // something did not fit (the registry refuses such a name)

  LOWBIT_HD constexpr void append(const char* s) {
    for (; *s; ++s) {
      if (size == kCapacity) {
        overflowed = true;
        return;
      }
      text[size++] = *s;
    }
  }
  LOWBIT_HD constexpr void append(int v) {  // decimal
    char digits[12]{};
    int count = 0;
    unsigned u = v < 0 ? 0u - unsigned(v) : unsigned(v);
    do digits[count++] = char('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0) append("-");
    for (char one[2]{}; count > 0;) one[0] = digits[--count], append(one);
  }
  LOWBIT_HD constexpr const char* c_str() const { return text; }
  constexpr std::string_view view() const { return {text, std::size_t(size)}; }
  std::string str() const { return std::string(view()); }
  friend constexpr bool operator==(const AtomName&, const AtomName&) = default;
};

LOWBIT_HD constexpr void append(AtomName& out, const char* s) { out.append(s); }
LOWBIT_HD constexpr void append(AtomName& out, int v) { out.append(v); }
inline void append(std::string& out, const char* s) { out += s; }
inline void append(std::string& out, int v) { out += std::to_string(v); }

// What an instruction's name spells. Types are the PTX names; a block-scaled instruction's
// scale_vec may be left out of the name where PTX has a default (scale_vec_in_name = false).
struct NameParts {
  Issue issue = Issue::mma_sync;
  int m = 0, n = 0, k = 0;
  const char* kind = "";       // "kind::f8f6f4" etc., "" for none
  bool block_scale = false;
  const char* scale_vec = "";  // "scale_vec::2X" etc. when spelled, else ""
  bool satfinite = false;
  const char* types[5]{};      // d, a, b[, c][, scale]: as many as the name carries
};

// Appends the name as PTX spells it (tcgen05: PTX carries shape and types in the instruction
// descriptor; our names append them, see docs/mma-models.md). Text is AtomName or std::string.
template <class Text>
LOWBIT_HD constexpr void spell_name(Text& out, const NameParts& p) {
  const auto word = [&](const char* w) {
    if (*w) append(out, "."), append(out, w);
  };
  const auto shape = [&] {
    append(out, "m"), append(out, p.m), append(out, "n"), append(out, p.n), append(out, "k"), append(out, p.k);
  };
  const auto qualifiers = [&] {
    word(p.kind);
    if (p.block_scale) word("block_scale");
    word(p.scale_vec);
  };
  switch (p.issue) {
    case Issue::mma_sync:
      append(out, "mma.sync.aligned."), shape(), append(out, ".row.col");
      qualifiers();
      if (p.satfinite) word("satfinite");
      break;
    case Issue::wgmma:
      append(out, "wgmma.mma_async.sync.aligned."), shape();
      if (p.satfinite) word("satfinite");
      break;
    case Issue::tcgen05:
      append(out, "tcgen05.mma.cta_group::1");
      qualifiers();
      append(out, "."), shape();
      break;
  }
  for (const char* t : p.types)
    if (t) word(t);
}

// The register fragments of layout.hpp for an instruction's operands; empty where the operand
// does not come from registers (wgmma B, tcgen05) or layout.hpp has no map for the shape yet.
// mma.sync m16n8: the k of the shape fixes the element width in registers (k16: 16-bit, k32:
// 8-bit, k64: 4-bit elements; kind::f8f6f4 keeps fp6/fp4 in 8-bit containers).
LOWBIT_HD constexpr layout::Fragment a_fragment(Issue issue, int m, int n, int k) {
  if (issue == Issue::wgmma) return k == 16 ? layout::wgmma_m64k16_a16 : k == 32 ? layout::wgmma_m64k32_a8 : layout::Fragment{};
  if (issue != Issue::mma_sync || m != 16 || n != 8) return {};
  return k == 16 ? layout::mma_m16n8k16_a16 : k == 32 ? layout::mma_m16n8k32_a8 : k == 64 ? layout::mma_m16n8k64_a4 : layout::Fragment{};
}
LOWBIT_HD constexpr layout::Fragment b_fragment(Issue issue, int m, int n, int k) {
  if (issue != Issue::mma_sync || m != 16 || n != 8) return {};
  return k == 16 ? layout::mma_m16n8k16_b16 : k == 32 ? layout::mma_m16n8k32_b8 : k == 64 ? layout::mma_m16n8k64_b4 : layout::Fragment{};
}
LOWBIT_HD constexpr layout::Fragment c_fragment(Issue issue, int m, int n, const Format& c) {
  if (issue == Issue::wgmma) return layout::wgmma_m64_d(n);
  if (issue != Issue::mma_sync) return {};
  if (m == 16 && n == 8) return layout::mma_m16n8_c;
  if (m == 8 && n == 8 && c.is_integer()) return layout::mma_m8n8_c;
  return {};
}

struct Atom {
  AtomName name;  // the PTX instruction, as the vector files spell it
  Issue issue = Issue::mma_sync;
  int m = 0, n = 0, k = 0;
  Format a{}, b{};  // element formats of A and B (codes as in the vector files)
  Format c{}, d{};  // accumulator formats: fp32, fp16 or s32
  Format scale{};   // ue8m0 / ue4m3 for block_scale instructions (scale_block > 0)
  int scale_block = 0;     // k elements per scale factor; 0: not block-scaled
  bool satfinite = false;  // integer results saturate instead of wrapping
  // Register fragments (layout.hpp); D is laid out as C. Empty: see a_fragment() above.
  layout::Fragment a_fragment{}, b_fragment{}, c_fragment{};

  LOWBIT_HD constexpr bool block_scaled() const { return scale_block > 0; }
  LOWBIT_HD constexpr int scale_columns() const { return scale_block ? k / scale_block : 0; }  // scales per row of A
  friend constexpr bool operator==(const Atom&, const Atom&) = default;
};

// The parts an atom is made of; make_atom derives the rest.
struct AtomSpec {
  Issue issue = Issue::mma_sync;
  int m = 0, n = 0, k = 0;
  Format d{}, a{}, b{};
  Format c{};                    // mma.sync only (its name carries C's type); wgmma and tcgen05 accumulate in D
  const char* kind = "";         // "kind::f8f6f4" etc.
  int scale_vec = 0;             // block_scale: scale factors per row of A over the k of one instruction
  Format scale{};                // block_scale: the scale factors' format
  bool scale_vec_in_name = true;  // false: the name leaves out PTX's default scale_vec
  bool satfinite = false;
};

LOWBIT_HD constexpr Atom make_atom(const AtomSpec& s) {
  Atom at;
  at.issue = s.issue;
  at.m = s.m, at.n = s.n, at.k = s.k;
  at.a = s.a, at.b = s.b, at.d = s.d;
  at.c = s.issue == Issue::mma_sync ? s.c : s.d;
  at.satfinite = s.satfinite;
  const char vec[] = {'s', 'c', 'a', 'l', 'e', '_', 'v', 'e', 'c', ':', ':', char('0' + s.scale_vec), 'X', '\0'};
  if (s.scale_vec > 0) at.scale = s.scale, at.scale_block = s.k / s.scale_vec;
  NameParts parts{s.issue, s.m, s.n, s.k, s.kind, s.scale_vec > 0, s.scale_vec > 0 && s.scale_vec_in_name ? vec : "",
                  s.satfinite, {ptx_type(s.d), ptx_type(s.a), ptx_type(s.b)}};
  int types = 3;
  if (s.issue == Issue::mma_sync) parts.types[types++] = ptx_type(s.c);
  if (s.scale_vec > 0) parts.types[types++] = ptx_type(s.scale);
  spell_name(at.name, parts);
  at.a_fragment = a_fragment(s.issue, s.m, s.n, s.k);
  at.b_fragment = b_fragment(s.issue, s.m, s.n, s.k);
  at.c_fragment = c_fragment(s.issue, s.m, s.n, at.c);
  return at;
}

// mma.sync.aligned.mMnNkK.row.col[.satfinite].D.A.B.C
LOWBIT_HD constexpr Atom mma_sync_atom(int m, int n, int k, Format d, Format a, Format b, Format c,
                                       bool satfinite = false) {
  return make_atom({.issue = Issue::mma_sync, .m = m, .n = n, .k = k, .d = d, .a = a, .b = b, .c = c, .satfinite = satfinite});
}
// wgmma.mma_async.sync.aligned.m64nNkK[.satfinite].D.A.B
LOWBIT_HD constexpr Atom wgmma_atom(int n, int k, Format d, Format a, Format b, bool satfinite = false) {
  return make_atom({.issue = Issue::wgmma, .m = 64, .n = n, .k = k, .d = d, .a = a, .b = b, .satfinite = satfinite});
}

// "mma.m16n8k64.s4": issue, shape and element type, the short label of reports and of the
// quantizer's group names.
inline std::string short_name(const Atom& at) {
  std::string s(at.issue == Issue::mma_sync ? "mma" : at.issue == Issue::wgmma ? "wgmma" : "tcgen05");
  s += ".m" + std::to_string(at.m) + "n" + std::to_string(at.n) + "k" + std::to_string(at.k) + ".";
  return s + ptx_type(at.a);
}

// Instructions named in the quantizer, the attention recipes and the kernels.
namespace atoms {
inline constexpr Atom mma_m16n8k32_s32_s8_s8 = mma_sync_atom(16, 8, 32, formats::s32, formats::int8, formats::int8, formats::s32);
inline constexpr Atom mma_m16n8k64_s32_s4_s4 = mma_sync_atom(16, 8, 64, formats::s32, formats::int4, formats::int4, formats::s32);
inline constexpr Atom mma_m8n8k16_s32_s8_s8 = mma_sync_atom(8, 8, 16, formats::s32, formats::int8, formats::int8, formats::s32);
inline constexpr Atom mma_m8n8k32_s32_s4_s4 = mma_sync_atom(8, 8, 32, formats::s32, formats::int4, formats::int4, formats::s32);
// wgmma's N is any multiple of 8 up to 256.
LOWBIT_HD constexpr Atom wgmma_m64nNk32_s32_s8_s8(int n) {
  return wgmma_atom(n, 32, formats::s32, formats::int8, formats::int8);
}
LOWBIT_HD constexpr Atom wgmma_m64nNk32_f32_e4m3_e4m3(int n) {
  return wgmma_atom(n, 32, formats::fp32, formats::e4m3, formats::e4m3);
}
}  // namespace atoms

}  // namespace lowbit::mma
