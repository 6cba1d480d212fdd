#include "emulation/format.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace lowbit {
namespace {

constexpr std::array kPresets{
    NamedFormat{"fp32", formats::fp32, "IEEE binary32"},
    NamedFormat{"tf32", formats::tf32, "TensorFloat-32 (tensor-core input)"},
    NamedFormat{"bf16", formats::bf16, "bfloat16"},
    NamedFormat{"fp16", formats::fp16, "IEEE binary16"},
    NamedFormat{"e4m3", formats::e4m3, "OCP FP8 E4M3 (fn)"},
    NamedFormat{"e4m3fnuz", formats::e4m3fnuz, "FP8 E4M3 fnuz (Graphcore/AMD)"},
    NamedFormat{"e5m2", formats::e5m2, "OCP FP8 E5M2"},
    NamedFormat{"e5m2fnuz", formats::e5m2fnuz, "FP8 E5M2 fnuz (Graphcore/AMD)"},
    NamedFormat{"e3m4", formats::e3m4, "FP8 E3M4 (ml_dtypes float8_e3m4)"},
    NamedFormat{"e2m3", formats::e2m3, "OCP FP6 E2M3"},
    NamedFormat{"e3m2", formats::e3m2, "OCP FP6 E3M2"},
    NamedFormat{"e2m1", formats::e2m1, "OCP FP4 E2M1"},
    NamedFormat{"ue8m0", formats::ue8m0, "MX block scale"},
    NamedFormat{"ue4m3", formats::ue4m3, "NVFP4 block scale"},
    NamedFormat{"e8m13", formats::e8m13, "FP22, the Hopper FP8 tensor-core accumulator"},
    NamedFormat{"int8", formats::int8, "two's complement integer"},
    NamedFormat{"int4", formats::int4, "two's complement integer"},
    NamedFormat{"uint8", formats::uint8, "unsigned integer"},
    NamedFormat{"uint4", formats::uint4, "unsigned integer"},
};

struct Alias {
  std::string_view name;
  std::string_view preset;
};
constexpr std::array kAliases{
    Alias{"float32", "fp32"}, Alias{"f32", "fp32"},        Alias{"bfloat16", "bf16"},  Alias{"float16", "fp16"},
    Alias{"f16", "fp16"},     Alias{"half", "fp16"},       Alias{"e4m3fn", "e4m3"},    Alias{"e2m3fn", "e2m3"},
    Alias{"e3m2fn", "e3m2"},  Alias{"e2m1fn", "e2m1"},     Alias{"fp4", "e2m1"},       Alias{"e8m0", "ue8m0"},
    Alias{"e8m0fnu", "ue8m0"}, Alias{"fp22", "e8m13"},
};

std::optional<Format> find_preset(std::string_view name) {
  for (const auto& a : kAliases)
    if (a.name == name) name = a.preset;
  for (const auto& p : kPresets)
    if (p.name == name) return p.format;
  return std::nullopt;
}

// The record "eXmY" (or "ueXmY") stands for when it is not a preset: IEEE-like.
Format generic_float(int exponent_bits, int mantissa_bits, bool is_signed) {
  Format f;
  f.exponent_bits = exponent_bits;
  f.mantissa_bits = mantissa_bits;
  f.bias = exponent_bits >= 1 && exponent_bits <= 31 ? (1 << (exponent_bits - 1)) - 1 : 0;
  f.is_signed = is_signed;
  f.nan = mantissa_bits > 0 ? NanEncoding::ieee : NanEncoding::none;
  f.inf = mantissa_bits > 0 ? InfEncoding::ieee : InfEncoding::none;
  f.storage_bits = f.code_bits();
  return f;
}

Format integer_format(int bits, bool is_signed) {
  Format f;
  f.kind = FormatKind::integer;
  f.mantissa_bits = is_signed ? bits - 1 : bits;
  f.is_signed = is_signed;
  f.subnormals = false;
  f.storage_bits = bits;
  return f;
}

// IEEE P3109 binary formats: K bits, precision P, signed (NaN is the negative-zero code) or
// unsigned (NaN is the top code), extended (Inf is the top non-NaN code) or finite.
Format p3109(int k, int p, bool is_signed, bool extended) {
  Format f;
  f.mantissa_bits = p - 1;
  f.exponent_bits = k - p + (is_signed ? 0 : 1);
  f.bias = is_signed ? (k - p - 1 >= 0 ? 1 << (k - p - 1) : 0) : 1 << (k - p);
  f.is_signed = is_signed;
  f.nan = is_signed ? NanEncoding::negative_zero : NanEncoding::top_code;
  f.inf = extended ? InfEncoding::top_code : InfEncoding::none;
  f.storage_bits = k;
  return f;
}

std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  if (s.empty()) return std::nullopt;
  const char* first = s.data();
  if (*first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, s.data() + s.size(), v);
  if (ec != std::errc{} || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// 'text' (without the string concatenation that trips GCC 12's -Wrestrict false positive).
std::string quoted(std::string_view text) {
  std::string q;
  q.reserve(text.size() + 2);
  q.push_back('\'');
  q.append(text);
  q.push_back('\'');
  return q;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const auto end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// "e5m2", "ue4m3", "e4m3fnuz" -> record, or an error.
ParsedFormat parse_float_base(std::string_view s) {
  const std::string_view original = s;
  bool is_signed = true;
  if (s.starts_with('u')) {
    is_signed = false;
    s.remove_prefix(1);
  }
  if (!s.starts_with('e')) return {std::nullopt, ""};
  s.remove_prefix(1);
  const auto m_pos = s.find('m');
  if (m_pos == std::string_view::npos)
    return {std::nullopt, quoted(original) + ": expected eXmY (exponent bits X, mantissa bits Y)"};
  const auto exponent = parse_int(s.substr(0, m_pos));
  std::string_view rest = s.substr(m_pos + 1);
  std::size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  const auto mantissa = parse_int(rest.substr(0, digits));
  const std::string_view suffix = rest.substr(digits);
  if (!exponent || *exponent < 0 || *exponent > 32)
    return {std::nullopt, "exponent bits in '" + std::string(original) + "': expected 0..32"};
  if (!mantissa || *mantissa < 0 || *mantissa > 32)
    return {std::nullopt, "mantissa bits in '" + std::string(original) + "': expected 0..32"};
  Format f = generic_float(*exponent, *mantissa, is_signed);
  if (suffix == "fn") {
    f.nan = NanEncoding::top_code;
    f.inf = InfEncoding::none;
  } else if (suffix == "fnuz") {
    f.nan = NanEncoding::negative_zero;
    f.inf = InfEncoding::none;
    f.bias += 1;
  } else if (suffix == "fnu") {
    f.nan = NanEncoding::top_code;
    f.inf = InfEncoding::none;
    f.is_signed = false;
    f.storage_bits = f.code_bits();
  } else if (!suffix.empty()) {
    return {std::nullopt, "suffix '" + std::string(suffix) + "' in '" + std::string(original) +
                              "': expected none, 'fn' (NaN is the top code, no Inf), 'fnuz' or 'fnu'"};
  }
  return {f, ""};
}

std::optional<NanEncoding> parse_nan(std::string_view s) {
  if (s == "none") return NanEncoding::none;
  if (s == "ieee") return NanEncoding::ieee;
  if (s == "top") return NanEncoding::top_code;
  if (s == "negative-zero") return NanEncoding::negative_zero;
  return std::nullopt;
}
std::optional<InfEncoding> parse_inf(std::string_view s) {
  if (s == "none") return InfEncoding::none;
  if (s == "ieee") return InfEncoding::ieee;
  if (s == "top") return InfEncoding::top_code;
  return std::nullopt;
}
std::string_view nan_name(NanEncoding n) {
  switch (n) {
    case NanEncoding::none: return "none";
    case NanEncoding::ieee: return "ieee";
    case NanEncoding::top_code: return "top";
    case NanEncoding::negative_zero: return "negative-zero";
  }
  return "?";
}
std::string_view inf_name(InfEncoding i) {
  switch (i) {
    case InfEncoding::none: return "none";
    case InfEncoding::ieee: return "ieee";
    case InfEncoding::top_code: return "top";
  }
  return "?";
}

// The ":signed" / ":unsigned" option: an integer keeps its width; a container exactly as wide
// as the code (storage_follows) stays so.
void set_signedness(Format& f, bool is_signed, bool storage_follows) {
  if (f.is_integer() && f.is_signed != is_signed) f.mantissa_bits += is_signed ? -1 : 1;
  f.is_signed = is_signed;
  if (storage_follows) f.storage_bits = f.code_bits();
}

ParsedFormat fail(std::string message) { return {std::nullopt, std::move(message)}; }

ParsedFormat parse_p3109(const std::vector<std::string_view>& parts) {
  std::optional<int> k, p;
  bool is_signed = true, extended = true;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto opt = parts[i];
    const auto eq = opt.find('=');
    const auto key = opt.substr(0, eq);
    const auto value = eq == std::string_view::npos ? std::string_view{} : opt.substr(eq + 1);
    if (key == "k" || key == "p") {
      const auto v = parse_int(value);
      if (!v) return fail(std::string(key) + ": '" + std::string(value) + "' is not an integer");
      (key == "k" ? k : p) = *v;
    } else if (opt == "signed" || opt == "unsigned") {
      is_signed = opt == "signed";
    } else if (opt == "extended" || opt == "finite") {
      extended = opt == "extended";
    } else {
      return fail("unknown p3109 option '" + std::string(opt) + "' (known: k=N, p=N, signed, unsigned, extended, finite)");
    }
  }
  if (!k) return fail("k: p3109 needs k=N, the width in bits");
  if (!p) return fail("p: p3109 needs p=N, the precision in bits");
  if (*k < 2 || *k > 32) return fail("k=" + std::to_string(*k) + ": expected 2..32");
  if (*p < 1 || *p >= *k + (is_signed ? 0 : 1))
    return fail("p=" + std::to_string(*p) + ": expected 1.." + std::to_string(*k - (is_signed ? 1 : 0)) +
                " (at least one exponent bit)");
  Format f = p3109(*k, *p, is_signed, extended);
  if (auto why = validate(f)) return fail(*why);
  return {f, ""};
}

}  // namespace

std::span<const NamedFormat> presets() { return kPresets; }

std::optional<std::string> validate(const Format& f) {
  const auto bits = [](int v) { return std::to_string(v); };
  if (f.exponent_bits < 0 || f.exponent_bits > 32) return "exponent_bits=" + bits(f.exponent_bits) + ": expected 0..32";
  if (f.mantissa_bits < 0 || f.mantissa_bits > 32) return "mantissa_bits=" + bits(f.mantissa_bits) + ": expected 0..32";
  if (f.code_bits() > 32) return "code bits=" + bits(f.code_bits()) + ": at most 32 bits";
  if (f.storage_bits < f.code_bits() || f.storage_bits > 32)
    return "storage_bits=" + bits(f.storage_bits) + ": expected " + bits(f.code_bits()) + "..32";
  if (f.is_integer()) {
    if (f.exponent_bits != 0) return "exponent_bits=" + bits(f.exponent_bits) + ": integer formats have none";
    if (f.bias != 0) return "bias=" + bits(f.bias) + ": integer formats have none";
    if (f.code_bits() < 2) return "bits=" + bits(f.code_bits()) + ": an integer format needs at least 2 bits";
    if (f.has_nan() || f.has_inf()) return "nan/inf: integer formats have no NaN or Inf";
    if (!f.has_zero) return "zero: integer formats have zero";
    return std::nullopt;
  }
  if (f.exponent_bits == 0 && f.mantissa_bits == 0) return "exponent_bits=0, mantissa_bits=0: the format has no value bits";
  if (f.exponent_bits == 0) return "exponent_bits=0: a floating format needs at least 1 exponent bit (use intN for fixed point)";
  if (f.exponent_bits > 11) return "exponent_bits=" + bits(f.exponent_bits) + ": at most 11 (values must fit a double exactly)";
  if ((f.nan == NanEncoding::ieee) != (f.inf == InfEncoding::ieee))
    return "nan/inf: IEEE specials reserve the top exponent for both NaN and Inf; set nan=ieee and inf=ieee together";
  if (f.nan == NanEncoding::ieee && f.mantissa_bits == 0) return "nan=ieee: IEEE NaNs need at least 1 mantissa bit";
  if (f.nan == NanEncoding::negative_zero && !f.is_signed) return "nan=negative-zero: an unsigned format has no negative zero";
  if (f.nan == NanEncoding::negative_zero && !f.has_zero) return "nan=negative-zero: the format has no zero";
  if (!f.has_zero && f.subnormals) return "subnormals: a format without zero has no subnormals";
  if (f.inf == InfEncoding::top_code && f.magnitude_mask() < (f.nan == NanEncoding::top_code ? 3u : 2u))
    return "inf=top: too few codes for Inf, NaN and a finite value";
  // In 64 bits: any int bias is accepted here, so min_exponent() itself could overflow.
  const long long smallest = (f.has_zero ? 1LL : 0LL) - f.bias - (f.subnormals ? f.mantissa_bits : 0);
  const long long largest = (long long)(f.max_finite_magnitude() >> f.mantissa_bits) - f.bias + 1;
  if (smallest < -1074 || largest > 1024)
    return "bias=" + bits(f.bias) + ": puts values at 2^" + std::to_string(smallest) + "..2^" + std::to_string(largest) +
           ", outside what a double holds exactly (2^-1074..2^1024)";
  if (!(max_finite(f) > 0)) return "the format has no positive finite value";
  return std::nullopt;
}

ParsedFormat parse_format(std::string_view spec) {
  if (spec.empty()) return fail("empty format spec");
  if (spec.size() > 256) return fail("format spec longer than 256 characters");
  const auto parts = split(spec, ':');
  const auto base = parts[0];
  if (base == "p3109") return parse_p3109(parts);

  Format f;
  if (auto preset = find_preset(base)) {
    f = *preset;
  } else if ((base.starts_with("int") || base.starts_with("uint"))) {
    const bool is_signed = base.starts_with("int");
    const auto n = parse_int(base.substr(is_signed ? 3 : 4));
    if (!n || *n < 2 || *n > 32) return fail("bits in '" + std::string(base) + "': expected intN or uintN with N in 2..32");
    f = integer_format(*n, is_signed);
  } else {
    auto parsed = parse_float_base(base);
    if (!parsed.format) {
      if (!parsed.error.empty()) return parsed;
      return fail("unknown format '" + std::string(base) +
                  "' (a preset from `lowbit formats`, eXmY[fn|fnuz], ueXmY, intN, uintN or p3109:k=K:p=P)");
    }
    f = *parsed.format;
  }
  const bool storage_follows = f.storage_bits == f.code_bits();
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto opt = parts[i];
    const auto eq = opt.find('=');
    const auto key = opt.substr(0, eq);
    const auto value = eq == std::string_view::npos ? std::string_view{} : opt.substr(eq + 1);
    if (key == "bias" || key == "storage") {
      const auto v = parse_int(value);
      if (!v) return fail(std::string(key) + ": '" + std::string(value) + "' is not an integer");
      (key == "bias" ? f.bias : f.storage_bits) = *v;
    } else if (key == "nan") {
      const auto n = parse_nan(value);
      if (!n) return fail("nan: unknown NaN encoding '" + std::string(value) + "' (none, ieee, top, negative-zero)");
      f.nan = *n;
    } else if (key == "inf") {
      const auto n = parse_inf(value);
      if (!n) return fail("inf: unknown Inf encoding '" + std::string(value) + "' (none, ieee, top)");
      f.inf = *n;
    } else if (opt == "subnormals" || opt == "no-subnormals") {
      f.subnormals = opt == "subnormals";
    } else if (opt == "zero" || opt == "no-zero") {
      f.has_zero = opt == "zero";
      if (!f.has_zero) f.subnormals = false;
    } else if (opt == "signed" || opt == "unsigned") {
      set_signedness(f, opt == "signed", storage_follows);
    } else {
      return fail("unknown option '" + std::string(opt) +
                  "' (known: bias=N, nan=none|ieee|top|negative-zero, inf=none|ieee|top, subnormals, no-subnormals, "
                  "zero, no-zero, signed, unsigned, storage=N)");
    }
  }
  if (auto why = validate(f)) return fail(*why);
  return {f, ""};
}

