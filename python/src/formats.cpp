// Formats, encode and decode for Python: the presets and parse_format of format.hpp, the span
// encoders of convert.hpp and convert_fast.hpp (the vectorized path wherever it serves), decode.
#include <algorithm>
#include <cfloat>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "emulation/convert.hpp"
#include "emulation/convert_fast.hpp"
#include "numerics/parallel.hpp"

namespace lowbit::python {

namespace {

ConversionOptions conversion_options(const Format& f, const std::string& rounding, const std::string& overflow,
                                     std::uint64_t seed, int random_bits) {
  ConversionOptions o;
  const auto r = parse_rounding(rounding);
  if (!r)
    throw std::invalid_argument("rounding '" + rounding + "': expected nearest-even, nearest-away, toward-zero, "
                                "toward-positive, toward-negative, odd or stochastic");
  const auto v = parse_overflow(overflow);
  if (!v) throw std::invalid_argument("overflow '" + overflow + "': expected saturate, inf or nan");
  o.rounding = *r;
  o.overflow = *v;
  o.seed = seed;
  o.random_bits = random_bits;
  if (auto why = o.validate(f)) throw std::invalid_argument(*why);
  return o;
}

int code_bytes(const Format& f) { return f.code_bits() <= 8 ? 1 : f.code_bits() <= 16 ? 2 : 4; }

// Calls body(first, count) over [0, n) in `threads` contiguous parts (0: every core), each a
// multiple of 64 elements but the last; one part calls body once over everything.
template <class Body>
void in_parts(std::size_t n, unsigned threads, Body&& body) {
  const std::size_t parts = std::max<std::size_t>(1, std::min<std::size_t>(threads ? threads : worker_count(), n / 4096));
  if (parts == 1) return body(std::size_t{0}, n);
  const std::size_t step = (n / parts + 63) / 64 * 64;
  parallel_for(parts, unsigned(parts), [&](std::size_t part, unsigned) {
    const std::size_t first = std::min(n, part * step);
    body(first, std::min(n, first + step) - first);
  });
}

// Encodes n elements of `in` (float32, bfloat16 bits, float64, or another format's codes) into
// `out` (1, 2 or 4 bytes per code); element i uses index i for stochastic rounding.
void encode_into(const Format& f, const ConversionOptions& o, const Element& element, const void* in, std::size_t n,
                 void* out, int out_bytes, unsigned threads) {
  in_parts(n, threads, [&](std::size_t first, std::size_t count) {
    // bfloat16 input has encoders into 8- and 16-bit codes only (the caller widens it for wider ones).
    const auto write = [&](auto in_span) {
      if (out_bytes == 1) encode(f, in_span, std::span(static_cast<std::uint8_t*>(out) + first, count), o, first);
      else if (out_bytes == 2) encode(f, in_span, std::span(static_cast<std::uint16_t*>(out) + first, count), o, first);
      else if constexpr (std::is_same_v<decltype(in_span), std::span<const float>>)
        encode(f, in_span, std::span(static_cast<Code*>(out) + first, count), o, first);
    };
    if (element.float64) {
      std::vector<Code> codes(count);
      encode(f, std::span(static_cast<const double*>(in) + first, count), std::span(codes), o, first);
      for (std::size_t i = 0; i < count; ++i) {
        if (out_bytes == 1) static_cast<std::uint8_t*>(out)[first + i] = std::uint8_t(codes[i]);
        else if (out_bytes == 2) static_cast<std::uint16_t*>(out)[first + i] = std::uint16_t(codes[i]);
        else static_cast<Code*>(out)[first + i] = codes[i];
      }
    } else if (element.format == formats::fp32) {
      write(std::span(static_cast<const float*>(in) + first, count));
    } else if (element.format == formats::bf16 && out_bytes < 4) {
      write(std::span(static_cast<const Bf16Bits*>(in) + first, count));
    } else {  // widened exactly to float32 first
      std::vector<float> values(count);
      const int in_bytes = code_bytes(element.format);
      const Format& g = element.format;
      for (std::size_t i = 0; i < count; ++i) {
        Code c = 0;
        std::memcpy(&c, static_cast<const char*>(in) + (first + i) * in_bytes, in_bytes);
        values[i] = float(decode(g, c));
      }
      write(std::span<const float>(values));
    }
  });
}

nb::object encode_array(const InArray& x, const std::string& element_name, const std::string& spec,
                        const std::string& rounding, const std::string& overflow, std::uint64_t seed, int random_bits,
                        std::optional<OutArray> out, unsigned threads) {  // None when writing into `out`
  const Element element = element_of(x, element_name, "x");
  const Format f = format_from_string(spec);
  const ConversionOptions o = conversion_options(f, rounding, overflow, seed, random_bits);
  const int bytes = code_bytes(f);
  const std::size_t n = x.size();
  if (out) {
    if (out->size() != n || out->itemsize() != std::size_t(bytes) || out->dtype().code != std::uint8_t(nb::dlpack::dtype_code::UInt))
      throw std::invalid_argument("out: " + format_name(f) + " codes need an unsigned " + std::to_string(8 * bytes) +
                                  "-bit array of " + std::to_string(n) + " elements");
    nb::gil_scoped_release release;
    encode_into(f, o, element, x.data(), n, out->data(), bytes, threads);
    return nb::none();
  }
  const auto run = [&]<class T>(T) {
    std::vector<T> codes(n);
    {
      nb::gil_scoped_release release;
      encode_into(f, o, element, x.data(), n, codes.data(), bytes, threads);
    }
    return nb::cast(to_numpy(std::move(codes), shape_of(x)));
  };
  if (bytes == 1) return run(std::uint8_t{});
  if (bytes == 2) return run(std::uint16_t{});
  return run(Code{});
}

// Whether every value of f is a float32 (decode to float32 is exact).
bool fits_float32(const Format& f) {
  return f.is_integer() ? f.code_bits() <= 25
                        : f.mantissa_bits <= 23 && max_finite(f) <= FLT_MAX && min_positive(f) >= 0x1p-149;
}

nb::object decode_array(const InArray& codes, const std::string& spec, bool float64) {
  const Format f = format_from_string(spec);
  if (!float64 && !fits_float32(f))
    throw std::invalid_argument("decode: " + format_name(f) + " has values float32 cannot hold; ask for float64");
  const std::size_t n = codes.size(), bytes = codes.itemsize();
  if (codes.dtype().code != std::uint8_t(nb::dlpack::dtype_code::UInt) || (bytes != 1 && bytes != 2 && bytes != 4))
    throw std::invalid_argument("codes: expected an unsigned 8, 16 or 32-bit integer array");
  const auto code = [&](std::size_t i) -> Code {
    if (bytes == 1) return static_cast<const std::uint8_t*>(codes.data())[i];
    if (bytes == 2) return static_cast<const std::uint16_t*>(codes.data())[i];
    return static_cast<const Code*>(codes.data())[i];
  };
  for (std::size_t i = 0; i < n; ++i)
    if (code(i) > f.code_count_minus_one())
      throw std::invalid_argument("codes: element " + std::to_string(i) + " (" + std::to_string(code(i)) + ") is not a code of " +
                                  format_name(f) + " (" + std::to_string(f.code_bits()) + " bits)");
  const auto run = [&]<class T>(T) {
    std::vector<T> values(n);
    {
      nb::gil_scoped_release release;
      if (f.code_bits() <= 16) {
        std::vector<T> table(std::size_t(f.code_count_minus_one()) + 1);
        for (std::size_t c = 0; c < table.size(); ++c) table[c] = T(decode(f, Code(c)));
        for (std::size_t i = 0; i < n; ++i) values[i] = table[code(i)];
      } else {
        for (std::size_t i = 0; i < n; ++i) values[i] = T(decode(f, code(i)));
      }
    }
    return nb::cast(to_numpy(std::move(values), shape_of(codes)));
  };
  return float64 ? run(double{}) : run(float{});
}

std::string_view nan_name(NanEncoding e) {
  switch (e) {
    case NanEncoding::none: return "none";
    case NanEncoding::ieee: return "ieee";
    case NanEncoding::top_code: return "top";
    case NanEncoding::negative_zero: return "negative-zero";
  }
  return "?";
}

std::string_view inf_name(InfEncoding e) {
  switch (e) {
    case InfEncoding::none: return "none";
    case InfEncoding::ieee: return "ieee";
    case InfEncoding::top_code: return "top";
  }
  return "?";
}

std::string origin_of(const Format& f) {
  for (const auto& p : presets())
    if (p.format == f) return std::string(p.origin);
  return "";
}

}  // namespace

void register_formats(nb::module_& m) {
  nb::class_<Format>(m, "Format")
      .def("__init__", [](Format* self, std::string_view spec) { new (self) Format(format_from_string(spec)); },
           nb::arg("spec"))
      .def_prop_ro("name", [](const Format& f) { return format_name(f); })
      .def_prop_ro("origin", [](const Format& f) { return origin_of(f); })
      .def_prop_ro("kind", [](const Format& f) { return f.is_integer() ? "integer" : "floating"; })
      .def_prop_ro("bits", &Format::code_bits)
      .def_ro("exponent_bits", &Format::exponent_bits)
      .def_ro("mantissa_bits", &Format::mantissa_bits)
      .def_ro("bias", &Format::bias)
      .def_ro("signed", &Format::is_signed)
      .def_ro("subnormals", &Format::subnormals)
      .def_ro("has_zero", &Format::has_zero)
      .def_ro("storage_bits", &Format::storage_bits)
      .def_prop_ro("nan", [](const Format& f) { return nan_name(f.nan); })
      .def_prop_ro("inf", [](const Format& f) { return inf_name(f.inf); })
      .def_prop_ro("max_finite", [](const Format& f) { return max_finite(f); })
      .def_prop_ro("lowest_finite", [](const Format& f) { return lowest_finite(f); })
      .def_prop_ro("min_normal", [](const Format& f) { return min_normal(f); })
      .def_prop_ro("min_positive", [](const Format& f) { return min_positive(f); })
      .def_prop_ro("min_exponent", [](const Format& f) { return f.is_integer() ? 0 : f.min_exponent(); })
      .def_prop_ro("max_exponent", [](const Format& f) { return f.is_integer() ? 0 : max_exponent(f); })
      .def_prop_ro("max_finite_code", &Format::max_finite_magnitude)
      .def_prop_ro("canonical_nan_code",
                   [](const Format& f) -> std::optional<Code> { return f.has_nan() ? std::optional(f.canonical_nan()) : std::nullopt; })
      .def("is_nan_code", &Format::is_nan_code, nb::arg("code"))
      .def("is_inf_code", &Format::is_inf_code, nb::arg("code"))
      .def("ulp", [](const Format& f, double x) { return ulp(f, x); }, nb::arg("x"))
      .def("__eq__", [](const Format& a, const Format& b) { return a == b; })
      .def("__hash__", [](const Format& f) { return std::hash<std::string>()(format_name(f)); })
      .def("__repr__", [](const Format& f) { return "lowbit.Format('" + format_name(f) + "')"; });
  m.def("preset_formats", [] {
    std::vector<Format> out;
    for (const auto& p : presets()) out.push_back(p.format);
    return out;
  });
  m.def("encode", &encode_array, nb::arg("x"), nb::arg("element"), nb::arg("format"), nb::arg("rounding"),
        nb::arg("overflow"), nb::arg("seed"), nb::arg("random_bits"), nb::arg("out").none(), nb::arg("threads"));
  m.def("decode", &decode_array, nb::arg("codes"), nb::arg("format"), nb::arg("float64"));
  m.def("fits_float32", [](std::string_view spec) { return fits_float32(format_from_string(spec)); });
}

}  // namespace lowbit::python
