// The sage2-8b kernels' host side without a GPU: problem validation and its messages, refusal of
// bad tensors before any CUDA call, the P fragment map the kernel and the V layout share, the
// shared-memory layout, the emulated sage2-8b (as the GPU check lays it out) against float64
// attention, and the emulator's operands in the kernels' layout (sage2_operands.hpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "emulation/attention/forward_operands.hpp"
#include "emulation/convert.hpp"
#include "kernels/attention/sage2_attention.hpp"
#include "kernels/attention/sage2_operands.hpp"
#include "kernels/sm90/fragment.hpp"
#include "kernels/sm90/smem_layout.hpp"
#include "numerics/attention.hpp"
#include "numerics/metrics.hpp"
#include "numerics/synthetic.hpp"
#include "verification/sage2_emulated.hpp"

using namespace lowbit;
using kernels::attention::DType;
using kernels::attention::Sage2Problem;

namespace {

std::string why(const Sage2Problem& p) { return p.validate().value_or("(valid)"); }

// Synthetic Q, K, V for problem p (batch 1) as the kernel's fp16 codes in p's layout and as the values
// those codes hold; V offset by v_offset (a mean for smooth V to take out).
struct Fp16Inputs {
  std::vector<std::uint16_t> q, k, v;
  Tensor4 q_values, k_values, v_values;
};
Fp16Inputs fp16_inputs(const Sage2Problem& p, float v_offset = 0.0f) {
  SyntheticAttentionSpec spec;
  spec.heads = p.heads_q;
  spec.tokens = p.tokens;
  spec.dim = p.head_dim;
  const AttentionData data = make_synthetic_attention(spec);
  Fp16Inputs in{std::vector<std::uint16_t>(p.elements(p.heads_q)), std::vector<std::uint16_t>(p.elements(p.heads_kv)),
                std::vector<std::uint16_t>(p.elements(p.heads_kv)), Tensor4(1, p.heads_q, p.tokens, p.head_dim),
                Tensor4(1, p.heads_kv, p.tokens, p.head_dim), Tensor4(1, p.heads_kv, p.tokens, p.head_dim)};
  const auto put = [&](std::vector<std::uint16_t>& codes, Tensor4& values, const MatrixF& m, int h, int heads, float offset) {
    for (int i = 0; i < p.tokens; ++i)
      for (int c = 0; c < p.head_dim; ++c) {
        const Code code = encode(formats::fp16, double(m(i, c) + offset));
        codes[p.element_offset(0, h, i, heads) + std::size_t(c)] = std::uint16_t(code);
        values.row(0, h, i)[c] = float(decode(formats::fp16, code));
      }
  };
  for (int h = 0; h < p.heads_q; ++h) put(in.q, in.q_values, data.q[std::size_t(h)], h, p.heads_q, 0.0f);
  for (int h = 0; h < p.heads_kv; ++h) {
    put(in.k, in.k_values, data.k[std::size_t(h)], h, p.heads_kv, 0.0f);
    put(in.v, in.v_values, data.v[std::size_t(h)], h, p.heads_kv, v_offset);
  }
  return in;
}

}  // namespace

TEST_CASE("sage2 problem: unsupported shapes are refused with the reason") {
  Sage2Problem p;
  CHECK_FALSE(p.validate());
  p.head_dim = 96;
  CHECK_THAT(why(p), Catch::Contains("head_dim=96") && Catch::Contains("64 and 128"));
  p.head_dim = 64;
  p.heads_q = 3;
  p.heads_kv = 2;
  CHECK_THAT(why(p), Catch::Contains("heads_q=3 is not a multiple of heads_kv=2"));
  p.heads_q = 2;
  p.tokens = 0;
  CHECK_THAT(why(p), Catch::Contains("tokens must be >= 1"));
  p.tokens = 1 << 23;
  CHECK_THAT(why(p), Catch::Contains("exceeds"));
  p.tokens = 100;
  p.dtype = static_cast<DType>(7);
  CHECK_THAT(why(p), Catch::Contains("fp16 or bf16"));
  // In place and smooth V: fp16 output with the polynomial exp2 only (kInPlaceSmoothVDtype, kInPlaceSmoothVExp2).
  p.dtype = DType::fp16;
  p.in_place = true;
  p.smooth_v = true;
  CHECK_FALSE(p.validate());
  p.dtype = DType::bf16;
  CHECK_THAT(why(p), Catch::Contains("in-place accumulation and smooth V are built for fp16 output with the exp2 poly5 only"));
  p.dtype = DType::fp16;
  p.in_place = false;
  p.exp2 = lowbit::attention::steps::Exp2Unit::sm90_ex2;
  CHECK_THAT(why(p), Catch::Contains("built for fp16 output"));
  // The overlapped schedule: the presets' instances only.
  p.exp2 = lowbit::attention::steps::Exp2Unit::polynomial;
  p.schedule = kernels::attention::Sage2Schedule::overlapped;
  CHECK_THAT(why(p), Catch::Contains("the overlapped schedule is built for the presets' instances: not with smooth V"));
  p.smooth_v = false;
  p.in_place = true;
  CHECK_THAT(why(p), Catch::Contains("not with in-place accumulation"));
  p.in_place = false;
  CHECK_FALSE(p.validate());
  p.schedule = static_cast<kernels::attention::Sage2Schedule>(9);
  CHECK_THAT(why(p), Catch::Contains("schedule must be serial or overlapped"));
}

