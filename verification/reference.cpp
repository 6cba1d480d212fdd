#include "verification/reference.hpp"

#include <bit>
#include <cmath>
#include <optional>
#include <stdexcept>

#include <boost/multiprecision/cpp_int.hpp>

#include "emulation/convert.hpp"
#include "emulation/mma/arithmetic.hpp"

namespace lowbit::mma {
namespace {

using Integer = boost::multiprecision::cpp_int;
using Rational = boost::multiprecision::cpp_rational;

// A value with IEEE specials.
struct Value {
  enum class Kind { finite, nan, positive_inf, negative_inf } kind = Kind::finite;
  Rational x;  // finite: the exact value (the sign of a zero does not matter to the sums)
};

Rational power_of_two(int e) {
  return e >= 0 ? Rational(Integer(1) << e) : Rational(Integer(1), Integer(1) << -e);
}

Value value_of(const Format& f, Code code) {
  if (f.is_nan_code(code)) return {Value::Kind::nan, 0};
  const double v = decode(f, code);
  if (std::isinf(v)) return {v > 0 ? Value::Kind::positive_inf : Value::Kind::negative_inf, 0};
  return {Value::Kind::finite, Rational(v)};
}

// floor(log2 |x|) for x != 0, no smaller than `min_exponent` (a subnormal's exponent).
int exponent_of(const Rational& x, int min_exponent) {
  const Rational magnitude = abs(x);
  int e = 0;
  while (power_of_two(e) > magnitude) --e;
  while (power_of_two(e + 1) <= magnitude) ++e;
  return std::max(e, min_exponent);
}

Integer truncate(const Rational& x) { return numerator(x) / denominator(x); }  // toward zero

struct Term {
  Rational value;
  int exponent;
};

// The inputs of one output element: A's row and B's column (padded with +0 codes to whole
// instructions) and where their scale factors are.
struct Line {
  std::vector<Code> row, column;
  Eigen::Index i = 0, j = 0, K = 0;
  const MatrixCode* scale_a = nullptr;
  const MatrixCode* scale_b = nullptr;
};

class Reference {
 public:
  explicit Reference(const Instruction& in) : in_(in), p_(in.model.fused), at_(in.atom) {}

  std::uint32_t run(const Line& line, std::uint32_t c, const KLoop& loop) const {
    const Eigen::Index steps = Eigen::Index(line.row.size()) / at_.k;
    if (loop.mmas_per_flush == 0) {
      for (Eigen::Index s = 0; s < steps; ++s) c = instruction(line, s, c);
      return c;
    }
    std::uint32_t outer = c;
    for (Eigen::Index first = 0; first < steps; first += loop.mmas_per_flush) {
      std::uint32_t inner = 0;
      for (Eigen::Index s = first; s < std::min<Eigen::Index>(steps, first + loop.mmas_per_flush); ++s)
        inner = instruction(line, s, inner);
      outer = accumulator_add(formats::fp32, outer, std::bit_cast<std::uint32_t>(float(decode(at_.d, inner))));
    }
    return outer;
  }

