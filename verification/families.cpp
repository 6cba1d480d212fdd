#include "verification/families.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "emulation/convert.hpp"

namespace lowbit::mma {
namespace {

constexpr std::array<std::string_view, kFamilyCount> kFamilyNames{
    "random",   "zero_ab",      "narrow_band",   "dominant",   "random_c0", "exact",
    "specials", "cancellation", "wide_band",     "tiny_products", "subnormal_c"};

// SplitMix64: small, fast, and every (seed, instruction, index) gets its own stream.
class Rng {
 public:
  explicit Rng(std::uint64_t state) : state_(state) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi].
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) { return lo + std::int64_t(next() % std::uint64_t(hi - lo + 1)); }
  bool one_in(int n) { return next() % std::uint64_t(n) == 0; }

 private:
  std::uint64_t state_;
};

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

Code integer_code(const Format& f, std::int64_t v) {
  v = std::clamp<std::int64_t>(v, std::int64_t(lowest_finite(f)), std::int64_t(max_finite(f)));
  return Code(std::uint64_t(v) & f.code_count_minus_one());
}

// Random finite code (floating formats: NaN and Inf codes redrawn).
Code random_finite(const Format& f, Rng& rng) {
  for (;;) {
    const Code c = Code(rng.next()) & f.code_count_minus_one();
    if (f.is_integer() || (!f.is_nan_code(c) && !f.is_inf_code(c))) return c;
  }
}

// Random sign, exponent in [lo, hi] (clipped to the normal range; a band outside it becomes
// its nearest binade), random mantissa.
// Integers: a value in [lo, hi].
Code band_code(const Format& f, Rng& rng, int lo, int hi) {
  if (f.is_integer()) return integer_code(f, rng.uniform(lo, hi));
  lo = std::clamp(lo, f.min_exponent(), max_exponent(f));
  hi = std::clamp(hi, lo, max_exponent(f));
  for (;;) {
    const int e = int(rng.uniform(lo, hi));
    const Code field = Code(e - f.min_exponent() + (f.has_zero ? 1 : 0));
    const Code magnitude = (field << f.mantissa_bits) | (Code(rng.next()) & f.mantissa_mask());
    if (magnitude > f.max_finite_magnitude()) continue;
    return (rng.one_in(2) ? f.sign_mask() : 0) | magnitude;
  }
}

Code value_code(const Format& f, double v) { return encode(f, v); }

Code signed_zero(const Format& f, Rng& rng) { return f.is_integer() || !rng.one_in(2) ? 0 : f.sign_mask(); }

Code negated(const Format& f, Code c) {
  if (!f.is_integer()) return c ^ f.sign_mask();
  return Code((~std::uint64_t(c) + 1) & f.code_count_minus_one());
}

// NaN, Inf, max finite or zero, of a random sign, as far as the format has them.
Code special_code(const Format& f, Rng& rng) {
  const Code sign = rng.one_in(2) ? f.sign_mask() : 0;
  switch (rng.next() % 4) {
    case 0:
      if (f.nan == NanEncoding::ieee) return sign | f.top_non_nan_magnitude() | Code(rng.uniform(1, f.mantissa_mask()));
      if (f.has_nan()) return sign | f.canonical_nan();
      [[fallthrough]];
    case 1:
      if (f.has_inf()) return f.inf_code(sign != 0);
      [[fallthrough]];
    case 2: return sign | f.max_finite_magnitude();
    default: return sign;
  }
}

// The accumulator word of a random C: fp32 with exponents in [-20, 20]; fp16 normal; s32 in
// [-2^24, 2^24].
std::uint32_t random_c(const Format& c, Rng& rng, int lo = -20, int hi = 20) {
  if (c.is_integer()) return integer_code(c, rng.uniform(-(1 << 24), 1 << 24));
  return accumulator_word(c, band_code(c, rng, lo, hi));
}

// A subnormal of either sign: the smallest and largest ones often, else a random one.
Code subnormal_code(const Format& f, Rng& rng) {
  const Code sign = rng.one_in(2) ? f.sign_mask() : 0;
  switch (rng.next() % 4) {
    case 0: return sign | 1;
    case 1: return sign | f.mantissa_mask();
    default: return sign | Code(rng.uniform(1, f.mantissa_mask()));
  }
}

std::uint32_t special_c(const Format& c, Rng& rng) {
  if (c.is_integer()) {
    const std::int64_t margin = rng.uniform(0, 1 << 10);
    return integer_code(c, rng.one_in(2) ? std::int64_t(max_finite(c)) - margin : std::int64_t(lowest_finite(c)) + margin);
  }
  return accumulator_word(c, special_code(c, rng));
}

}  // namespace