TEST_CASE("sage2 schedules: named and parsed back") {
  using kernels::attention::Sage2Schedule;
  for (Sage2Schedule s : {Sage2Schedule::serial, Sage2Schedule::overlapped})
    CHECK(kernels::attention::parse_schedule(kernels::attention::schedule_name(s)) == s);
  CHECK(std::string(kernels::attention::schedule_name(Sage2Schedule::overlapped)) == "overlapped");
  CHECK_FALSE(kernels::attention::parse_schedule("pingpong"));
}

TEST_CASE("sage2 device API: null and misaligned buffers are refused, named, before the GPU is touched") {
  Sage2Problem p;
  p.tokens = 5;
  p.head_dim = 64;
  // Addresses never dereferenced: each call throws at its pointer checks.
  const auto at = [](std::uintptr_t address) { return reinterpret_cast<void*>(address); };
  kernels::attention::QuantizedDevice b;
  b.q_codes = static_cast<std::int8_t*>(at(0x1000));
  b.k_codes = static_cast<std::int8_t*>(at(0x2000));
  b.v_codes = static_cast<std::uint8_t*>(at(0x3000));
  b.q_scales = static_cast<float*>(at(0x4000));
  b.q_bias = static_cast<float*>(at(0x5000));
  b.k_scales = static_cast<float*>(at(0x6000));
  b.v_scales = static_cast<float*>(at(0x7000));
  float* lse = static_cast<float*>(at(0x8000));
  void* out = at(0x9000);
  const auto attention = [&] { kernels::attention::sage2_attention_quantized(p, b, out, lse); };
  b.k_codes = static_cast<std::int8_t*>(at(0x2008));  // 8-byte aligned, not 16
  CHECK_THROWS_WITH(attention(), Catch::Contains("quantized.k_codes is not 16-byte aligned"));
  b.k_codes = static_cast<std::int8_t*>(at(0x2000));
  b.q_bias = nullptr;
  CHECK_THROWS_WITH(attention(), Catch::Contains("quantized.q_bias is a null pointer"));
  b.q_bias = static_cast<float*>(at(0x5002));
  CHECK_THROWS_WITH(attention(), Catch::Contains("quantized.q_bias is not 4-byte aligned"));
  b.q_bias = static_cast<float*>(at(0x5000));
  // sage2_quantize also writes the statistics workspace and the K mean.
  b.k_mean = static_cast<float*>(at(0xa000));
  b.v_chunk_amax = static_cast<float*>(at(0xb000));
  b.k_chunk_sums = static_cast<double*>(at(0xc004));
  CHECK_THROWS_WITH(kernels::attention::sage2_quantize(p, out, out, out, b),
                    Catch::Contains("quantized.k_chunk_sums is not 8-byte aligned"));
  // Smooth V: the GPU's quantization does not smooth V; the attention kernel reads the V mean.
  p.smooth_v = true;
  CHECK_THROWS_WITH(kernels::attention::sage2_quantize(p, out, out, out, b),
                    Catch::Contains("smooth_v: the GPU's quantization does not smooth V"));
  CHECK_THROWS_WITH(attention(), Catch::Contains("quantized.v_mean is a null pointer"));
}

