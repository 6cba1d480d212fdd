// parse_format on bad and random input: impossible specs are rejected with a message naming the
// wrong field; no string makes it throw or crash; every accepted spec names a valid record that
// format_name -> parse_format gives back identically. Built twice: as test_parse_format and,
// with AddressSanitizer and UndefinedBehaviorSanitizer over the format and conversion sources,
// as test_parse_format_sanitized (so an overflow in the parser's arithmetic fails too).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "emulation/format.hpp"

using namespace lowbit;

TEST_CASE("impossible specs are rejected with a message naming the wrong field", "[format][parse]") {
  const std::pair<const char*, const char*> kCases[]{
      {"", "empty"},
      {"e0m0", "exponent_bits=0, mantissa_bits=0"},
      {"e0m3", "exponent_bits=0"},
      {"e12m3", "exponent_bits=12"},
      {"e20m20", "bits=41"},  // more than 32 bits
      {"e999999999999m3", "exponent bits"},
      {"e4m999", "mantissa bits"},
      {"e4m3:bias=100000", "bias=100000"},  // bias that puts the values outside a double
      {"e4m3:bias=-2147483648", "bias=-2147483648"},
      {"e4m3:bias=2147483647", "bias=2147483647"},
      {"e4m3:bias=99999999999", "bias"},
      {"e4m3:bias=", "bias"},
      {"e4m3:bias=x", "bias"},
      {"e4m3:nan=maybe", "nan"},  // unknown NaN policy
      {"e4m3:inf=sometimes", "inf"},
      {"e4m3:nan=ieee", "nan"},  // IEEE NaN without IEEE Inf
      {"e5m0:nan=ieee:inf=ieee", "nan=ieee"},
      {"ue4m3:nan=negative-zero", "nan=negative-zero"},
      {"e4m3fnuz:no-zero", "nan=negative-zero"},
      {"e4m3:storage=2", "storage"},
      {"e4m3:storage=33", "storage"},
      {"int1", "bits"},
      {"int33", "bits"},
      {"uint0", "bits"},
      {"int8:bias=3", "bias"},
      {"int8:nan=top", "nan"},
      {"p3109:k=8", "p:"},
      {"p3109:p=3", "k:"},
      {"p3109:k=40:p=3", "k=40"},
      {"p3109:k=1:p=1", "k=1"},
      {"p3109:k=8:p=0", "p=0"},
      {"p3109:k=8:p=8", "p=8"},
      {"p3109:k=8:p=3:bias=2", "bias=2"},
      {"ue1m0:inf=top:nan=top", "inf=top"},
      {"banana", "unknown format"},
      {"e4m3:frobnicate", "frobnicate"},
      {"e4m3xyz", "suffix 'xyz'"},
      {"e4", "eXmY"},
  };
  for (const auto& [spec, field] : kCases) {
    const ParsedFormat parsed = parse_format(spec);
    INFO(fmt::format("spec '{}': {}", spec, parsed.error));
    CHECK_FALSE(parsed.format);
    CHECK(parsed.error.find(field) != std::string::npos);
    CHECK_THROWS_AS(format_from_string(spec), std::invalid_argument);
  }
}

namespace {

const std::vector<std::string> kTokens{
    "e",      "m",         "u",       "int",        "uint",      "p3109",    ":",        "=",        "bias",
    "nan",    "inf",       "storage", "k",          "p",         "ieee",     "top",      "none",     "negative-zero",
    "zero",   "no-zero",   "subnormals", "no-subnormals", "signed", "unsigned", "finite", "extended", "fn",
    "fnuz",   "fnu",       "0",       "1",          "2",         "3",        "4",        "5",        "7",
    "8",      "11",        "16",      "31",         "32",        "33",       "-1",       "+7",       "2147483647",
    "-2147483648", "4294967296", "99999999999999999999", "0x10", " ", "\t", std::string(1, '\0'), "\xff", "é"};

std::string random_tokens(std::mt19937_64& rng) {
  std::string s;
  const int n = int(rng() % 12);
  for (int i = 0; i < n; ++i) s += kTokens[rng() % kTokens.size()];
  return s;
}

std::string random_bytes(std::mt19937_64& rng) {
  static const std::string kAlphabet = "eumfnzpkbiasotrgdxyw0123456789:=-+_. ";
  std::string s(rng() % 24, ' ');
  for (auto& c : s) c = rng() % 8 == 0 ? char(rng() % 256) : kAlphabet[rng() % kAlphabet.size()];
  return s;
}

std::string mutate(std::string s, std::mt19937_64& rng) {
  const int edits = 1 + int(rng() % 3);
  for (int i = 0; i < edits; ++i) {
    const std::size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 5) {
      case 0: s.insert(at, 1, "0123456789:=-emunz"[rng() % 18]); break;
      case 1: if (at < s.size()) s.erase(at, 1); break;
      case 2: if (at < s.size()) s[at] = char(rng() % 128); break;
      case 3: s.insert(at, s.substr(0, rng() % (s.size() + 1))); break;  // duplicate a prefix
      case 4: s.insert(at, kTokens[rng() % kTokens.size()]); break;
    }
  }
  return s;
}