Family family_of(std::uint64_t index) { return Family(index % kCycledFamilies); }
std::string_view to_string(Family f) { return kFamilyNames[std::size_t(f)]; }

std::optional<Family> parse_family(std::string_view name) {
  for (std::size_t i = 0; i < kFamilyNames.size(); ++i)
    if (kFamilyNames[i] == name) return Family(i);
  return std::nullopt;
}

bool applies(Family f, const Atom& atom) {
  return int(f) < kCycledFamilies || !atom.c.is_integer();
}

Tile make_input_tile(const Atom& atom, std::uint64_t seed, std::uint64_t index, std::optional<Family> chosen, int depth) {
  Rng rng(seed ^ fnv1a(atom.name.view()) ^ (index * 0xD1B54A32D192ED03ull));
  const Format &fa = atom.a, &fb = atom.b, &fc = atom.c;
  const Family family = chosen.value_or(family_of(index));
  if (!applies(family, atom))
    throw std::invalid_argument("family " + std::string(to_string(family)) + " does not apply to " + atom.name.str() +
                                " (it needs a floating accumulator)");
  Tile t;
  t.instruction = atom.name.str();
  t.m = atom.m, t.n = atom.n, t.k = depth > 0 ? depth : atom.k;
  t.a_digits = element_digits(fa);
  t.b_digits = element_digits(fb);
  t.a.resize(std::size_t(t.m) * t.k);
  t.b.resize(std::size_t(t.k) * t.n);
  t.c.assign(std::size_t(t.m) * t.n, accumulator_word(fc, 0));
  auto fill = [&](auto&& code_a, auto&& code_b) {
    for (auto& x : t.a) x = code_a();
    for (auto& x : t.b) x = code_b();
  };
  auto fill_c = [&](auto&& word) {
    for (auto& x : t.c) x = word();
  };
  // Integer operands take every code in the families that span exponents.
  const auto wide = [&](const Format& f) { return [&] { return f.is_integer() ? random_finite(f, rng) : band_code(f, rng, -8, 8); }; };
  switch (family) {
    case Family::random:
    case Family::random_c0:
      fill([&] { return random_finite(fa, rng); }, [&] { return random_finite(fb, rng); });
      if (family == Family::random) fill_c([&] { return random_c(fc, rng); });
      break;
    case Family::zero_ab:
      fill([&] { return signed_zero(fa, rng); }, [&] { return signed_zero(fb, rng); });
      fill_c([&] { return random_c(fc, rng); });
      break;
    case Family::narrow_band:
      fill([&] { return fa.is_integer() ? band_code(fa, rng, -3, 3) : band_code(fa, rng, 0, 1); },
           [&] { return fb.is_integer() ? band_code(fb, rng, -3, 3) : band_code(fb, rng, 0, 1); });
      break;
    case Family::dominant: {
      const auto small = [&](const Format& f) { return f.is_integer() ? band_code(f, rng, -2, 2) : band_code(f, rng, -6, -2); };
      fill([&] { return small(fa); }, [&] { return fb.is_integer() ? band_code(fb, rng, -3, 3) : band_code(fb, rng, -1, 1); });
      const int big_lo = fa.is_integer() ? int(max_finite(fa)) / 2 : 6, big_hi = fa.is_integer() ? int(max_finite(fa)) : 8;
      for (int i = 0; i < t.m; ++i) {
        const Code big = band_code(fa, rng, big_lo, big_hi);
        t.a[std::size_t(i) * t.k + std::size_t(rng.uniform(0, t.k - 1))] =
            fa.is_integer() && rng.one_in(2) ? negated(fa, big) : big;
      }
      fill_c([&] { return random_c(fc, rng); });
      break;
    }
    case Family::exact: {
      const auto pick = [&](const Format& f) {
        static constexpr double kFloat[] = {0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0};
        static constexpr double kInt[] = {0.0, 1.0, -1.0, 2.0, -2.0};
        return f.is_integer() ? value_code(f, kInt[rng.uniform(0, 4)]) : value_code(f, kFloat[rng.uniform(0, 7)]);
      };
      fill([&] { return pick(fa); }, [&] { return pick(fb); });
      break;
    }
    case Family::specials:
      if (fa.is_integer()) {
        const auto extreme = [&](const Format& f) {
          return integer_code(f, rng.one_in(2) ? std::int64_t(max_finite(f)) : std::int64_t(lowest_finite(f)) + rng.uniform(0, 1));
        };
        fill([&] { return extreme(fa); }, [&] { return extreme(fb); });
        fill_c([&] { return special_c(fc, rng); });
      } else {
        auto wa = wide(fa), wb = wide(fb);
        fill([&] { return rng.one_in(16) ? special_code(fa, rng) : wa(); },
             [&] { return rng.one_in(16) ? special_code(fb, rng) : wb(); });
        fill_c([&] { return rng.one_in(16) ? special_c(fc, rng) : random_c(fc, rng, -8, 16); });
      }
      break;
    case Family::cancellation: {
      // Column pairs (2j, 2j+1) of A hold x and -x, rows 2j and 2j+1 of B are equal.
      const auto operand = [&](const Format& f) {
        return f.is_integer() ? band_code(f, rng, -int(max_finite(f)), int(max_finite(f))) : band_code(f, rng, -8, 8);
      };
      for (int i = 0; i < t.m; ++i)
        for (int j = 0; j + 1 < t.k; j += 2) {
          const std::size_t at = std::size_t(i) * t.k + j;
          t.a[at] = operand(fa);
          t.a[at + 1] = negated(fa, t.a[at]);
        }
      for (int j = 0; j + 1 < t.k; j += 2)
        for (int col = 0; col < t.n; ++col) {
          t.b[std::size_t(j) * t.n + col] = operand(fb);
          t.b[std::size_t(j + 1) * t.n + col] = t.b[std::size_t(j) * t.n + col];
        }
      if (rng.one_in(2)) t.a[std::size_t(rng.uniform(0, std::int64_t(t.a.size()) - 1))] = operand(fa);
      fill_c([&] { return accumulator_word(fc, signed_zero(fc, rng)); });
      break;
    }
    case Family::wide_band: {
      auto wa = wide(fa), wb = wide(fb);
      fill(wa, wb);
      fill_c([&] { return random_c(fc, rng, -8, 16); });
      break;
    }
    case Family::tiny_products:
      fill([&] { return band_code(fa, rng, -80, -64); }, [&] { return band_code(fb, rng, -80, -64); });
      fill_c([&] { return accumulator_word(fc, signed_zero(fc, rng)); });
      break;
    case Family::subnormal_c: {
      if (rng.one_in(2)) {
        fill([&] { return signed_zero(fa, rng); }, [&] { return signed_zero(fb, rng); });
      } else {
        const auto smallest = [&](const Format& f) { return band_code(f, rng, f.min_exponent(), f.min_exponent()); };
        fill([&] { return smallest(fa); }, [&] { return smallest(fb); });
      }
      fill_c([&] { return accumulator_word(fc, subnormal_code(fc, rng)); });
      break;
    }
  }
  for (auto& x : t.a) x = element_word(fa, x);
  for (auto& x : t.b) x = element_word(fb, x);
  t.extra["family"] = to_string(family);
  t.extra["seed"] = seed;
  t.extra["index"] = index;
  if (accumulator_type(fc) != "f32") t.extra["c_type"] = t.extra["d_type"] = accumulator_type(fc);
  return t;
}