Format format_from_string(std::string_view spec) {
  auto parsed = parse_format(spec);
  if (!parsed.format) throw std::invalid_argument("format '" + std::string(spec) + "': " + parsed.error);
  return *parsed.format;
}

std::string format_name(const Format& f) {
  for (const auto& p : kPresets)
    if (p.format == f) return std::string(p.name);
  if (!f.is_integer())
    for (int extended = 1; extended >= 0; --extended)
      for (int is_signed = 1; is_signed >= 0; --is_signed) {
        const int k = f.code_bits(), p = f.mantissa_bits + 1;
        if (p3109(k, p, is_signed, extended) == f)
          return "p3109:k=" + std::to_string(k) + ":p=" + std::to_string(p) + (is_signed ? "" : ":unsigned") +
                 (extended ? "" : ":finite");
      }
  std::string base;
  Format reference;
  if (f.is_integer()) {
    base = (f.is_signed ? "int" : "uint") + std::to_string(f.code_bits());
    reference = integer_format(f.code_bits(), f.is_signed);
  } else {
    base = std::string(f.is_signed ? "" : "u") + "e" + std::to_string(f.exponent_bits) + "m" + std::to_string(f.mantissa_bits);
    reference = find_preset(base).value_or(generic_float(f.exponent_bits, f.mantissa_bits, f.is_signed));
  }
  std::string name = base;
  if (reference.is_signed != f.is_signed) {  // an alias of the other signedness: "e8m0" is ue8m0
    name += f.is_signed ? ":signed" : ":unsigned";
    set_signedness(reference, f.is_signed, reference.storage_bits == reference.code_bits());
  }
  if (f.bias != reference.bias) name += ":bias=" + std::to_string(f.bias);
  if (f.nan != reference.nan) name += ":nan=" + std::string(nan_name(f.nan));
  if (f.inf != reference.inf) name += ":inf=" + std::string(inf_name(f.inf));
  if (f.has_zero != reference.has_zero) name += f.has_zero ? ":zero" : ":no-zero";
  if (f.subnormals != reference.subnormals && f.has_zero) name += f.subnormals ? ":subnormals" : ":no-subnormals";
  if (f.storage_bits != reference.storage_bits) name += ":storage=" + std::to_string(f.storage_bits);
  return name;
}

double ulp(const Format& f, double x) {
  if (f.is_integer()) return 1.0;
  const double a = std::fabs(x);
  if (a < min_normal(f)) return f.subnormals ? min_positive(f) : min_normal(f);
  int e = std::ilogb(a);
  if (e > max_exponent(f)) e = max_exponent(f);
  return pow2(e - f.mantissa_bits);
}

}  // namespace lowbit