TEST_CASE("sage2 host API: wrong sizes and non-finite inputs are refused before the GPU is touched") {
  Sage2Problem p;
  p.tokens = 5;
  p.head_dim = 64;
  std::vector<std::uint16_t> q(p.elements(1), 0x3c00), k(q), v(q);
  std::vector<std::uint16_t> short_k(k.begin(), k.end() - 1);
  CHECK_THROWS_WITH(kernels::attention::sage2_attention_host(p, q, short_k, v),
                    Catch::Contains("k has 319 elements, the problem needs 320"));
  v[77] = 0x7c00;  // +Inf in fp16
  CHECK_THROWS_WITH(kernels::attention::sage2_attention_host(p, q, k, v),
                    Catch::Contains("v holds a NaN or Inf at element 77"));
  p.head_dim = 80;
  CHECK_THROWS_WITH(kernels::attention::sage2_attention_host(p, q, k, v), Catch::Contains("head_dim=80"));
  // Quantized on the host: every buffer the problem's size, V's mean exactly with smooth V.
  p.head_dim = 64;
  const auto sizes = kernels::attention::QuantizedSizes::of(p);
  kernels::attention::Sage2HostQuantized h;
  kernels::attention::for_each_quantized_buffer([&](const char*, auto, auto host, auto count) { (h.*host).resize(sizes.*count); });
  h.v_scales.resize(sizes.v_scales - 1);
  CHECK_THROWS_WITH(kernels::attention::sage2_attention_host_quantized(p, h),
                    Catch::Contains("quantized.v_scales has 63 elements, the problem needs 64"));
  h.v_scales.resize(sizes.v_scales);
  p.smooth_v = true;
  CHECK_THROWS_WITH(kernels::attention::sage2_attention_host_quantized(p, h),
                    Catch::Contains("quantized.v_mean has 0 elements, the problem needs 64"));
}

TEST_CASE("sage2 P fragment: accumulator -> A map derived from the two fragments") {
  for (int n : {64, 128, 256}) {
    const auto map = kernels::sm90::accumulator_to_a8(n);
    REQUIRE(map.consistent);
    CHECK(map.groups == n / 32);
    std::set<int> keys(map.key_of_column.begin(), map.key_of_column.end());
    CHECK(keys.size() == 32);
    // Each thread's A values of a row take that row's accumulator values in the same group.
    const layout::Fragment d = layout::wgmma_m64_d(n), a = layout::wgmma_m64k32_a8;
    for (int thread = 0; thread < 128; ++thread)
      for (int g = 0; g < map.groups; ++g)
        for (int i = 0; i < 16; ++i) {
          const layout::Offset from = d(thread, map.source[g][i]), to = a(thread, i);
          CHECK(from.row == to.row);
          CHECK(from.col == 32 * g + map.key_of_column[to.col]);
        }
  }
  // The published FlashAttention-3 FP8 register permutation, as a cross-check of the derivation:
  // A column 4t + e (+16) holds key 8 * (e / 2) + 2t + e % 2 (+16).
  const auto map = kernels::sm90::accumulator_to_a8(128);
  for (int p = 0; p < 32; ++p) {
    const int half = p / 16, t = p % 16 / 4, e = p % 4;
    CHECK(map.key_of_column[p] == 16 * half + 8 * (e / 2) + 2 * t + e % 2);
  }
}