std::optional<bool> exact_check(const Atom& s, const Tile& t) {
  const bool integer = s.c.is_integer();
  const auto family = t.extra.contains("family") && t.extra["family"].is_string()
                           ? parse_family(t.extra["family"].get_ref<const std::string&>())
                           : std::nullopt;
  if (!integer && family != Family::exact) return std::nullopt;
  const bool saturate = s.satfinite;
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      const std::size_t at = std::size_t(i) * s.n + j;
      const auto c = accumulator_code(s.c, t.c[at]), d = accumulator_code(s.c, t.d[at]);
      if (!c || !d) return false;
      double sum = decode(s.c, *c);  // exact: integers below 2^53, or multiples of 1/4 below 2^8
      for (int k = 0; k < t.k; ++k) {
        const auto a = element_code(s.a, t.a[std::size_t(i) * t.k + k]), b = element_code(s.b, t.b[std::size_t(k) * s.n + j]);
        if (!a || !b) return false;
        sum += decode(s.a, *a) * decode(s.b, *b);
      }
      if (integer && saturate) sum = std::clamp(sum, lowest_finite(s.c), max_finite(s.c));
      if (integer && !saturate) sum = double(std::int32_t(std::uint32_t(std::int64_t(sum))));
      if (decode(s.c, *d) != sum) return false;
    }
  return true;
}

}  // namespace lowbit::mma
