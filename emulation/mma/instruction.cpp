#include "emulation/mma/instruction.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <tuple>
#include <variant>

#include <fmt/format.h>

#include "emulation/mma/instruction_models.hpp"

namespace lowbit::mma {
namespace {

// ---------------------------------------------------------------------------------------------
// Families: one row per (arch, issue, shape, kind) with the types it takes
// ---------------------------------------------------------------------------------------------

struct NRange {
  int min = 8, max = 8, step = 8;
  bool contains(int n) const { return n >= min && n <= max && (n - min) % step == 0; }
};

struct Family {
  std::string_view arch;
  Issue issue;
  int m, k;
  NRange n;
  std::string_view kind;       // "kind::f8f6f4" etc., empty for none
  std::string_view scale_vec;  // "scale_vec::2X" etc. for block_scale, empty otherwise
  bool scale_vec_optional;     // PTX's default scale_vec may be left out of the name
  std::vector<std::string_view> d, a, b, c, s;  // allowed type names (c empty: no C type in the name)
  bool satfinite;              // the .satfinite variant exists (integer) and selects saturation
  Model model;
  ModelSource source;
};

const std::vector<std::string_view> kFp8{"e4m3", "e5m2"};
const std::vector<std::string_view> kF8f6f4{"e4m3", "e5m2", "e3m2", "e2m3", "e2m1"};
const std::vector<std::string_view> kInt8{"s8", "u8"};
const std::vector<std::string_view> kInt4{"s4", "u4"};
constexpr NRange kMmaN{8, 8, 8};
constexpr NRange kWgmmaN{8, 256, 8};
constexpr NRange kTcgen05N64{8, 256, 8};
constexpr NRange kTcgen05N128{16, 256, 16};

// Every instruction with tiles in verification/vectors/, by the arch the tiles were recorded on: its
// model's status is "verified", the other names of its family "inferred"; test_mma_vectors checks
// this list against the files. sm_90: the H200's shared files and the H100 probes' sm90/,
// sm90-targeted/, sm90-kloop/, sm90-regressions/; every arch: Khattak & Mikaitis' GPUs (external/).
const std::vector<std::string_view> kRecordedSm90{
    "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32",
    "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16",
    "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e5m2.f16",
    "mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e4m3.f16",
    "mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e5m2.f16",
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32",
    "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32",
    "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32",
    "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
    "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32",
    "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32",
    "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32",
    "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32",
    "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.u8.s32",
    "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32",
    "mma.sync.aligned.m16n8k64.row.col.s32.s4.u4.s32",
    "mma.sync.aligned.m16n8k64.row.col.s32.u4.s4.s32",
    "mma.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32",
    "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.s4.s4.s32",
    "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.u4.u4.s32",
    "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
    "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3",
    "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8",
    "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16",
    "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3",
    "wgmma.mma_async.sync.aligned.m64n16k32.s32.s8.s8",
    "wgmma.mma_async.sync.aligned.m64n24k16.f32.bf16.bf16",
    "wgmma.mma_async.sync.aligned.m64n24k16.f32.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n24k32.f32.e4m3.e4m3",
    "wgmma.mma_async.sync.aligned.m64n24k32.s32.s8.s8",
    "wgmma.mma_async.sync.aligned.m64n256k16.f16.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
    "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n256k32.f16.e4m3.e4m3",
    "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3",
    "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e5m2",
    "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e4m3",
    "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2",
    "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8",
    "wgmma.mma_async.sync.aligned.m64n256k32.satfinite.s32.s8.s8",
    "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16",
    "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3",
    "wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8",
    "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
    "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3",
    "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8",
    "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16",
    "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e4m3",
    "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e5m2",
    "wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e4m3",
    "wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e5m2",
    "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3",
    "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2",
    "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e4m3",
    "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2",
    "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8",
    "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.u8",
    "wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.s8",
    "wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.u8",
    "wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.s8.s8",
    "wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.u8.u8",
};

const std::vector<std::string_view> kRecordedAmpere{  // A100 (sm_80), A2 (sm_86)
    "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32"};
const std::vector<std::string_view> kRecordedAda{  // Ada and L40S (sm_89)
    "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",  "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",  "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16",
    "mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e5m2.f16", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
    "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32", "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32"};
const std::vector<std::string_view> kRecordedBlackwell{  // B200 (sm_100)
    "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",  "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",  "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16",
    "mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e5m2.f16", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
    "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32", "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32"};
const std::vector<std::string_view> kRecordedVolta{  // V100 (sm_70)
    "mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16", "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"};

// The recorded names on arch.
const std::vector<std::string_view>& recorded_names(std::string_view arch) {
  static const std::vector<std::string_view> none;
  if (arch == "sm_90") return kRecordedSm90;
  if (arch == "sm_80" || arch == "sm_86") return kRecordedAmpere;
  if (arch == "sm_89") return kRecordedAda;
  if (arch == "sm_100") return kRecordedBlackwell;
  if (arch == "sm_70") return kRecordedVolta;
  return none;
}

bool is_recorded(std::string_view arch, std::string_view name) {
  const auto& names = recorded_names(arch);
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<Family> build_families() {
  std::vector<Family> f;
  const auto add_f16_family = [&](std::string_view arch, int chunk, int fraction, int zero, int zero_f16_out,
                                  const ModelSource& f32_source, const ModelSource& f16_source) {
    f.push_back({arch, Issue::mma_sync, 16, 16, kMmaN, "", "", false, {"f32"}, {"f16"}, {"f16"}, {"f32"}, {}, false,
                 fused(chunk, fraction, OutputRounding::rz_fp32, zero), f32_source});
    f.push_back({arch, Issue::mma_sync, 16, 16, kMmaN, "", "", false, {"f32"}, {"bf16"}, {"bf16"}, {"f32"}, {}, false,
                 fused(chunk, fraction, OutputRounding::rz_fp32, zero), f32_source});
    f.push_back({arch, Issue::mma_sync, 16, 16, kMmaN, "", "", false, {"f16"}, {"f16"}, {"f16"}, {"f16"}, {}, false,
                 fused(chunk, fraction, OutputRounding::rne_fp16, zero_f16_out), f16_source});
  };
  const auto add_integer_families = [&](std::string_view arch, const ModelSource& source) {
    for (bool sat : {false, true}) {
      f.push_back({arch, Issue::mma_sync, 16, 32, kMmaN, "", "", false, {"s32"}, kInt8, kInt8, {"s32"}, {}, sat,
                   integer(sat), source});
      f.push_back({arch, Issue::mma_sync, 16, 64, kMmaN, "", "", false, {"s32"}, kInt4, kInt4, {"s32"}, {}, sat,
                   integer(sat), source});
    }
  };

  // sm_90 (Hopper)
  add_f16_family("sm_90", 16, 25, kHopperZeroExponent, kHopperF16AccumulatorZeroExponent, kHopperF16, kHopperF16Out);
  f.push_back({"sm_90", Issue::mma_sync, 16, 32, kMmaN, "", "", false, {"f32"}, kFp8, kFp8, {"f32"}, {}, false,
               hopper_fp8_mma_sync(OutputRounding::rz_fp32), kHopperFp8Sync});
  f.push_back({"sm_90", Issue::mma_sync, 16, 32, kMmaN, "", "", false, {"f16"}, kFp8, kFp8, {"f16"}, {}, false,
               hopper_fp8_mma_sync(OutputRounding::rne_fp16), kHopperFp8SyncF16});
  add_integer_families("sm_90", kHopperInteger);
  for (std::string_view t : {"f16", "bf16"})
    f.push_back({"sm_90", Issue::wgmma, 64, 16, kWgmmaN, "", "", false, {"f32"}, {t}, {t}, {}, {}, false,
                 fused(16, 25, OutputRounding::rz_fp32, kHopperZeroExponent), kHopperF16});
  f.push_back({"sm_90", Issue::wgmma, 64, 16, kWgmmaN, "", "", false, {"f16"}, {"f16"}, {"f16"}, {}, {}, false,
               fused(16, 25, OutputRounding::rne_fp16, kHopperF16AccumulatorZeroExponent), kHopperF16Out});
  f.push_back({"sm_90", Issue::wgmma, 64, 32, kWgmmaN, "", "", false, {"f32"}, kFp8, kFp8, {}, {}, false,
               fused(32, 13, OutputRounding::rz_e8m13, kHopperZeroExponent), kHopperFp8Wgmma});
  f.push_back({"sm_90", Issue::wgmma, 64, 32, kWgmmaN, "", "", false, {"f16"}, kFp8, kFp8, {}, {}, false,
               fused(32, 13, OutputRounding::rne_fp16, kHopperZeroExponent), kHopperFp8WgmmaF16});
  for (bool sat : {false, true})
    f.push_back({"sm_90", Issue::wgmma, 64, 32, kWgmmaN, "", "", false, {"s32"}, kInt8, kInt8, {}, {}, sat,
                 integer(sat), kHopperInteger});

  // tf32: mma.sync m16n8k4 (L = its k) and m16n8k8, C aligned, RZ fp32.
  const auto add_tf32_families = [&](std::string_view arch, int k8_chunk, int fraction, int zero,
                                     const ModelSource& k4_source, const ModelSource& k8_source) {
    for (auto [k, chunk, source] : {std::tuple{4, 4, &k4_source}, std::tuple{8, k8_chunk, &k8_source}})
      f.push_back({arch, Issue::mma_sync, 16, k, kMmaN, "", "", false, {"f32"}, {"tf32"}, {"tf32"}, {"f32"}, {}, false,
                   fused(chunk, fraction, OutputRounding::rz_fp32, zero), *source});
  };
  add_tf32_families("sm_90", 8, 25, kHopperZeroExponent, kHopperTf32, kHopperTf32K8);

  // sm_100 (Blackwell) mma.sync: f16/bf16 as Hopper's HMMA, FP8 through it as on Hopper.
  add_f16_family("sm_100", 16, 25, -133, kHopperF16AccumulatorZeroExponent, kBlackwellF16, kBlackwellF16Out);
  f.push_back({"sm_100", Issue::mma_sync, 16, 32, kMmaN, "", "", false, {"f32"}, kFp8, kFp8, {"f32"}, {}, false,
               hopper_fp8_mma_sync(OutputRounding::rz_fp32), kBlackwellFp8Sync});
  f.push_back({"sm_100", Issue::mma_sync, 16, 32, kMmaN, "", "", false, {"f16"}, kFp8, kFp8, {"f16"}, {}, false,
               hopper_fp8_mma_sync(OutputRounding::rne_fp16), kBlackwellFp8Sync});
  add_tf32_families("sm_100", 8, 25, -133, kHopperTf32, kHopperTf32K8);

  // sm_89 (Ada), sm_86 and sm_80 (Ampere)
  f.push_back({"sm_89", Issue::mma_sync, 16, 32, kMmaN, "", "", false, {"f32"}, kFp8, kFp8, {"f32"}, {}, false,
               fused(16, 13, OutputRounding::rz_e8m13, -132), kAdaFp8});
  f.push_back({"sm_89", Issue::mma_sync, 16, 32, kMmaN, "", "", false, {"f16"}, kFp8, kFp8, {"f16"}, {}, false,
               fused(16, 13, OutputRounding::rne_fp16, -132), kAdaFp8F16});
  for (std::string_view arch : {"sm_89", "sm_86", "sm_80"}) {
    add_f16_family(arch, 8, 24, -132, -132, kAmpereF16, kAmpereF16Out);
    add_tf32_families(arch, 4, 24, -132, kAmpereTf32, kAmpereTf32);
    add_integer_families(arch, kExactInteger);
  }

  // sm_70 (Volta): mma.sync m8n8k4 f16 -> f32, f16.
  f.push_back({"sm_70", Issue::mma_sync, 8, 4, kMmaN, "", "", false, {"f32"}, {"f16"}, {"f16"}, {"f32"}, {}, false,
               fused(4, 23, OutputRounding::rz_fp32, -132), kVoltaF16});
  f.push_back({"sm_70", Issue::mma_sync, 8, 4, kMmaN, "", "", false, {"f16"}, {"f16"}, {"f16"}, {"f16"}, {}, false,
               fused(4, 23, OutputRounding::rne_fp16, -132), kVoltaF16Out});

  // sm_120 (mma.sync) and sm_100 (tcgen05): f8f6f4, MXF8F6F4, MXF4, NVFP4
  const Model mxf8 = block_scaled(ScaleMode::per_product, 32, 25, -133, 0);
  const Model mxf4 = block_scaled(ScaleMode::per_group, 64, 35, -139, 16);
  f.push_back({"sm_120", Issue::mma_sync, 16, 32, kMmaN, "kind::f8f6f4", "", false, {"f32"}, kF8f6f4, kF8f6f4, {"f32"}, {},
               false, fused(32, 25, OutputRounding::rz_fp32, -133), kBlackwellF8f6f4});
  f.push_back({"sm_120", Issue::mma_sync, 16, 32, kMmaN, "kind::mxf8f6f4", "scale_vec::1X", true, {"f32"}, kF8f6f4,
               kF8f6f4, {"f32"}, {"ue8m0"}, false, mxf8, kBlackwellMxf8});
  f.push_back({"sm_120", Issue::mma_sync, 16, 64, kMmaN, "kind::mxf4", "scale_vec::2X", true, {"f32"}, {"e2m1"}, {"e2m1"},
               {"f32"}, {"ue8m0"}, false, mxf4, kBlackwellMxf4});
  f.push_back({"sm_120", Issue::mma_sync, 16, 64, kMmaN, "kind::mxf4nvf4", "scale_vec::2X", false, {"f32"}, {"e2m1"},
               {"e2m1"}, {"f32"}, {"ue8m0"}, false, mxf4, kBlackwellMxf4});
  f.push_back({"sm_120", Issue::mma_sync, 16, 64, kMmaN, "kind::mxf4nvf4", "scale_vec::4X", false, {"f32"}, {"e2m1"},
               {"e2m1"}, {"f32"}, {"ue4m3"}, false, mxf4, kBlackwellMxf4});
  for (auto [m, n] : {std::pair{64, kTcgen05N64}, std::pair{128, kTcgen05N128}}) {
    f.push_back({"sm_100", Issue::tcgen05, m, 32, n, "kind::f8f6f4", "", false, {"f32"}, kF8f6f4, kF8f6f4, {}, {}, false,
                 fused(32, 25, OutputRounding::rz_fp32, -133), kBlackwellF8f6f4});
    f.push_back({"sm_100", Issue::tcgen05, m, 32, n, "kind::mxf8f6f4", "scale_vec::1X", true, {"f32"}, kF8f6f4, kF8f6f4,
                 {}, {"ue8m0"}, false, mxf8, kBlackwellMxf8});
    f.push_back({"sm_100", Issue::tcgen05, m, 64, n, "kind::mxf4", "scale_vec::2X", true, {"f32"}, {"e2m1"}, {"e2m1"},
                 {}, {"ue8m0"}, false, mxf4, kBlackwellMxf4});
    f.push_back({"sm_100", Issue::tcgen05, m, 64, n, "kind::mxf4nvf4", "scale_vec::2X", false, {"f32"}, {"e2m1"},
                 {"e2m1"}, {}, {"ue8m0"}, false, mxf4, kBlackwellMxf4});
    f.push_back({"sm_100", Issue::tcgen05, m, 64, n, "kind::mxf4nvf4", "scale_vec::4X", false, {"f32"}, {"e2m1"},
                 {"e2m1"}, {}, {"ue4m3"}, false, mxf4, kBlackwellMxf4});
  }
  // Hopper writes +0 for every zero result (measured); the published models keep MMA-Sim's rule.
  for (auto& family : f)
    if (family.arch == "sm_90") family.model.fused.rounded_zero_keeps_sign = false;
  return f;
}

const std::vector<Family>& families() {
  static const std::vector<Family> table = build_families();
  return table;
}

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

std::optional<Format> type_format(std::string_view t) {
  for (const auto& type : ptx_types())
    if (type.name == t) return type.format;
  return std::nullopt;
}

std::string shape_text(int m, int n, int k) { return fmt::format("m{}n{}k{}", m, n, k); }

struct ParsedName {
  Issue issue = Issue::mma_sync;
  int m = 0, n = 0, k = 0;
  std::string kind, scale_vec;
  bool block_scale = false, satfinite = false;
  std::vector<std::string> types;
};

std::optional<std::array<int, 3>> parse_shape(std::string_view t) {
  std::array<int, 3> v{};
  std::size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    if (pos >= t.size() || t[pos] != "mnk"[i]) return std::nullopt;
    ++pos;
    auto [ptr, ec] = std::from_chars(t.data() + pos, t.data() + t.size(), v[i]);
    if (ec != std::errc{} || v[i] <= 0) return std::nullopt;
    pos = std::size_t(ptr - t.data());
  }
  if (pos != t.size()) return std::nullopt;
  return v;
}

std::vector<std::string_view> split_dots(std::string_view s) {
  std::vector<std::string_view> out;
  for (std::size_t start = 0;;) {
    const auto dot = s.find('.', start);
    out.push_back(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return out;
    start = dot + 1;
  }
}

// Reads the name's parts; the error says which token is not understood.
std::variant<ParsedName, std::string> parse_name(std::string_view name) {
  ParsedName p;
  const auto tokens = split_dots(name);
  std::size_t i = 0;
  const auto expect = [&](std::initializer_list<std::string_view> words) {
    for (auto w : words)
      if (i >= tokens.size() || tokens[i++] != w) return false;
    return true;
  };
  if (name.starts_with("mma.")) {
    p.issue = Issue::mma_sync;
    if (!expect({"mma", "sync", "aligned"})) return std::string("expected the prefix mma.sync.aligned");
  } else if (name.starts_with("wgmma.")) {
    p.issue = Issue::wgmma;
    if (!expect({"wgmma", "mma_async", "sync", "aligned"})) return std::string("expected the prefix wgmma.mma_async.sync.aligned");
  } else if (name.starts_with("tcgen05.")) {
    p.issue = Issue::tcgen05;
    if (!expect({"tcgen05", "mma", "cta_group::1"})) return std::string("expected the prefix tcgen05.mma.cta_group::1");
  } else {
    return std::string("not an mma.sync, wgmma.mma_async or tcgen05.mma instruction");
  }
  for (; i < tokens.size(); ++i) {
    const std::string_view t = tokens[i];
    if (auto shape = parse_shape(t)) {
      if (p.m) return fmt::format("two shapes ('{}')", t);
      std::tie(p.m, p.n, p.k) = std::tuple{(*shape)[0], (*shape)[1], (*shape)[2]};
    } else if (t == "row" || t == "col") {
      continue;
    } else if (t == "satfinite") {
      p.satfinite = true;
    } else if (t == "block_scale") {
      p.block_scale = true;
    } else if (t.starts_with("kind::")) {
      p.kind = t;
    } else if (t.starts_with("scale_vec::")) {
      p.scale_vec = t;
    } else if (type_format(t)) {
      p.types.emplace_back(t);
    } else {
      return fmt::format("token '{}' is not a shape, qualifier or type", t);
    }
  }
  if (!p.m) return std::string("no shape (mMnNkK) in the name");
  return p;
}

// The name as PTX spells it (atom.hpp's spell_name); types may be alternatives such as "{e4m3|e5m2}".
std::string canonical_name(const ParsedName& p, std::string_view scale_vec) {
  const std::string vec(scale_vec);
  NameParts parts{p.issue, p.m, p.n, p.k, p.kind.c_str(), p.block_scale, vec.c_str(), p.satfinite};
  for (std::size_t i = 0; i < p.types.size() && i < std::size(parts.types); ++i) parts.types[i] = p.types[i].c_str();
  std::string s;
  spell_name(s, parts);
  return s;
}

ParsedName family_name(const Family& f, int n, std::vector<std::string> types) {
  ParsedName p;
  p.issue = f.issue;
  p.m = f.m;
  p.n = n;
  p.k = f.k;
  p.kind = f.kind;
  p.block_scale = !f.scale_vec.empty();
  p.satfinite = f.satfinite;
  p.types = std::move(types);
  return p;
}

std::string normalise_arch(std::string_view arch) {
  std::string a(arch);
  if (a.size() > 3 && (a.back() == 'a' || a.back() == 'f')) a.pop_back();
  return a;
}

bool allowed(const std::vector<std::string_view>& v, const std::string& t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

// Does family f take the parsed name? If so, the scale_vec its canonical name carries.
std::optional<std::string_view> match(const Family& f, const ParsedName& p) {
  if (f.issue != p.issue || f.m != p.m || f.k != p.k || !f.n.contains(p.n) || f.kind != p.kind) return std::nullopt;
  if (f.satfinite != p.satfinite) return std::nullopt;
  if (p.block_scale != !f.scale_vec.empty()) return std::nullopt;
  if (!p.scale_vec.empty() ? p.scale_vec != f.scale_vec : (p.block_scale && !f.scale_vec_optional)) return std::nullopt;
  std::vector<const std::vector<std::string_view>*> slots{&f.d, &f.a, &f.b};
  if (!f.c.empty()) slots.push_back(&f.c);
  if (!f.s.empty()) slots.push_back(&f.s);
  if (p.types.size() != slots.size()) return std::nullopt;
  for (std::size_t i = 0; i < slots.size(); ++i)
    if (!allowed(*slots[i], p.types[i])) return std::nullopt;
  return p.scale_vec.empty() ? std::string_view{} : f.scale_vec;
}

// Concrete names of a family: every type combination at every legal N.
std::size_t name_count(const Family& f) {
  std::size_t count = std::size_t((f.n.max - f.n.min) / f.n.step + 1);
  for (const auto* slot : {&f.d, &f.a, &f.b, &f.c, &f.s})
    if (!slot->empty()) count *= slot->size();
  return count;
}

// A family is verified only in its recorded names; the others share the model (inferred).
std::string status_text(const Family& f) {
  const auto& names = recorded_names(f.arch);
  const std::size_t recorded = std::count_if(names.begin(), names.end(), [&](std::string_view name) {
    const auto parsed = parse_name(name);
    return std::holds_alternative<ParsedName>(parsed) && match(f, std::get<ParsedName>(parsed));
  });
  if (f.source.status != Verification::verified || recorded == name_count(f)) return std::string(to_string(f.source.status));
  if (recorded == 0) return std::string(to_string(Verification::inferred));
  return fmt::format("verified: {} of {} names recorded, the rest inferred", recorded, name_count(f));
}

std::string family_pattern(const Family& f) {
  const auto alternatives = [](const std::vector<std::string_view>& v) {
    if (v.size() == 1) return std::string(v[0]);
    std::string s = "{";
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) s += '|';
      s += v[i];
    }
    return s + "}";
  };
  std::vector<std::string> types;
  for (const auto* v : {&f.d, &f.a, &f.b, &f.c, &f.s})
    if (!v->empty()) types.push_back(alternatives(*v));
  std::string name = canonical_name(family_name(f, f.n.min, types), f.scale_vec);
  std::string range;
  if (f.n.max != f.n.min) {
    const std::string shape = shape_text(f.m, f.n.min, f.k);
    name.replace(name.find(shape), shape.size(), fmt::format("m{}nNk{}", f.m, f.k));
    range = fmt::format("  (N = {}..{} step {})", f.n.min, f.n.max, f.n.step);
  }
  if (f.scale_vec_optional) range += fmt::format("  (.{} may be left out)", f.scale_vec);
  return fmt::format("{:<7}{}{}  [{}]", f.arch, name, range, status_text(f));
}

[[noreturn]] void unknown(std::string_view arch, std::string_view name, const std::string& why) {
  std::string message = fmt::format("instruction '{}' on {} is not modeled: {}.\nModeled instructions:", name, arch, why);
  for (const auto& line : modeled_instructions()) message += "\n  " + line;
  throw UnknownInstruction(message);
}

}  // namespace

std::optional<std::string> FusedDotAdd::validate(int k) const {
  if (chunk < 1 || k % chunk != 0) return fmt::format("chunk L={} does not divide k={}", chunk, k);
  if (interleave < 0 || (interleave > 0 && chunk % interleave != 0))
    return fmt::format("interleave {} must be 0 or divide the chunk {}", interleave, chunk);
  if (fraction_bits < 1 || fraction_bits > 40) return fmt::format("F={} is outside 1..40", fraction_bits);
  if (scale_mode == ScaleMode::per_group && (group < 1 || chunk % group != 0))
    return fmt::format("group {} must divide the chunk {}", group, chunk);
  if (unpack_to && (unpack_to->is_integer() || unpack_to->code_bits() > 16))
    return fmt::format("operands unpack to {}: a floating format of at most 16 bits", format_name(*unpack_to));
  if (unpack_to && scale_mode == ScaleMode::per_group)
    return std::string("per-group scaling sums in the operands' own formats; it cannot unpack them");
  return std::nullopt;
}

std::string_view to_string(Verification v) {
  switch (v) {
    case Verification::verified: return "verified";
    case Verification::reported: return "reported";
    case Verification::inferred: return "inferred";
    case Verification::published: return "published";
  }
  return "?";
}

std::string_view to_string(Issue i) {
  switch (i) {
    case Issue::mma_sync: return "mma.sync";
    case Issue::wgmma: return "wgmma";
    case Issue::tcgen05: return "tcgen05";
  }
  return "?";
}

std::vector<std::string> modeled_instructions() {
  std::vector<std::string> lines;
  for (const auto& f : families()) lines.push_back(family_pattern(f));
  return lines;
}

std::vector<InstructionName> instruction_names() {
  std::vector<InstructionName> names;
  for (const auto& f : families()) {
    std::vector<std::vector<std::string>> combinations{{}};
    for (const auto* slot : {&f.d, &f.a, &f.b, &f.c, &f.s}) {
      if (slot->empty()) continue;
      std::vector<std::vector<std::string>> next;
      for (const auto& prefix : combinations)
        for (auto t : *slot) {
          next.push_back(prefix);
          next.back().emplace_back(t);
        }
      combinations = std::move(next);
    }
    for (const auto& types : combinations) {
      names.push_back({std::string(f.arch), canonical_name(family_name(f, f.n.min, types), f.scale_vec)});
      if (f.n.max != f.n.min)
        names.push_back({std::string(f.arch), canonical_name(family_name(f, f.n.max, types), f.scale_vec)});
    }
  }
  return names;
}

Instruction find_instruction(std::string_view arch_name, std::string_view name) {
  const std::string arch = normalise_arch(arch_name);
  auto parsed = parse_name(name);
  if (auto* why = std::get_if<std::string>(&parsed)) unknown(arch_name, name, *why);
  const auto& p = std::get<ParsedName>(parsed);
  bool other_arch = false;
  for (const auto& f : families()) {
    const auto scale_vec = match(f, p);
    if (!scale_vec) continue;
    if (f.arch != arch) {
      other_arch = true;
      continue;
    }
    AtomSpec spec{f.issue, p.m, p.n, p.k, *type_format(p.types[0]), *type_format(p.types[1]), *type_format(p.types[2])};
    if (!f.c.empty()) spec.c = *type_format(p.types[3]);
    spec.kind = f.kind.data();  // a literal: nul-terminated
    if (!f.s.empty()) {
      // scale_vec::NX: N scale factors per row of A (per column of B) for the instruction's k.
      spec.scale_vec = f.scale_vec[f.scale_vec.size() - 2] - '0';
      spec.scale = *type_format(p.types.back());
      spec.scale_vec_in_name = !scale_vec->empty();
    }
    spec.satfinite = p.satfinite;
    Instruction in;
    in.arch = arch;
    in.atom = make_atom(spec);
    if (in.atom.name.overflowed || in.atom.name.view() != name)
      unknown(arch_name, name, "its parts are modeled, but PTX spells it '" + canonical_name(p, *scale_vec) + "'");
    in.model = f.model;
    in.source = f.source;
    if (f.source.status == Verification::verified && !is_recorded(f.arch, name)) in.source.status = Verification::inferred;
    return in;
  }
  unknown(arch_name, name,
          other_arch ? "it is modeled on another architecture only" : "no modeled family has this shape and these types");
}

}  // namespace lowbit::mma