 private:
  std::uint32_t instruction(const Line& line, Eigen::Index s, std::uint32_t c) const {
    if (in_.model.arithmetic == Arithmetic::integer) {
      Integer sum = Integer(std::int32_t(c));
      for (int t = 0; t < at_.k; ++t) {
        const auto k = std::size_t(s * at_.k + t);
        sum += Integer(std::int64_t(decode(at_.a, line.row[k]))) * Integer(std::int64_t(decode(at_.b, line.column[k])));
      }
      if (in_.model.integer.saturate) sum = std::clamp<Integer>(sum, INT32_MIN, INT32_MAX);
      return std::uint32_t(static_cast<std::int64_t>(sum & Integer(0xffff'ffffu)));
    }
    const bool after = p_.c_entry == CEntry::added_after;
    std::uint32_t acc = after ? 0 : c;
    const int chunks = at_.k / p_.chunk;
    for (int chunk = 0; chunk < chunks; ++chunk) {
      std::vector<int> ks;  // this chunk's k, by the model's formula
      for (int k = 0; k < at_.k; ++k)
        if ((p_.interleave ? (k / p_.interleave) % chunks : k / p_.chunk) == chunk) ks.push_back(int(s) * at_.k + k);
      acc = fused_chunk(line, ks, acc);
    }
    return after ? accumulator_add(at_.c, acc, c) : acc;
  }

  // The scale factor of A's row (or B's column) for element k; padding (k >= K) has none.
  std::optional<Value> scale(const Line& line, bool of_a, int k) const {
    if (!at_.block_scaled() || k >= line.K) return std::nullopt;
    const Eigen::Index block = k / at_.scale_block;
    const Code code = of_a ? (*line.scale_a)(line.i, block) : (*line.scale_b)(block, line.j);
    return value_of(at_.scale, code & at_.scale.code_count_minus_one());  // a UE4M3 sign bit is ignored
  }

  std::uint32_t fused_chunk(const Line& line, const std::vector<int>& ks, std::uint32_t acc_bits) const {
    const Format& acc_format = p_.rounding == OutputRounding::rne_fp16 ? formats::fp16 : formats::fp32;
    const bool half = acc_format == formats::fp16;
    const Value acc = value_of(acc_format, acc_bits);
    const auto a = [&](int k) { return value_of(at_.a, line.row[std::size_t(k)]); };
    const auto b = [&](int k) { return value_of(at_.b, line.column[std::size_t(k)]); };

    // Special values: NaN wins; +Inf and -Inf together give NaN; Inf times zero gives NaN.
    bool nan = acc.kind == Value::Kind::nan, positive = acc.kind == Value::Kind::positive_inf,
         negative = acc.kind == Value::Kind::negative_inf;
    for (int k : ks) {
      const Value x = a(k), y = b(k);
      const auto sa = scale(line, true, k), sb = scale(line, false, k);
      if ((sa && sa->kind == Value::Kind::nan) || (sb && sb->kind == Value::Kind::nan)) nan = true;
      const bool x_inf = x.kind == Value::Kind::positive_inf || x.kind == Value::Kind::negative_inf;
      const bool y_inf = y.kind == Value::Kind::positive_inf || y.kind == Value::Kind::negative_inf;
      if (x.kind == Value::Kind::nan || y.kind == Value::Kind::nan) {
        nan = true;
      } else if (x_inf || y_inf) {
        if ((!x_inf && x.x == 0) || (!y_inf && y.x == 0)) {
          nan = true;
        } else {
          const bool x_negative = x_inf ? x.kind == Value::Kind::negative_inf : x.x < 0;
          const bool y_negative = y_inf ? y.kind == Value::Kind::negative_inf : y.x < 0;
          (x_negative != y_negative ? negative : positive) = true;
        }
      }
    }
    if (nan || (positive && negative)) return canonical_nan_bits(acc_format);
    if (positive) return half ? 0x7c00u : 0x7f80'0000u;
    if (negative) return half ? 0xfc00u : 0xff80'0000u;

    // The terms and their exponents; a zero term takes the zero-term exponent.
    std::vector<Term> terms;
    if (p_.scale_mode == ScaleMode::per_group) {
      // Each group of products summed exactly, times both scales; its exponent is the scales'.
      for (std::size_t g = 0; g < ks.size(); g += std::size_t(p_.group)) {
        Rational sum = 0;
        bool all_zero = true;
        for (std::size_t t = g; t < g + std::size_t(p_.group); ++t) {
          const Rational product = a(ks[t]).x * b(ks[t]).x;
          sum += product;
          all_zero = all_zero && product == 0;
        }
        const auto sa = scale(line, true, ks[g]), sb = scale(line, false, ks[g]);
        const int min_e = at_.scale.min_exponent();
        const bool zero = all_zero || sa->x == 0 || sb->x == 0;
        terms.push_back({sum * sa->x * sb->x, zero ? p_.zero_exponent : exponent_of(sa->x, min_e) + exponent_of(sb->x, min_e)});
      }
    } else {
      // A product keeps its significand sa*sb (in [1,4) or subnormal); its exponent is ea + eb.
      for (int k : ks) {
        const Rational x = a(k).x, y = b(k).x;
        if (x == 0 || y == 0) {
          terms.push_back({0, p_.zero_exponent});
          continue;
        }
        Rational product = x * y;
        // Exponents as the arithmetic sees the operands (after unpacking, where the model unpacks).
        int exponent = exponent_of(x, p_.arithmetic_format(at_.a).min_exponent()) +
                       exponent_of(y, p_.arithmetic_format(at_.b).min_exponent());
        if (const auto sa = scale(line, true, k), sb = scale(line, false, k); sa && sb) {
          product *= sa->x * sb->x;
          exponent += exponent_of(sa->x, at_.scale.min_exponent()) + exponent_of(sb->x, at_.scale.min_exponent());
        }
        terms.push_back({product, exponent});
      }
    }
    terms.push_back({acc.x, acc.x == 0 ? p_.zero_exponent : exponent_of(acc.x, half ? -14 : -126)});

    int E = terms.front().exponent;
    for (const auto& t : terms) E = std::max(E, t.exponent);
    Integer S = 0;
    for (const auto& t : terms) S += truncate(t.value * power_of_two(p_.fraction_bits - E));
    return round(Rational(S) * power_of_two(E - p_.fraction_bits));
  }

  // An exact zero is +0; a nonzero sum rounded to zero is +0 too unless the model keeps its sign.
  std::uint32_t round(const Rational& x) const {
    if (x == 0) return 0;
    const bool negative_zero = p_.rounded_zero_keeps_sign && x < 0;
    const double d = x.convert_to<double>();
    if (Rational(d) != x) throw std::logic_error("reference: a chunk sum is not a double");
    switch (p_.rounding) {
      case OutputRounding::rz_fp32:
      case OutputRounding::rz_e8m13: {
        if (std::fabs(d) >= 0x1p128) return d < 0 ? 0xff80'0000u : 0x7f80'0000u;
        const double kept = round_to_format(p_.rounding == OutputRounding::rz_fp32 ? formats::fp32 : formats::e8m13, d,
                                            {Rounding::toward_zero});
        if (kept == 0) return negative_zero ? 0x8000'0000u : 0u;
        return std::bit_cast<std::uint32_t>(float(kept));
      }
      case OutputRounding::rne_fp16: {
        const double kept = round_to_format(formats::fp16, d, {Rounding::nearest_even, Overflow::inf});
        if (kept == 0) return negative_zero ? 0x8000u : 0u;
        return encode(formats::fp16, kept, {Rounding::nearest_even, Overflow::inf});
      }
    }
    return 0;
  }

  const Instruction& in_;
  const FusedDotAdd& p_;
  const Atom& at_;
};

}  // namespace

MatrixCode reference_gemm(const Instruction& instruction, const GemmOperands& op, const KLoop& loop) {
  const Atom& at = instruction.atom;
  if (auto why = loop.validate(at, op.a.cols(), at.block_scaled())) throw std::invalid_argument("reference: " + *why);
  if (op.b.rows() != op.a.cols() || op.c.rows() != op.a.rows() || op.c.cols() != op.b.cols())
    throw std::invalid_argument("reference: operand shapes disagree");
  const Reference reference(instruction);
  const Eigen::Index K = op.a.cols(), depth = (K + at.k - 1) / at.k * at.k;
  MatrixCode d(op.a.rows(), op.b.cols());
  for (Eigen::Index i = 0; i < d.rows(); ++i)
    for (Eigen::Index j = 0; j < d.cols(); ++j) {
      Line line{std::vector<Code>(std::size_t(depth), 0), std::vector<Code>(std::size_t(depth), 0), i, j, K,
                op.scale_a, op.scale_b};
      for (Eigen::Index k = 0; k < K; ++k) line.row[std::size_t(k)] = op.a(i, k), line.column[std::size_t(k)] = op.b(k, j);
      d(i, j) = reference.run(line, op.c(i, j), loop);
    }
  return d;
}

std::vector<std::uint32_t> reference_execute(const Instruction& instruction, const TileInputs& in) {
  const Atom& at = instruction.atom;
  if (auto why = check_inputs(at, in)) throw std::invalid_argument(at.name.str() + ": " + *why);
  const auto matrix = [](std::span<const std::uint32_t> codes, int rows, int cols) {
    return MatrixCode(MatrixView<std::uint32_t>(codes.data(), rows, cols));
  };
  const MatrixCode a = matrix(in.a, at.m, at.k), b = matrix(in.b, at.k, at.n), c = matrix(in.c, at.m, at.n);
  MatrixCode sa, sb;
  if (at.block_scaled()) sa = matrix(in.scale_a, at.m, at.scale_columns()), sb = matrix(in.scale_b, at.scale_columns(), at.n);
  const MatrixCode d = reference_gemm(instruction, {a, b, c, at.block_scaled() ? &sa : nullptr, at.block_scaled() ? &sb : nullptr});
  return {d.data(), d.data() + d.size()};
}

}  // namespace lowbit::mma
