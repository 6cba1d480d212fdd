#include "emulation/mma/engine.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "emulation/mma/arithmetic.hpp"

namespace lowbit::mma::detail {
namespace {

constexpr std::uint32_t kFp32PositiveInf = 0x7f80'0000, kFp32NegativeInf = 0xff80'0000;
constexpr std::uint32_t kFp16PositiveInf = 0x7c00, kFp16NegativeInf = 0xfc00;
constexpr int kMaxChunk = 64;
// The exponent zero codes decode with: low enough that a zero product's ea + eb never reaches a
// model's zero-term exponent (the kernels give zero products e_zero themselves where it matters).
constexpr int kZeroCodeExponent = -(1 << 20);

Decoded decode_one(const Format& f, Code code) {
  Decoded d;
  if (f.is_nan_code(code)) {
    d.special = Special::nan;
    return d;
  }
  const double value = decode(f, code);
  d.negative = std::signbit(value) ? -1 : 0;
  if (f.is_inf_code(code)) {
    d.special = Special::inf;
    return d;
  }
  const double magnitude = std::fabs(value);
  if (f.is_integer()) {
    d.magnitude = std::int32_t(magnitude);
    return d;
  }
  d.exponent = kZeroCodeExponent;
  if (magnitude == 0) return d;
  d.exponent = std::max(std::ilogb(magnitude), f.min_exponent());
  d.magnitude = std::int32_t(std::ldexp(magnitude, f.mantissa_bits - d.exponent));  // exact: an integer < 2^(m+1)
  return d;
}

// The accumulator's value decoded like an element (binary32 or binary16 bits).
struct AccumulatorFormat {
  Format format;
  int fraction;
};

AccumulatorFormat accumulator_format(const Format& f) {
  if (f == formats::fp16) return {f, 10};
  return {formats::fp32, 23};
}

std::int64_t shifted(std::int64_t magnitude, int pre, int right) { return (magnitude << pre) >> std::min(right, 63); }

// The hot loop: one chunk of `Count` products. Finds E (the max of `E` and the products'
// exponents, a zero product counting as `zero_exponent`) and returns the exact sum of
// trunc(product * 2^(pre - extra - (E - exponent))). Lane is int32_t when the model's bound allows
// (twice the SIMD lanes), else int64_t. `Blend` = false skips giving zero products the zero-term
// exponent where that cannot change E (see Engine::Engine). Compiled twice and dispatched once at
// load time: for AVX2 (variable per-lane shifts) and for the x86-64 baseline.
template <class Lane, int Count, bool Blend>
[[gnu::always_inline]] inline std::int64_t product_sum(const std::int32_t* ma, const std::int32_t* mb,
                                                       const std::int32_t* ea, const std::int32_t* eb,
                                                       const std::int32_t* na, const std::int32_t* nb,
                                                       int zero_exponent, int pre, int extra, int& E) {
  constexpr int kWidest = int(sizeof(Lane)) * 8 - 1;
  Lane product[Count];
  std::int32_t exponent[Count];
  int e_max = E;
  for (int t = 0; t < Count; ++t) {
    const Lane m = Lane(ma[t]) * Lane(mb[t]);
    const std::int32_t e = !Blend || m ? ea[t] + eb[t] : zero_exponent;
    product[t] = m;
    exponent[t] = e;
    e_max = std::max(e_max, e);
  }
  Lane sum = 0;
  for (int t = 0; t < Count; ++t) {
    const Lane sign = na[t] ^ nb[t];
    const Lane v = (product[t] << pre) >> std::min(e_max - exponent[t] + extra, kWidest);
    sum += (v ^ sign) - sign;
  }
  E = e_max;
  return sum;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LOWBIT_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LOWBIT_SIMD_CLONES
#endif

using ProductSum = std::int64_t (*)(const std::int32_t*, const std::int32_t*, const std::int32_t*, const std::int32_t*,
                                    const std::int32_t*, const std::int32_t*, int, int, int, int&);

#define LOWBIT_PRODUCT_SUM(NAME, LANE, COUNT, BLEND)                                                            \
  LOWBIT_SIMD_CLONES std::int64_t NAME(const std::int32_t* ma, const std::int32_t* mb, const std::int32_t* ea,  \
                                       const std::int32_t* eb, const std::int32_t* na, const std::int32_t* nb,  \
                                       int zero_exponent, int pre, int extra, int& E) {                         \
    return product_sum<LANE, COUNT, BLEND>(ma, mb, ea, eb, na, nb, zero_exponent, pre, extra, E);              \
  }
LOWBIT_PRODUCT_SUM(sum32_16, std::int32_t, 16, false)
LOWBIT_PRODUCT_SUM(sum32_32, std::int32_t, 32, false)
LOWBIT_PRODUCT_SUM(sum32_16_blend, std::int32_t, 16, true)
LOWBIT_PRODUCT_SUM(sum32_32_blend, std::int32_t, 32, true)
LOWBIT_PRODUCT_SUM(sum64_8_blend, std::int64_t, 8, true)
LOWBIT_PRODUCT_SUM(sum64_16_blend, std::int64_t, 16, true)
LOWBIT_PRODUCT_SUM(sum64_32_blend, std::int64_t, 32, true)
LOWBIT_PRODUCT_SUM(sum64_64_blend, std::int64_t, 64, true)
#undef LOWBIT_PRODUCT_SUM

// The same chunk for kLanes outputs at once: A's row (one value per t, broadcast) against kLanes
// columns of B (B's k-major copy, `stride` apart per t). E and the sums are per output. Written
// with GCC vector extensions: one AVX2 register holds the 8 int32 lanes (two for int64 lanes).
// (-Wpsabi: these vectors never cross a call boundary; helpers are always inlined.)
#pragma GCC diagnostic ignored "-Wpsabi"
using Int32x8 = std::int32_t __attribute__((vector_size(32)));
using Int64x8 = std::int64_t __attribute__((vector_size(64)));
static_assert(kLanes == 8);

[[gnu::always_inline]] inline Int32x8 load8(const std::int32_t* p) {
  Int32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The shifts of a model's terms (see Engine::Engine).
struct Shifts {
  int zero_exponent;
  int pre, extra;          // products: value * 2^(F - E) = (magnitude << pre) >> (E - exponent + extra)
  int acc_pre, acc_extra;  // the accumulator's 24-bit magnitude likewise
};

template <class Lane, int Count, bool Blend>
[[gnu::always_inline]] inline void product_sums(const std::int32_t* ma, const std::int32_t* ea, const std::int32_t* na,
                                                const std::int32_t* mb, const std::int32_t* eb, const std::int32_t* nb,
                                                std::ptrdiff_t stride, const std::uint32_t* acc_bits,
                                                const Shifts& shift, std::int32_t* E, std::int64_t* sums) {
  using Vector = std::conditional_t<sizeof(Lane) == 4, Int32x8, Int64x8>;
  constexpr int kWidest = int(sizeof(Lane)) * 8 - 1;
  // The binary32 accumulators (finite): 24-bit magnitude, exponent clamped at -126.
  Int32x8 bits;
  std::memcpy(&bits, acc_bits, sizeof bits);
  const Int32x8 field = (bits >> 23) & 0xff, fraction = bits & 0x7f'ffff;
  const Int32x8 acc_magnitude = field != 0 ? fraction | (1 << 23) : fraction;
  const Int32x8 acc_exponent = field != 0 ? field - 127 : Int32x8{} - 126;
  Int32x8 e_max = acc_magnitude != 0 ? acc_exponent : shift.zero_exponent;

  Vector product[Count];
  Int32x8 exponent[Count];
  for (int t = 0; t < Count; ++t) {
    const Vector m = __builtin_convertvector(load8(mb + t * stride), Vector) * Lane(ma[t]);
    Int32x8 e = load8(eb + t * stride) + ea[t];
    if constexpr (Blend) e = __builtin_convertvector(m != 0, Int32x8) ? e : shift.zero_exponent;
    product[t] = m;
    exponent[t] = e;
    e_max = e_max > e ? e_max : e;
  }
  Vector sum = {};
  for (int t = 0; t < Count; ++t) {
    const Vector sign = __builtin_convertvector(load8(nb + t * stride) ^ na[t], Vector);
    Int32x8 right = e_max - exponent[t] + shift.extra;
    right = right < kWidest ? right : kWidest;
    const Vector v = (product[t] << shift.pre) >> __builtin_convertvector(right, Vector);
    sum += (v ^ sign) - sign;
  }
  Int32x8 right = e_max - acc_exponent + shift.acc_extra;
  right = right < 63 ? right : 63;
  const Int64x8 acc = (__builtin_convertvector(acc_magnitude, Int64x8) << shift.acc_pre) >>
                      __builtin_convertvector(right, Int64x8);
  const Int64x8 acc_sign = __builtin_convertvector(bits >> 31, Int64x8);  // 0 or -1
  const Int64x8 total = __builtin_convertvector(sum, Int64x8) + ((acc ^ acc_sign) - acc_sign);
  std::memcpy(E, &e_max, sizeof e_max);
  std::memcpy(sums, &total, sizeof total);
}

using ProductSums = void (*)(const std::int32_t*, const std::int32_t*, const std::int32_t*, const std::int32_t*,
                             const std::int32_t*, const std::int32_t*, std::ptrdiff_t, const std::uint32_t*,
                             const Shifts&, std::int32_t*, std::int64_t*);

#define LOWBIT_PRODUCT_SUMS(NAME, LANE, COUNT, BLEND)                                                            \
  LOWBIT_SIMD_CLONES void NAME(const std::int32_t* ma, const std::int32_t* ea, const std::int32_t* na,            \
                               const std::int32_t* mb, const std::int32_t* eb, const std::int32_t* nb,            \
                               std::ptrdiff_t stride, const std::uint32_t* acc_bits, const Shifts& shift,        \
                               std::int32_t* E, std::int64_t* sums) {                                             \
    product_sums<LANE, COUNT, BLEND>(ma, ea, na, mb, eb, nb, stride, acc_bits, shift, E, sums);                   \
  }
LOWBIT_PRODUCT_SUMS(sums32_16, std::int32_t, 16, false)
LOWBIT_PRODUCT_SUMS(sums32_32, std::int32_t, 32, false)
LOWBIT_PRODUCT_SUMS(sums32_16_blend, std::int32_t, 16, true)
LOWBIT_PRODUCT_SUMS(sums32_32_blend, std::int32_t, 32, true)
LOWBIT_PRODUCT_SUMS(sums64_8_blend, std::int64_t, 8, true)
LOWBIT_PRODUCT_SUMS(sums64_16_blend, std::int64_t, 16, true)
LOWBIT_PRODUCT_SUMS(sums64_32_blend, std::int64_t, 32, true)
LOWBIT_PRODUCT_SUMS(sums64_64_blend, std::int64_t, 64, true)
#undef LOWBIT_PRODUCT_SUMS

ProductSums product_sums_kernel(int chunk, bool narrow, bool blend) {
  if (narrow && chunk == 16) return blend ? sums32_16_blend : sums32_16;
  if (narrow && chunk == 32) return blend ? sums32_32_blend : sums32_32;
  switch (chunk) {
    case 8: return sums64_8_blend;
    case 16: return sums64_16_blend;
    case 32: return sums64_32_blend;
    case 64: return sums64_64_blend;
  }
  return nullptr;
}

// The kernel for a chunk length, lane width and blend; the int64 blending kernels run every model.
ProductSum product_sum_kernel(int chunk, bool narrow, bool blend) {
  if (narrow && chunk == 16) return blend ? sum32_16_blend : sum32_16;
  if (narrow && chunk == 32) return blend ? sum32_32_blend : sum32_32;
  switch (chunk) {
    case 8: return sum64_8_blend;
    case 16: return sum64_16_blend;
    case 32: return sum64_32_blend;
    case 64: return sum64_64_blend;
  }
  return nullptr;
}

}  // namespace

const std::vector<Decoded>& decode_table(const Format& f) {
  static std::mutex mutex;
  static std::vector<std::pair<Format, std::unique_ptr<std::vector<Decoded>>>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [format, table] : cache)
    if (format == f) return *table;
  if (f.code_bits() > 16) throw std::invalid_argument("decode_table: " + format_name(f) + " is wider than 16 bits");
  auto table = std::make_unique<std::vector<Decoded>>(std::size_t(f.code_count_minus_one()) + 1);
  for (Code c = 0; c < table->size(); ++c) (*table)[c] = decode_one(f, c);
  cache.emplace_back(f, std::move(table));
  return *cache.back().second;
}

std::uint32_t fp32_add(std::uint32_t x, std::uint32_t y) {
  const float sum = std::bit_cast<float>(x) + std::bit_cast<float>(y);
  return std::isnan(sum) ? 0x7fff'ffffu : std::bit_cast<std::uint32_t>(sum);
}

struct Engine::Acc {
  std::int64_t magnitude = 0;
  int exponent = 0;
  bool negative = false;
  Special special = Special::finite;
};

Engine::Engine(const Instruction& instruction)
    : instruction_(instruction),
      p_(instruction.model.fused),
      table_a_(&decode_table(instruction.atom.a)),
      table_b_(&decode_table(instruction.atom.b)) {
  const Atom& at = instruction_.atom;
  order_.resize(std::size_t(at.k));
  if (instruction_.model.arithmetic == Arithmetic::integer) {
    for (int k = 0; k < at.k; ++k) order_[std::size_t(k)] = k;
    return;
  }
  if (auto why = p_.validate(at.k)) throw std::invalid_argument(at.name + ": " + *why);
  if (p_.chunk > kMaxChunk) throw std::invalid_argument(fmt::format("{}: chunk {} > {}", at.name, p_.chunk, kMaxChunk));
  if (p_.scale_mode != ScaleMode::none && !at.scale)
    throw std::invalid_argument(at.name + ": a block-scaled model needs a scale format");
  if (p_.scale_mode == ScaleMode::per_product && at.scale->mantissa_bits != 0)
    throw std::invalid_argument(at.name + ": per-product scales must be powers of two");
  if (p_.scale_mode == ScaleMode::per_group && (p_.interleave != 0 || at.scale_block % p_.group != 0))
    throw std::invalid_argument(at.name + ": per-group scaling needs k in order and groups inside a scale block");
  const int chunks = at.k / p_.chunk;
  std::size_t next = 0;
  for (int c = 0; c < chunks; ++c)
    for (int k = 0; k < at.k; ++k)
      if ((p_.interleave ? (k / p_.interleave) % chunks : k / p_.chunk) == c) order_[next++] = k;

  // Fractions of the terms: value = magnitude * 2^(exponent - fraction).
  const auto& ta = *table_a_;
  const auto& tb = *table_b_;
  const auto widest = [](const std::vector<Decoded>& t, int min_exponent) {
    std::int64_t w = 0;  // largest magnitude << (exponent - min exponent)
    for (const auto& d : t)
      if (d.special == Special::finite) w = std::max(w, std::int64_t(d.magnitude) << (d.exponent - min_exponent));
    return w;
  };
  int product_fraction = at.a.mantissa_bits + at.b.mantissa_bits;
  std::int64_t widest_term = 0;  // before the shift
  if (p_.scale_mode == ScaleMode::per_group) {
    const int fs = at.scale->mantissa_bits;
    product_fraction = at.a.mantissa_bits + at.b.mantissa_bits - at.a.min_exponent() - at.b.min_exponent() + 2 * fs;
    const std::int64_t scale_max = std::int64_t(1) << (fs + 1);
    widest_term = p_.group * widest(ta, at.a.min_exponent()) * widest(tb, at.b.min_exponent()) * scale_max * scale_max;
  } else {
    std::int64_t ma = 0, mb = 0;
    for (const auto& d : ta) ma = std::max<std::int64_t>(ma, d.magnitude);
    for (const auto& d : tb) mb = std::max<std::int64_t>(mb, d.magnitude);
    widest_term = ma * mb;
  }
  const AccumulatorFormat acc = accumulator_format(p_.c_entry == CEntry::fp32_add_after ? formats::fp32 : at.c);
  if (acc.format == formats::fp16) half_table_ = &decode_table(formats::fp16);
  product_shift_ = p_.fraction_bits - product_fraction;
  acc_shift_ = p_.fraction_bits - acc.fraction;
  // The exact final rounding goes through a double: every chunk sum must stay below 2^53.
  const double bound = double(p_.chunk) * std::ldexp(double(widest_term), std::max(product_shift_, 0)) +
                       std::ldexp(double(std::int64_t(2) << acc.fraction), std::max(acc_shift_, 0));
  if (bound >= 0x1p53) throw std::invalid_argument(at.name + ": this model's chunk sums could exceed 53 bits");
  // The products of a chunk fit 32-bit lanes when their shifted sum stays below 2^31. A zero
  // product's exponent (e_zero) cannot change E when every nonzero product's exponent and the
  // accumulator's smallest exponent lie above e_zero: the accumulator (or e_zero, when it is zero)
  // starts the max, and a zero product's ea + eb (zero codes decode with kZeroCodeExponent) stays
  // below it. Otherwise (bf16, scaled products) the kernel blends.
  const bool narrow = double(p_.chunk) * std::ldexp(double(widest_term), std::max(product_shift_, 0)) < 0x1p31;
  const bool blend = p_.scale_mode != ScaleMode::none || at.a.min_exponent() + at.b.min_exponent() <= p_.zero_exponent ||
                     acc.format.min_exponent() <= p_.zero_exponent;
  product_sum_ = product_sum_kernel(p_.chunk, narrow, blend);
  // Lanes need binary32 accumulators and per-product terms.
  if (acc.format == formats::fp32 && p_.scale_mode != ScaleMode::per_group)
    product_sums_ = reinterpret_cast<void (*)()>(product_sums_kernel(p_.chunk, narrow, blend));
}

Operand Engine::decode(std::span<const std::uint32_t> codes, Eigen::Index lines, Eigen::Index K, Eigen::Index depth,
                       std::span<const std::uint32_t> scales, bool as_b) const {
  const Atom& at = instruction_.atom;
  const Format& f = as_b ? at.b : at.a;
  const auto& table = decode_table(f);
  const Eigen::Index steps = depth / at.k;
  const Eigen::Index blocks = at.scale_block ? K / at.scale_block : 0;
  const auto element = [&](Eigen::Index line, Eigen::Index k) { return as_b ? codes[k * lines + line] : codes[line * K + k]; };
  const auto scale_code = [&](Eigen::Index line, Eigen::Index block) {
    // A UE4M3 scale's sign bit is ignored (MMA-Sim); the table holds 7-bit codes.
    return (as_b ? scales[block * lines + line] : scales[line * blocks + block]) & at.scale->code_count_minus_one();
  };
  Operand op;
  op.K = K;
  op.lines = lines;
  op.depth = depth;
  const auto size = std::size_t(lines * depth);
  op.magnitude.resize(size);
  op.exponent.resize(size);
  op.negative.resize(size);
  op.codes.resize(size);
  op.special_step.assign(std::size_t(lines * steps), 0);
  if (at.scale) {
    const auto& scale_table = decode_table(*at.scale);
    op.scale.resize(std::size_t(lines * blocks));
    for (Eigen::Index line = 0; line < lines; ++line)
      for (Eigen::Index block = 0; block < blocks; ++block)
        op.scale[std::size_t(line * blocks + block)] = scale_table[scale_code(line, block)];
  }
  for (Eigen::Index line = 0; line < lines; ++line)
    for (Eigen::Index q = 0; q < depth; ++q) {
      const Eigen::Index s = q / at.k, k = s * at.k + order_[std::size_t(q % at.k)];
      const Code code = k < K ? element(line, k) : 0;  // padding: +0 in every modeled format
      Decoded d = table[code];
      bool special = d.special != Special::finite;
      if (at.scale && k < K) {
        const Decoded& scale = op.scale[std::size_t(line * blocks + k / at.scale_block)];
        special = special || scale.special != Special::finite;
        if (p_.scale_mode == ScaleMode::per_product) d.exponent += scale.exponent;
      }
      const auto at_q = std::size_t(line * depth + q);
      op.magnitude[at_q] = d.magnitude;
      op.exponent[at_q] = d.exponent;
      op.negative[at_q] = d.negative;
      op.codes[at_q] = code;
      if (special) op.special_step[std::size_t(line * steps + s)] = 1;
    }
  if (as_b) {
    op.k_magnitude.resize(size);
    op.k_exponent.resize(size);
    op.k_negative.resize(size);
    for (Eigen::Index line = 0; line < lines; ++line)
      for (Eigen::Index q = 0; q < depth; ++q) {
        const auto from = std::size_t(line * depth + q), to = std::size_t(q * lines + line);
        op.k_magnitude[to] = op.magnitude[from];
        op.k_exponent[to] = op.exponent[from];
        op.k_negative[to] = op.negative[from];
      }
  }
  return op;
}

void Engine::run(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, int lanes,
                 const std::uint32_t* c_bits, std::uint32_t* d, const KLoop& loop) const {
  const Eigen::Index steps = a.depth / instruction_.atom.k;
  std::array<std::uint32_t, kLanes> acc{};
  if (loop.mmas_per_flush == 0) {
    std::copy(c_bits, c_bits + lanes, acc.begin());
    for (Eigen::Index s = 0; s < steps; ++s) step(a, i, b, j0, lanes, s, acc.data());
    std::copy(acc.begin(), acc.begin() + lanes, d);
    return;
  }
  const bool half = instruction_.atom.d == formats::fp16;
  std::copy(c_bits, c_bits + lanes, d);  // the fp32 accumulator
  for (Eigen::Index first = 0; first < steps; first += loop.mmas_per_flush) {
    acc.fill(0);  // a fresh register: +0
    for (Eigen::Index s = first; s < std::min<Eigen::Index>(steps, first + loop.mmas_per_flush); ++s)
      step(a, i, b, j0, lanes, s, acc.data());
    for (int l = 0; l < lanes; ++l)
      d[l] = fp32_add(d[l], half ? std::bit_cast<std::uint32_t>(float(lowbit::decode(formats::fp16, acc[l]))) : acc[l]);
  }
}

void Engine::run_all(const Operand& a, const Operand& b, const std::uint32_t* c, std::uint32_t* d,
                     const KLoop& loop) const {
  const Eigen::Index M = a.lines, N = b.lines;
  // Column blocks keep a few columns of B hot while every row of A passes over them.
  constexpr Eigen::Index kColumnBlock = 4 * kLanes;
  for (Eigen::Index j0 = 0; j0 < N; j0 += kColumnBlock)
    for (Eigen::Index i = 0; i < M; ++i)
      for (Eigen::Index j = j0; j < std::min(N, j0 + kColumnBlock);) {
        const int lanes = N - j >= kLanes ? kLanes : 1;
        run(a, i, b, j, lanes, c + i * N + j, d + i * N + j, loop);
        j += lanes;
      }
}

void Engine::step(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, int lanes, Eigen::Index s,
                  std::uint32_t* acc) const {
  if (instruction_.model.arithmetic == Arithmetic::integer) {
    for (int l = 0; l < lanes; ++l) acc[l] = integer_step(a, i, b, j0 + l, s, acc[l]);
    return;
  }
  const Eigen::Index steps = a.depth / instruction_.atom.k;
  bool special = a.special_step[std::size_t(i * steps + s)];
  for (int l = 0; l < lanes; ++l) special = special || b.special_step[std::size_t((j0 + l) * steps + s)];
  const bool after = p_.c_entry == CEntry::fp32_add_after;
  std::array<std::uint32_t, kLanes> c{};
  if (after) std::copy(acc, acc + lanes, c.begin()), std::fill(acc, acc + lanes, 0u);
  for (int first = 0; first < instruction_.atom.k; first += p_.chunk) {
    const Eigen::Index q = s * instruction_.atom.k + first;
    if (lanes == kLanes && product_sums_) {
      chunk_lanes(a, i, b, j0, q, acc, special);
    } else {
      for (int l = 0; l < lanes; ++l) acc[l] = chunk(a, i, b, j0 + l, q, acc[l], special);
    }
  }
  if (after)
    for (int l = 0; l < lanes; ++l) acc[l] = fp32_add(acc[l], c[std::size_t(l)]);
}

void Engine::chunk_lanes(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, Eigen::Index first,
                         std::uint32_t* acc_bits, bool special) const {
  for (int l = 0; l < kLanes; ++l) special = special || (acc_bits[l] & 0x7f80'0000u) == 0x7f80'0000u;
  if (special) {  // NaN/Inf somewhere: lane by lane
    for (int l = 0; l < kLanes; ++l) acc_bits[l] = chunk(a, i, b, j0 + l, first, acc_bits[l], true);
    return;
  }
  std::int32_t E[kLanes];
  std::int64_t sums[kLanes];
  const auto ia = std::size_t(i * a.depth + first), ib = std::size_t(first * b.lines + j0);
  const Shifts shift{p_.zero_exponent, std::max(product_shift_, 0), std::max(-product_shift_, 0),
                     std::max(acc_shift_, 0), std::max(-acc_shift_, 0)};
  reinterpret_cast<ProductSums>(product_sums_)(&a.magnitude[ia], &a.exponent[ia], &a.negative[ia], &b.k_magnitude[ib],
                                               &b.k_exponent[ib], &b.k_negative[ib], b.lines, acc_bits, shift, E, sums);
  for (int l = 0; l < kLanes; ++l) acc_bits[l] = round(sums[l], E[l] - p_.fraction_bits);
}

std::int64_t Engine::accumulator_term(const Acc& acc, int E) const {
  if (!acc.magnitude) return 0;
  const std::int64_t v = shifted(acc.magnitude, std::max(acc_shift_, 0), E - acc.exponent + std::max(-acc_shift_, 0));
  return acc.negative ? -v : v;
}

std::uint32_t Engine::integer_step(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j, Eigen::Index s,
                                   std::uint32_t c_bits) const {
  const int k = instruction_.atom.k;
  const std::size_t ia = std::size_t(i * a.depth + s * k), ib = std::size_t(j * b.depth + s * k);
  std::int64_t sum = std::int32_t(c_bits);
  for (int t = 0; t < k; ++t) {
    const std::int64_t product = std::int64_t(a.magnitude[ia + t]) * b.magnitude[ib + t];
    sum += (a.negative[ia + t] ^ b.negative[ib + t]) ? -product : product;
  }
  if (instruction_.model.integer.saturate)
    sum = std::clamp<std::int64_t>(sum, INT32_MIN, INT32_MAX);
  return std::uint32_t(sum);  // wraps modulo 2^32
}

Engine::Acc Engine::accumulator(std::uint32_t bits) const {
  Acc acc;
  if (half_table_) {
    const Decoded& d = (*half_table_)[bits & 0xffff];
    acc.magnitude = d.magnitude;
    acc.exponent = d.exponent;
    acc.negative = d.negative != 0;
    acc.special = d.special;
    return acc;
  }
  const std::uint32_t field = (bits >> 23) & 0xff, fraction = bits & 0x7f'ffff;
  acc.negative = (bits >> 31) != 0;
  if (field == 0xff) {
    acc.special = fraction ? Special::nan : Special::inf;
    return acc;
  }
  acc.magnitude = field ? fraction | (std::uint32_t{1} << 23) : fraction;
  acc.exponent = field ? int(field) - 127 : -126;
  return acc;
}

std::optional<std::uint32_t> Engine::special_result(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j,
                                                    Eigen::Index first, const Acc& acc) const {
  const Atom& at = instruction_.atom;
  bool nan = acc.special == Special::nan;
  bool positive_inf = acc.special == Special::inf && !acc.negative;
  bool negative_inf = acc.special == Special::inf && acc.negative;
  const Eigen::Index blocks = at.scale_block ? a.K / at.scale_block : 0;
  for (int t = 0; t < p_.chunk; ++t) {
    const Eigen::Index q = first + t, k = (q / at.k) * at.k + order_[std::size_t(q % at.k)];
    const Decoded& da = (*table_a_)[a.codes[std::size_t(i * a.depth + q)]];
    const Decoded& db = (*table_b_)[b.codes[std::size_t(j * b.depth + q)]];
    if (at.scale && k < a.K &&
        (a.scale[std::size_t(i * blocks + k / at.scale_block)].special != Special::finite ||
         b.scale[std::size_t(j * blocks + k / at.scale_block)].special != Special::finite))
      nan = true;
    if (da.special == Special::nan || db.special == Special::nan) {
      nan = true;
    } else if (da.special == Special::inf || db.special == Special::inf) {
      const bool times_zero = (da.special == Special::finite && da.magnitude == 0) ||
                              (db.special == Special::finite && db.magnitude == 0);
      if (times_zero) nan = true;
      else (da.negative != db.negative ? negative_inf : positive_inf) = true;
    }
  }
  if (!nan && !positive_inf && !negative_inf) return std::nullopt;
  if (nan || (positive_inf && negative_inf)) return canonical_nan_bits(output_format());
  const bool half = output_format() == formats::fp16;
  if (positive_inf) return half ? kFp16PositiveInf : kFp32PositiveInf;
  return half ? kFp16NegativeInf : kFp32NegativeInf;
}

const Format& Engine::output_format() const {
  return p_.rounding == OutputRounding::rne_fp16 ? formats::fp16 : formats::fp32;
}

std::uint32_t Engine::chunk(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j, Eigen::Index first,
                            std::uint32_t acc_bits, bool special) const {
  const Acc acc = accumulator(acc_bits);
  if (special || acc.special != Special::finite)
    if (auto result = special_result(a, i, b, j, first, acc)) return *result;

  int E = acc.magnitude ? acc.exponent : p_.zero_exponent;
  const std::size_t ia = std::size_t(i * a.depth + first), ib = std::size_t(j * b.depth + first);
  const std::int32_t *ma = &a.magnitude[ia], *mb = &b.magnitude[ib];
  const std::int32_t *ea = &a.exponent[ia], *eb = &b.exponent[ib];
  const std::int32_t *na = &a.negative[ia], *nb = &b.negative[ib];
  const int pre = std::max(product_shift_, 0), extra = std::max(-product_shift_, 0);
  std::int64_t sum = 0;
  if (p_.scale_mode != ScaleMode::per_group) {
    sum = product_sum_(ma, mb, ea, eb, na, nb, p_.zero_exponent, pre, extra, E);
  } else {
    // Group sums in units of 2^(emin_a + emin_b - fraction_a - fraction_b); a group is a zero term
    // when all its products are zero or a scale is zero (a sum that cancels keeps its exponent).
    const Atom& at = instruction_.atom;
    const int min_a = at.a.min_exponent(), min_b = at.b.min_exponent();
    const Eigen::Index blocks = a.K / at.scale_block;
    std::int64_t magnitude[kMaxChunk], negative[kMaxChunk];
    std::int32_t exponent[kMaxChunk];
    int count = 0;
    for (int g = 0; g < p_.chunk; g += p_.group, ++count) {
      std::int64_t group_sum = 0;
      bool nonzero = false;
      for (int t = g; t < g + p_.group; ++t) {
        const std::int64_t m = std::int64_t(ma[t]) * mb[t];
        const std::int64_t term = m ? m << ((ea[t] - min_a) + (eb[t] - min_b)) : 0;
        const std::int64_t sign = na[t] ^ nb[t];
        group_sum += (term ^ sign) - sign;
        nonzero = nonzero || m != 0;
      }
      const Eigen::Index block = (first + g) / at.scale_block;  // per-group models keep k in order
      const Decoded& sa = a.scale[std::size_t(i * blocks + block)];
      const Decoded& sb = b.scale[std::size_t(j * blocks + block)];
      const bool zero = !nonzero || sa.magnitude == 0 || sb.magnitude == 0;
      magnitude[count] = (group_sum < 0 ? -group_sum : group_sum) * sa.magnitude * sb.magnitude;
      negative[count] = group_sum < 0 ? -1 : 0;
      exponent[count] = zero ? p_.zero_exponent : sa.exponent + sb.exponent;
      E = std::max(E, exponent[count]);
    }
    for (int t = 0; t < count; ++t) {
      const std::int64_t v = shifted(magnitude[t], pre, E - exponent[t] + extra);
      sum += (v ^ negative[t]) - negative[t];
    }
  }
  return round(sum + accumulator_term(acc, E), E - p_.fraction_bits);
}

std::uint32_t Engine::round(std::int64_t sum, int scale_exponent) const {
  static const ConversionOptions toward_zero{Rounding::toward_zero};
  static const ConversionOptions nearest_even_to_inf{Rounding::nearest_even, Overflow::inf};
  if (sum == 0) return 0;  // an exact zero is +0
  if (p_.rounding != OutputRounding::rne_fp16) {
    // A normal binary32 result, rounded toward zero, is the leading 24 (or 14, e8m13) bits of
    // |sum|: the hot path. Subnormal and overflowing results go through encode() below.
    const std::uint64_t magnitude = std::uint64_t(sum < 0 ? -sum : sum);
    const int top = 63 - std::countl_zero(magnitude);
    const int exponent = top + scale_exponent;
    if (exponent >= -126 && exponent <= 127) {
      const std::uint64_t significand = top >= 23 ? magnitude >> (top - 23) : magnitude << (23 - top);
      const std::uint32_t cleared = p_.rounding == OutputRounding::rz_e8m13 ? 0x3ffu : 0u;
      return (sum < 0 ? 0x8000'0000u : 0u) | (std::uint32_t(exponent + 127) << 23) |
             (std::uint32_t(significand) & 0x7f'ffffu & ~cleared);
    }
  }
  const double x = std::ldexp(double(sum), scale_exponent);  // exact: |sum| < 2^53
  switch (p_.rounding) {
    case OutputRounding::rz_fp32:
    case OutputRounding::rz_e8m13:
      // Overflow gives Inf although the rounding is toward zero (recorded on an H200: bf16).
      if (std::fabs(x) >= 0x1p128) return x < 0 ? kFp32NegativeInf : kFp32PositiveInf;
      if (p_.rounding == OutputRounding::rz_fp32) return encode(formats::fp32, x, toward_zero);
      return encode(formats::e8m13, x, toward_zero) << 10;  // s e8 m13 -> binary32, low 10 bits zero
    case OutputRounding::rne_fp16: return encode(formats::fp16, x, nearest_even_to_inf);
  }
  return 0;
}

}  // namespace lowbit::mma::detail

namespace lowbit::mma {
std::uint32_t canonical_nan_bits(const Format& accumulator) {
  return accumulator == formats::fp16 ? 0x7fffu : 0x7fff'ffffu;
}
}  // namespace lowbit::mma