TEST_CASE("sm90 K-major layout: consecutive 16-byte pieces land on consecutive slots, every byte once") {
  for (int k_bytes : {64, 128}) {
    const kernels::sm90::KMajorLayout layout{k_bytes};
    const int rows = 128;
    std::vector<int> seen(std::size_t(rows * k_bytes), 0);
    for (int piece = 0; piece < rows * k_bytes / 16; ++piece) {
      const int row = layout.piece_row(piece), kb = layout.piece_k_byte(piece);
      CHECK(layout.offset(row, kb) == 16 * piece);
      for (int b = 0; b < 16; ++b) ++seen[std::size_t(layout.offset(row, kb + b))];
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  }
}

TEST_CASE("sage2 emulated, in the kernels' layout: close to float64 attention, causal and not, GQA") {
  for (bool causal : {false, true}) {
    Sage2Problem p;
    p.head_dim = 64;
    p.tokens = 150;
    p.heads_q = 2;
    p.heads_kv = 1;
    p.causal = causal;
    const Fp16Inputs in = fp16_inputs(p);
    const std::vector<std::uint16_t>&q = in.q, &k = in.k, &v = in.v;
    const auto result = verification::emulate_sage2(p, q, k, v);
    for (int h = 0; h < 2; ++h) {
      const auto decoded = [&](const std::vector<std::uint16_t>& x, int head, int heads) {
        MatrixD m(p.tokens, p.head_dim);
        for (int t = 0; t < p.tokens; ++t)
          for (int c = 0; c < p.head_dim; ++c) m(t, c) = decode(formats::fp16, x[p.element_offset(0, head, t, heads) + std::size_t(c)]);
        return m;
      };
      const MatrixD qd = decoded(q, h, 2), kd = decoded(k, 0, 1), vd = decoded(v, 0, 1);
      MatrixD scores = qd * kd.transpose() / std::sqrt(double(p.head_dim));
      if (causal)
        for (int i = 0; i < p.tokens; ++i)
          for (int j = i + 1; j < p.tokens; ++j) scores(i, j) = -std::numeric_limits<double>::infinity();
      const MatrixD reference = attention_from_scores(scores, vd);
      const ErrorMetrics e = compare(reference, decoded(result.out, h, 2));
      INFO("head " << h << " causal " << causal << ": cosine " << e.cosine << ", relative L1 " << e.relative_l1);
      CHECK(e.cosine > 0.999);
      CHECK(e.relative_l1 < 0.03);
      for (int t = 0; t < p.tokens; ++t) {  // LSE: natural log of sum exp(q.k / sqrt(d))
        const double row_max = scores.row(t).maxCoeff();
        const double lse = row_max + std::log((scores.row(t).array() - row_max).exp().sum());
        CHECK(std::abs(result.lse[std::size_t(h * p.tokens + t)] - lse) < 0.05 + 0.01 * std::abs(lse));
      }
    }
  }
}

TEST_CASE("sage2 emulated operands in the kernels' layout: forward's kept operands and prepare_operands' are the same bytes") {
  // The GPU check lays out forward()'s kept operands (emulate_sage2), gpu_forward's smooth-V runs
  // prepare_operands' (lay_out_operands): the same layout of the same numbers, V's mean included.
  for (bool causal : {false, true}) {
    Sage2Problem p;
    p.head_dim = 64;
    p.tokens = 300;
    p.heads_q = 2;
    p.heads_kv = 1;
    p.causal = causal;
    p.in_place = true;
    p.smooth_v = true;
    const Fp16Inputs in = fp16_inputs(p, 2.0f);
    const kernels::attention::Sage2HostQuantized kept = verification::emulate_sage2(p, in.q, in.k, in.v).quantized;

    attention::Pipeline pipeline = attention::preset("sage2-8b", p.head_dim);
    pipeline.accumulation = {attention::Accumulation::in_place, 0};
    pipeline.smoothing.v = true;
    const attention::PreparedOperands prepared =
        attention::prepare_operands(pipeline, in.q_values, in.k_values, in.v_values,
                                    {.causal = causal, .threads = 1, .keep_operands = false});
    const kernels::attention::Sage2HostQuantized laid = kernels::attention::lay_out_operands(p, prepared);
    const auto same_bytes = [](const auto& a, const auto& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
    };
    INFO((causal ? "causal" : "not causal"));
    kernels::attention::for_each_quantized_buffer([&](const char* name, auto, auto host, auto) {
      INFO(name);
      CHECK(same_bytes(kept.*host, laid.*host));
    });

    // Where the kernel reads them: K code (key, channel) at k_code_offset, V^T's at v_code_offset of
    // the key's position in P's A fragment order, V's mean per channel.
    const attention::detail::PreparedKv& kv = prepared.groups[0].kv;
    constexpr auto p_map = kernels::sm90::accumulator_to_a8(128);
    int position_of[32];
    for (int column = 0; column < 32; ++column) position_of[p_map.key_of_column[column]] = column;
    std::size_t misplaced = 0;
    for (int key = 0; key < p.tokens; ++key)
      for (int c = 0; c < p.head_dim; ++c) {
        misplaced += laid.k_codes[std::size_t(kernels::attention::k_code_offset(key, c, p.head_dim, 128))] !=
                     std::int8_t(kv.k.tensor.codes(key, c));
        const int position = key / 32 * 32 + position_of[key % 32];
        misplaced += laid.v_codes[std::size_t(kernels::attention::v_code_offset(c, position, p.head_dim, 128))] !=
                     std::uint8_t(kv.v.tensor.codes(key, c));
      }
    CHECK(misplaced == 0);
    REQUIRE(kv.v.mean.size() == std::size_t(p.head_dim));
    CHECK(same_bytes(laid.v_mean, kv.v.mean));

    // Operands that are not the problem's are refused: V's mean without smooth V.
    Sage2Problem plain = p;
    plain.smooth_v = false;
    CHECK_THROWS_WITH(kernels::attention::lay_out_operands(plain, prepared), Catch::Contains("V head 0"));
  }
}