std::string preset_with_options(std::mt19937_64& rng) {
  const auto all = presets();
  std::string s(all[rng() % all.size()].name);
  const char* kOptions[]{":bias=", ":nan=ieee", ":nan=top", ":nan=none", ":nan=negative-zero", ":inf=ieee", ":inf=top",
                         ":inf=none", ":subnormals", ":no-subnormals", ":zero", ":no-zero", ":signed", ":unsigned",
                         ":storage="};
  const int n = int(rng() % 4);
  for (int i = 0; i < n; ++i) {
    s += kOptions[rng() % std::size(kOptions)];
    if (s.back() == '=') s += std::to_string(int(rng() % 40) - 8);
  }
  return s;
}

std::string generic_spec(std::mt19937_64& rng) {
  if (rng() % 3 == 0)
    return fmt::format("p3109:k={}:p={}{}{}", rng() % 34, rng() % 34, rng() % 2 ? ":unsigned" : "", rng() % 2 ? ":finite" : "");
  if (rng() % 4 == 0) return fmt::format("{}int{}", rng() % 2 ? "u" : "", rng() % 35);
  return fmt::format("{}e{}m{}{}", rng() % 3 == 0 ? "u" : "", rng() % 13, rng() % 33,
                     std::array{"", "fn", "fnuz", "fnu", ":no-subnormals", ":bias=1"}[rng() % 6]);
}

// Exercises the accepted format: limits, decode of edge codes, encode of edge values.
void exercise(const Format& f) {
  const ConversionOptions options;
  (void)max_finite(f), (void)min_positive(f), (void)lowest_finite(f), (void)ulp(f, 1.0);
  for (Code c : {Code{0}, f.sign_mask(), f.max_finite_magnitude(), f.code_count_minus_one()}) (void)decode(f, c);
  for (double x : {0.0, -0.0, 1.0, -1.5, 1e300, -1e-300, 5e-324, double(NAN), -double(INFINITY)})
    (void)encode(f, x, options);
}

}  // namespace

TEST_CASE("parse_format never throws, and accepted specs round-trip through format_name", "[format][parse][fuzz]") {
  std::mt19937_64 rng(31337);
  std::size_t tried = 0, accepted = 0, round_trip_failures = 0, threw = 0;
  std::vector<std::string> failures;
  for (int i = 0; i < 200'000; ++i) {
    std::string spec;
    switch (i % 5) {
      case 0: spec = random_bytes(rng); break;
      case 1: spec = random_tokens(rng); break;
      case 2: spec = mutate(preset_with_options(rng), rng); break;
      case 3: spec = preset_with_options(rng); break;
      case 4: spec = rng() % 2 ? generic_spec(rng) : mutate(generic_spec(rng), rng); break;
    }
    ++tried;
    try {
      const ParsedFormat parsed = parse_format(spec);
      if (!parsed.format) {
        if (parsed.error.empty()) failures.push_back("rejected without a message: '" + spec + "'");
        continue;
      }
      ++accepted;
      const Format& f = *parsed.format;
      if (auto why = validate(f)) failures.push_back("accepted an invalid record: '" + spec + "': " + *why);
      const std::string name = format_name(f);
      const ParsedFormat again = parse_format(name);
      if (!again.format || !(*again.format == f)) {
        ++round_trip_failures;
        failures.push_back(fmt::format("'{}' -> '{}' -> {}", spec, name, again.format ? "another record" : again.error));
      }
      exercise(f);
    } catch (const std::exception& e) {
      ++threw;
      failures.push_back(fmt::format("'{}' threw {}", spec, e.what()));
    }
  }
  fmt::print("{} specs tried, {} accepted, {} round-trip failures, {} exceptions\n", tried, accepted,
             round_trip_failures, threw);
  INFO(fmt::format("{} failures; first: {}", failures.size(),
                   fmt::join(failures.begin(), failures.begin() + std::min<std::size_t>(failures.size(), 10), "\n")));
  CHECK(failures.empty());
  CHECK(accepted > 20'000);  // the generator reaches deep into the grammar
}

TEST_CASE("every preset and alias parses to its record and back", "[format][parse]") {
  for (const auto& p : presets()) {
    INFO(p.name);
    const ParsedFormat parsed = parse_format(p.name);
    REQUIRE(parsed.format);
    CHECK(*parsed.format == p.format);
    CHECK(format_name(p.format) == p.name);
  }
  for (const char* alias : {"float32", "bfloat16", "half", "e4m3fn", "fp4", "e8m0", "e8m0fnu", "fp22"}) {
    INFO(alias);
    CHECK(parse_format(alias).format);
  }
  CHECK(parse_format(std::string(300, 'e')).error.find("longer than 256") != std::string::npos);
  CHECK_FALSE(parse_format(std::string_view("e4m3\0:bias=8", 12)).format);
}
