// check_sage2_gpu: the sage2-8b kernels on the GPU against the emulated sage2-8b pipeline, every bit.
//
// For each configuration (head dim, causal, tokens, heads, batch, dtype, layout, data): inputs
// drawn on the host (numerics/synthetic), the GPU's quantization and attention through the host
// API, the emulator's (attention::forward with the preset sage2-8b, laid out as the kernels' buffers
// by sage2_emulated.hpp) on the same codes; compared element by element: output
// codes, LSE bits, and every quantized buffer (Q/K/V codes, scales, K mean). Writes summary.json
// (one entry per configuration) with provenance, and, for configurations that differ, their
// inputs as .npy. Exit 0: all equal; 1: mismatches; 77: no GPU.
//
// --configs bench: the configurations of bench_attention (batch 4, 32 heads, N = 1K .. 32K, d 64
// and 128, causal and not) on its very inputs (made on the GPU from the same seeds); the output
// and LSE rows of head (0, 0) in four Q blocks against the emulator (non-causal: the first, the last
// and two between; causal: the first four, a prefix, as the causal mask needs absolute indices).
// --configs quick also runs that path at N = 200 with Q, K and V one element past a 16-byte
// boundary (the kernels' 2-byte and 4-byte fallbacks for the statistics and the staging).
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulation/convert.hpp"
#include "experiments/bench/bench_attention_inputs.hpp"
#include "kernels/attention/sage2_attention.hpp"
#include "kernels/device.hpp"
#include "numerics/npy.hpp"
#include "numerics/provenance.hpp"
#include "numerics/synthetic.hpp"
#include "verification/bit_compare.hpp"
#include "verification/sage2_emulated.hpp"

namespace {

using lowbit::kernels::attention::DType;
using lowbit::kernels::attention::Layout;
using lowbit::kernels::attention::Sage2Problem;

struct Config {
  Sage2Problem problem;
  std::string data = "synthetic";  // synthetic | outliers | tiny | real:<path prefix of the q/k/v .npy files>
  std::uint64_t seed = 1;
  bool export_accuracy = false;  // write inputs and output as .npy for the SDPA comparison
};

std::string dtype_name(DType t) { return t == DType::fp16 ? "fp16" : "bf16"; }
std::string layout_name(Layout l) { return l == Layout::bhnd ? "bhnd" : "bnhd"; }
std::string row_sum_name(lowbit::attention::steps::RowSum r) { return r == lowbit::attention::steps::RowSum::pv ? "pv" : "lanes"; }

// "synthetic", "outliers", "tiny", or "real-<file prefix>" for captured activations.
std::string data_label(const Config& c) {
  if (c.data.rfind("real:", 0) != 0) return c.data;
  std::string prefix = c.data.substr(c.data.find_last_of('/') + 1);
  if (!prefix.empty() && prefix.back() == '_') prefix.pop_back();
  return "real-" + prefix;
}

std::string config_name(const Config& c) {
  const Sage2Problem& p = c.problem;
  return fmt::format("d{}{}-n{}-b{}-hq{}-hkv{}-{}-{}-{}", p.head_dim, p.causal ? "-causal" : "", p.tokens, p.batch, p.heads_q,
                     p.heads_kv, dtype_name(p.dtype), layout_name(p.layout), data_label(c));
}

Config make(int d, bool causal, int n, int batch, int hq, int hkv, DType dtype, Layout layout, std::string data,
            std::uint64_t seed) {
  Config c;
  c.problem.head_dim = d;
  c.problem.causal = causal;
  c.problem.tokens = n;
  c.problem.batch = batch;
  c.problem.heads_q = hq;
  c.problem.heads_kv = hkv;
  c.problem.dtype = dtype;
  c.problem.layout = layout;
  c.data = std::move(data);
  c.seed = seed;
  return c;
}

// quick: every feature at small sizes (the ctest). full: N from 1 to 16K, ragged lengths, GQA,
// both dtypes and layouts, both data kinds.
std::vector<Config> configs(const std::string& set) {
  std::vector<Config> all;
  std::uint64_t seed = 1;
  if (set == "quick") {
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (int n : {1, 200, 384}) all.push_back(make(d, causal, n, 2, 4, 2, DType::fp16, Layout::bhnd, "synthetic", seed++));
    all.push_back(make(128, true, 300, 1, 2, 1, DType::bf16, Layout::bnhd, "outliers", seed++));
    all.push_back(make(128, false, 256, 1, 2, 2, DType::bf16, Layout::bhnd, "tiny", seed++));
    all.push_back(make(64, true, 200, 1, 2, 1, DType::bf16, Layout::bnhd, "tiny", seed++));
    return all;
  }
  if (set != "full") throw std::invalid_argument("--configs must be quick, full or bench, not '" + set + "'");
  const int lengths[] = {1, 17, 127, 128, 129, 255, 1000, 2048, 4099};
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      int i = 0;
      for (int n : lengths) {
        const DType dtype = i % 2 ? DType::bf16 : DType::fp16;
        const Layout layout = i % 3 == 2 ? Layout::bnhd : Layout::bhnd;
        const int hq = i % 3 == 0 ? 4 : 2, hkv = i % 3 == 0 ? 1 : 2;  // GQA 4:1, and 2:2
        all.push_back(make(d, causal, n, n <= 1000 ? 2 : 1, hq, hkv, dtype, layout, i % 2 ? "outliers" : "synthetic", seed++));
        ++i;
      }
      all.push_back(make(d, causal, 1000, 2, 2, 2, DType::bf16, Layout::bhnd, "tiny", seed++));
      Config big = make(d, causal, 16384, 1, 2, 1, DType::fp16, Layout::bhnd, "synthetic", seed++);
      all.push_back(big);
      Config loud = make(d, causal, 8192 + 77, 1, 2, 2, DType::bf16, Layout::bhnd, "outliers", seed++);
      loud.export_accuracy = false;
      all.push_back(loud);
    }
  for (auto& c : all)  // the SDPA accuracy comparison: 4K tokens, both head dims, causal and not
    c.export_accuracy = c.problem.tokens == 4099;
  // Cheapest first: a run cut short by a time limit has checked the most configurations.
  const auto cost = [](const Config& c) {
    const Sage2Problem& p = c.problem;
    return double(p.tokens) * p.tokens * p.heads_q * p.batch * p.head_dim / (p.causal ? 2 : 1);
  };
  std::stable_sort(all.begin(), all.end(), [&](const Config& a, const Config& b) { return cost(a) < cost(b); });
  return all;
}

struct Inputs {
  std::vector<std::uint16_t> q, k, v;
};

// Captured activations (experiments/data of branch real-data): <prefix>q.npy, k.npy, v.npy, each
// [1, heads, tokens, d] float16, read exactly.
std::vector<Config> real_configs(const std::string& dir) {
  std::vector<Config> all;
  for (const char* layer : {"layer00", "layer10", "layer20", "layer29"}) {
    const std::string prefix = dir + "/" + layer + "_";
    const lowbit::NpyArray q = lowbit::read_npy(prefix + "q.npy"), k = lowbit::read_npy(prefix + "k.npy");
    if (q.shape.size() != 4 || k.shape.size() != 4 || q.shape[0] != 1 || k.shape[0] != 1)
      throw std::invalid_argument(prefix + "q.npy / k.npy: expected [1, heads, tokens, d]");
    for (bool causal : {true, false}) {
      Config c = make(int(q.shape[3]), causal, int(q.shape[2]), 1, int(q.shape[1]), int(k.shape[1]), DType::fp16,
                      Layout::bhnd, "real:" + prefix, 0);
      c.export_accuracy = causal;  // the model's own mask
      all.push_back(c);
    }
  }
  return all;
}

Inputs make_inputs(const Config& c) {
  const Sage2Problem& p = c.problem;
  const lowbit::Format& f = p.dtype == DType::fp16 ? lowbit::formats::fp16 : lowbit::formats::bf16;
  Inputs in;
  in.q.resize(p.elements(p.heads_q));
  in.k.resize(p.elements(p.heads_kv));
  in.v.resize(p.elements(p.heads_kv));
  if (c.data.rfind("real:", 0) == 0) {
    const std::string prefix = c.data.substr(5);
    for (auto [dst, name] : {std::pair{&in.q, "q"}, std::pair{&in.k, "k"}, std::pair{&in.v, "v"}}) {
      const lowbit::NpyArray a = lowbit::read_npy(prefix + name + ".npy");
      if (a.dtype != "<f2" || a.data.size() != dst->size())
        throw std::invalid_argument(prefix + name + ".npy: expected float16 of " + std::to_string(dst->size()) + " values");
      for (std::size_t i = 0; i < a.data.size(); ++i) (*dst)[i] = std::uint16_t(lowbit::encode(f, a.data[i]));  // exact
    }
    return in;
  }
  for (int b = 0; b < p.batch; ++b) {
    lowbit::SyntheticAttentionSpec spec;
    spec.heads = std::max(p.heads_q, p.heads_kv);
    spec.tokens = p.tokens;
    spec.dim = p.head_dim;
    spec.seed = c.seed * 1000 + std::uint64_t(b);
    if (c.data == "outliers") {  // larger scores and rarer, bigger outliers: saturating P, deep exp2 ranges
      spec.outlier_bias = 40;
      spec.outlier_token_scale = 30;
      spec.outlier_token_fraction = 0.01;
      spec.q_gain = 3;
    }
    lowbit::AttentionData data = lowbit::make_synthetic_attention(spec);
    if (c.data == "tiny") {  // head 0 near bf16's smallest normals: its Q and K groups, and 8 of its
                             // V channels, get subnormal fp32 scales (the codes divide there)
      data.q[0] *= 0x1p-124f;
      data.k[0] *= 0x1p-124f;
      data.v[0].leftCols(8) *= 0x1p-126f;
    }
    const auto put = [&](std::vector<std::uint16_t>& dst, const lowbit::MatrixF& m, int h, int heads) {
      for (int t = 0; t < p.tokens; ++t) {
        std::vector<lowbit::Code> codes(std::size_t(p.head_dim));
        lowbit::encode(f, std::span<const float>(m.row(t).data(), std::size_t(p.head_dim)), codes);
        const std::size_t at = p.element_offset(b, h, t, heads);
        for (int c2 = 0; c2 < p.head_dim; ++c2) dst[at + std::size_t(c2)] = std::uint16_t(codes[std::size_t(c2)]);
      }
    };
    for (int h = 0; h < p.heads_q; ++h) put(in.q, data.q[std::size_t(h)], h, p.heads_q);
    for (int h = 0; h < p.heads_kv; ++h) {
      put(in.k, data.k[std::size_t(h)], h, p.heads_kv);
      put(in.v, data.v[std::size_t(h)], h, p.heads_kv);
    }
  }
  return in;
}

using lowbit::verification::bits;
using lowbit::verification::BitComparison;
using lowbit::verification::compare_bits;

// A comparison's first differences, and the comparison, as summary.json records them.
nlohmann::ordered_json first_json(const BitComparison& c) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const auto& d : c.first) j.push_back({{"index", d.index}, {"gpu", d.kernel}, {"emulated", d.emulated}});
  return j;
}

nlohmann::ordered_json to_json(const BitComparison& c) {
  nlohmann::ordered_json j{{"compared", c.compared}, {"mismatches", c.mismatches}};
  if (c.mismatches) j["first"] = first_json(c);
  return j;
}

std::uint64_t fnv1a(const void* data, std::size_t bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::string hex64(std::uint64_t v) {
  char s[24];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

// [batch, heads, tokens, dim] float32 (whatever the problem's layout).
std::vector<float> as_bhnd(const Sage2Problem& p, const std::vector<std::uint16_t>& x, int heads) {
  const lowbit::Format& f = p.dtype == DType::fp16 ? lowbit::formats::fp16 : lowbit::formats::bf16;
  std::vector<float> out(x.size());
  std::size_t i = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int t = 0; t < p.tokens; ++t)
        for (int c = 0; c < p.head_dim; ++c)
          out[i++] = float(lowbit::decode(f, x[p.element_offset(b, h, t, heads) + std::size_t(c)]));
  return out;
}

void write_tensor(const std::filesystem::path& path, const Sage2Problem& p, const std::vector<std::uint16_t>& x, int heads) {
  lowbit::write_npy(path.string(), {std::size_t(p.batch), std::size_t(heads), std::size_t(p.tokens), std::size_t(p.head_dim)},
                    as_bhnd(p, x, heads));
}

// One bench_attention configuration, checked on head (0, 0) in four Q blocks. misaligned: Q, K and V
// start one element past a 16-byte boundary (the API asks for 2 bytes) and the output 4 bytes past
// one (the API asks for 4), so the kernels take their paths for tensors their wide loads and
// stores cannot reach.
nlohmann::ordered_json check_bench_config(int d, bool causal, int n, lowbit::attention::steps::Exp2Unit exp2,
                                          lowbit::kernels::attention::Sage2Schedule schedule,
                                          lowbit::attention::steps::RowSum row_sum, std::uint64_t& total_mismatches,
                                          bool misaligned = false) {
  using lowbit::kernels::check_cuda;
  Sage2Problem p;
  p.exp2 = exp2;
  p.schedule = schedule;
  p.row_sum = row_sum;
  p.batch = 4;
  p.heads_q = p.heads_kv = 32;
  p.tokens = n;
  p.head_dim = d;
  p.causal = causal;
  const std::size_t count = p.elements(p.heads_q), head = std::size_t(n) * std::size_t(d);
  void *q_alloc = nullptr, *k_alloc = nullptr, *v_alloc = nullptr, *out_alloc = nullptr;
  float* lse = nullptr;
  for (void** b : {&q_alloc, &k_alloc, &v_alloc, &out_alloc}) check_cuda(cudaMalloc(b, count * 2 + 4), "cudaMalloc (bench check)");
  check_cuda(cudaMalloc(&lse, std::size_t(p.batch) * p.heads_q * std::size_t(n) * 4), "cudaMalloc (bench check)");
  const std::size_t shift = misaligned ? 2 : 0;  // bytes past cudaMalloc's 256-byte alignment
  void* q = static_cast<char*>(q_alloc) + shift;
  void* k = static_cast<char*>(k_alloc) + shift;
  void* v = static_cast<char*>(v_alloc) + shift;
  const std::size_t out_shift = misaligned ? 4 : 0;
  void* out = static_cast<char*>(out_alloc) + out_shift;
  std::vector<std::uint16_t> hq(head), hk(head), hv(head), hout(head);
  std::vector<float> hlse(static_cast<std::size_t>(n));
  {
    lowbit::kernels::attention::Sage2Workspace workspace(p);
    lowbit::bench::fill_attention_inputs(p, q, k, v);
    lowbit::kernels::attention::sage2_attention(p, q, k, v, workspace, out, lse);
    check_cuda(cudaDeviceSynchronize(), "sage2 attention (bench check)");
    // Head (0, 0) is the first tokens x dim block of every [batch, heads, tokens, dim] tensor.
    for (auto [dst, src] : {std::pair{&hq, q}, std::pair{&hk, k}, std::pair{&hv, v}, std::pair{&hout, out}})
      check_cuda(cudaMemcpy(dst->data(), src, head * 2, cudaMemcpyDeviceToHost), "cudaMemcpy (bench check)");
    check_cuda(cudaMemcpy(hlse.data(), lse, hlse.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy (bench check)");
  }
  for (void* b : {q_alloc, k_alloc, v_alloc, out_alloc, static_cast<void*>(lse)}) cudaFree(b);
  Sage2Problem one = p;
  one.batch = one.heads_q = one.heads_kv = 1;
  const int block_q = one.recipe().block_q, q_blocks = one.padded_q() / block_q;
  std::vector<int> blocks{0, 1, 2, 3};
  if (!causal) blocks = {0, q_blocks / 3, 2 * q_blocks / 3, q_blocks - 1};
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  std::vector<int> rows;
  for (int qb : blocks)
    for (int t = qb * block_q; t < std::min(n, (qb + 1) * block_q); ++t) rows.push_back(t);
  const auto m = lowbit::verification::emulate_sage2_rows(one, hq, hk, hv, rows);
  std::uint64_t compared = 0, mismatches = 0, lse_compared = 0, lse_mismatches = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::size_t t = std::size_t(rows[r]);
    for (int c = 0; c < d; ++c) {
      ++compared;
      mismatches += hout[t * std::size_t(d) + std::size_t(c)] != m.out[r * std::size_t(d) + std::size_t(c)];
    }
    ++lse_compared;
    lse_mismatches += bits(hlse[t]) != bits(m.lse[r]);
  }
  total_mismatches += mismatches + lse_mismatches;
  nlohmann::ordered_json blocks_json = blocks;
  return {{"name", std::string(misaligned ? "misaligned" : "bench") + "-d" + std::to_string(d) + (causal ? "-causal" : "") +
                       "-n" + std::to_string(n)},
          {"schedule", lowbit::kernels::attention::schedule_name(schedule)},
          {"row_sum", row_sum_name(row_sum)},
          {"d", d}, {"causal", causal}, {"n", n}, {"batch", p.batch}, {"heads_q", p.heads_q}, {"heads_kv", p.heads_kv},
          {"dtype", "fp16"}, {"layout", "bhnd"}, {"data", "bench_attention inputs (fill_attention_like)"},
          {"seed", lowbit::bench::attention_seed(d, causal, n)}, {"checked", "head (0, 0), Q blocks listed"},
          {"inputs_offset_bytes", shift}, {"output_offset_bytes", out_shift},
          {"q_blocks", blocks_json}, {"outputs_compared", compared}, {"mismatches", mismatches},
          {"lse_compared", lse_compared}, {"lse_mismatches", lse_mismatches}};
}

struct Args {
  std::string set = "quick";
  std::string out = "build/results/attention-gpu";
  std::string only;
  std::string real;  // a folder of captured activations: adds their configurations
  lowbit::attention::steps::Exp2Unit exp2 = lowbit::attention::steps::Exp2Unit::polynomial;  // --exp2
  // --schedule: the attention kernel's; configurations it has no instance for (in place, smooth V) run serial.
  lowbit::kernels::attention::Sage2Schedule schedule = lowbit::kernels::attention::Sage2Schedule::serial;
  // --row-sum: the row sums by the lanes or by P V (row-sum=pv); in place and smooth V keep the lanes'.
  lowbit::attention::steps::RowSum row_sum = lowbit::attention::steps::RowSum::lanes;
};

using lowbit::attention::sage2_8b_preset;

int run(const Args& args) {
  const auto gpu = lowbit::kernels::first_gpu();
  if (!gpu) {
    std::cout << "check_sage2_gpu: no GPU found (or no CUDA driver); skipped\n";
    return 77;
  }
  const std::filesystem::path out(args.out);
  std::filesystem::create_directories(out);
  lowbit::Provenance provenance = lowbit::Provenance::current();
  provenance.gpu = gpu->name;
  provenance.gpu_driver = gpu->driver;
  provenance.cuda_runtime = gpu->runtime;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  std::uint64_t total_mismatches = 0;
  // summary.json, rewritten after every configuration (a run cut short keeps what it checked).
  const auto write_summary = [&] {
    nlohmann::ordered_json doc;
    doc["what"] = std::string(sage2_8b_preset(args.exp2)) + " kernels on the GPU vs the emulated " + sage2_8b_preset(args.exp2) +
                  " pipeline, bit for bit: output codes, LSE, quantized Q/K/V";
    doc["reference"] = "attention::forward(preset(\"" + std::string(sage2_8b_preset(args.exp2)) +
                       "\", d)), output in the inputs' format "
                       "(verification/sage2_emulated.cpp lays it out as the kernels' buffers)";
    doc["command"] = "check_sage2_gpu --configs " + args.set + (args.real.empty() ? "" : " --real " + args.real) +
                     (args.only.empty() ? "" : " --only " + args.only) +
                     " --exp2 " + std::string(lowbit::attention::kernel_exp2_name(args.exp2)) +
                     " --schedule " + lowbit::kernels::attention::schedule_name(args.schedule) +
                     " --row-sum " + row_sum_name(args.row_sum);
    doc["provenance"] = provenance.to_json();
    doc["provenance"]["gpu_arch"] = gpu->arch;
    doc["total_mismatches"] = total_mismatches;
    doc["configurations"] = entries;
    std::ofstream(out / "summary.json") << doc.dump(2) << "\n";
  };
  std::printf("%-52s %12s %10s %8s %8s %9s %7s %7s\n", "configuration", "outputs", "mismatch", "lse", "quant", "gpu s",
              "emul s", "");
  const auto check_device_inputs = [&](int d, bool causal, int n, bool misaligned) {
    const auto t0 = std::chrono::steady_clock::now();
    nlohmann::ordered_json e = check_bench_config(d, causal, n, args.exp2, args.schedule, args.row_sum, total_mismatches, misaligned);
    std::printf("%-52s %12llu %10llu %8llu %8s %9s %7.1f %7s\n", e["name"].get<std::string>().c_str(),
                e["outputs_compared"].get<unsigned long long>(), e["mismatches"].get<unsigned long long>(),
                e["lse_mismatches"].get<unsigned long long>(), "-", "-",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                e["mismatches"].get<std::uint64_t>() + e["lse_mismatches"].get<std::uint64_t>() ? "DIFFER" : "equal");
    std::fflush(stdout);
    entries.push_back(e);
    write_summary();
  };
  if (args.set == "bench")
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (int n : {1024, 2048, 4096, 8192, 16384, 32768}) check_device_inputs(d, causal, n, false);
  if (args.set == "quick") {  // the fallbacks for inputs off the wide loads' alignment, ragged N
    check_device_inputs(64, false, 200, true);
    check_device_inputs(128, true, 200, true);
  }
  std::vector<Config> list = args.set == "bench" ? std::vector<Config>{} : configs(args.set);
  if (!args.real.empty()) {
    const std::vector<Config> real = real_configs(args.real);
    list.insert(list.begin(), real.begin(), real.end());
  }
  for (Config c : list) {
    c.problem.exp2 = args.exp2;
    if (!c.problem.in_place && !c.problem.smooth_v) c.problem.schedule = args.schedule, c.problem.row_sum = args.row_sum;
    const std::string name = config_name(c);
    if (!args.only.empty() && name.find(args.only) == std::string::npos) continue;
    const Sage2Problem& p = c.problem;
    const Inputs in = make_inputs(c);
    const auto t0 = std::chrono::steady_clock::now();
    const auto g = lowbit::kernels::attention::sage2_attention_host(p, in.q, in.k, in.v, true);
    const auto t1 = std::chrono::steady_clock::now();
    const auto m = lowbit::verification::emulate_sage2(p, in.q, in.k, in.v);
    const auto t2 = std::chrono::steady_clock::now();
    const BitComparison out_cmp = compare_bits(g.out, m.out), lse_cmp = compare_bits(g.lse, m.lse);
    nlohmann::ordered_json quantized;
    std::uint64_t quant_mismatches = 0;
    const auto add = [&](const char* what, const BitComparison& cmp) {
      quantized[what] = to_json(cmp);
      quant_mismatches += cmp.mismatches;
    };
    add("q_codes", compare_bits(g.quantized.q_codes, m.quantized.q_codes));
    add("q_scales", compare_bits(g.quantized.q_scales, m.quantized.q_scales));
    add("q_bias", compare_bits(g.quantized.q_bias, m.quantized.q_bias));
    add("k_mean", compare_bits(g.quantized.k_mean, m.quantized.k_mean));
    add("k_codes", compare_bits(g.quantized.k_codes, m.quantized.k_codes));
    add("k_scales", compare_bits(g.quantized.k_scales, m.quantized.k_scales));
    add("v_codes", compare_bits(g.quantized.v_codes, m.quantized.v_codes));
    add("v_scales", compare_bits(g.quantized.v_scales, m.quantized.v_scales));
    const std::uint64_t mismatches = out_cmp.mismatches + lse_cmp.mismatches + quant_mismatches;
    total_mismatches += mismatches;
    const double gpu_s = std::chrono::duration<double>(t1 - t0).count(), emulated_s = std::chrono::duration<double>(t2 - t1).count();
    std::printf("%-52s %12llu %10llu %8llu %8llu %9.2f %7.1f %7s\n", name.c_str(),
                static_cast<unsigned long long>(out_cmp.compared), static_cast<unsigned long long>(out_cmp.mismatches),
                static_cast<unsigned long long>(lse_cmp.mismatches), static_cast<unsigned long long>(quant_mismatches), gpu_s,
                emulated_s, mismatches ? "DIFFER" : "equal");
    std::fflush(stdout);
    nlohmann::ordered_json e{{"name", name},
                             {"schedule", lowbit::kernels::attention::schedule_name(p.schedule)},
                             {"row_sum", row_sum_name(p.row_sum)},
                             {"d", p.head_dim},
                             {"causal", p.causal},
                             {"n", p.tokens},
                             {"batch", p.batch},
                             {"heads_q", p.heads_q},
                             {"heads_kv", p.heads_kv},
                             {"dtype", dtype_name(p.dtype)},
                             {"layout", layout_name(p.layout)},
                             {"data", data_label(c)},
                             {"seed", c.seed},
                             {"outputs_compared", out_cmp.compared},
                             {"mismatches", out_cmp.mismatches},
                             {"lse_compared", lse_cmp.compared},
                             {"lse_mismatches", lse_cmp.mismatches},
                             {"quantized", quantized},
                             {"output_fnv1a", hex64(fnv1a(g.out.data(), g.out.size() * 2))},
                             {"lse_fnv1a", hex64(fnv1a(g.lse.data(), g.lse.size() * 4))}};
    if (out_cmp.mismatches) e["first_output_mismatches"] = first_json(out_cmp);
    if (lse_cmp.mismatches) e["first_lse_mismatches"] = first_json(lse_cmp);
    entries.push_back(e);
    write_summary();
    const bool keep_failing = mismatches && p.elements(p.heads_q) <= (std::size_t{1} << 22);
    if (keep_failing || c.export_accuracy) {
      const auto dir = out / (keep_failing ? "failing" : "accuracy") / name;
      std::filesystem::create_directories(dir);
      write_tensor(dir / "q.npy", p, in.q, p.heads_q);
      write_tensor(dir / "k.npy", p, in.k, p.heads_kv);
      write_tensor(dir / "v.npy", p, in.v, p.heads_kv);
      write_tensor(dir / "out_gpu.npy", p, g.out, p.heads_q);
      if (keep_failing) write_tensor(dir / "out_emulated.npy", p, m.out, p.heads_q);
      std::ofstream(dir / "config.json") << e.dump(2) << "\n";
    }
  }
  write_summary();
  std::printf("%zu configurations, %llu mismatches in all; %s\n", entries.size(),
              static_cast<unsigned long long>(total_mismatches), (out / "summary.json").c_str());
  return total_mismatches == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--configs") args.set = value();
      else if (a == "--out") args.out = value();
      else if (a == "--only") args.only = value();
      else if (a == "--real") args.real = value();
      else if (a == "--exp2") {
        const std::string name = value();
        const auto unit = lowbit::attention::kernel_exp2_unit(name);
        if (!unit) throw std::invalid_argument("--exp2 " + name + ": not one of the kernels' exp2 units (poly5, sm90-ex2)");
        args.exp2 = *unit;
      } else if (a == "--schedule") {
        const std::string name = value();
        const auto schedule = lowbit::kernels::attention::parse_schedule(name);
        if (!schedule) throw std::invalid_argument("--schedule " + name + ": not one of the kernel's schedules (serial, overlapped)");
        args.schedule = *schedule;
      } else if (a == "--row-sum") {
        const std::string name = value();
        if (name != "lanes" && name != "pv") throw std::invalid_argument("--row-sum " + name + ": not lanes or pv");
        args.row_sum = name == "pv" ? lowbit::attention::steps::RowSum::pv : lowbit::attention::steps::RowSum::lanes;
      } else if (a == "--help") {
        std::cout << "check_sage2_gpu [--configs quick|full|bench] [--real DIR] [--only SUBSTRING] [--exp2 poly5|sm90-ex2]\n"
                     "                [--schedule serial|overlapped] [--row-sum lanes|pv] [--out DIR]\n"
                     "  --real DIR: also check the captured activations DIR/layerNN_{q,k,v}.npy (layers 00, 10, 20, 29)\n"
                     "  --exp2: the kernel's and the emulation's exp2 (poly5: preset sage2-8b; sm90-ex2: sage2-8b-ex2)\n"
                     "  --schedule: the attention kernel's (in-place and smooth-V configurations run serial)\n"
                     "  --row-sum: the softmax's row sums by the lanes or by P V (pv: emulated row-sum=pv; with\n"
                     "    sm90-ex2 and serial; in-place and smooth-V configurations keep the lanes')\n";
        return 0;
      } else throw std::invalid_argument("unknown option '" + a + "'");
    } catch (const std::exception& e) {
      std::cerr << "check_sage2_gpu: " << e.what() << "\n";
      return 2;
    }
  }
  if (args.row_sum == lowbit::attention::steps::RowSum::pv &&
      (args.exp2 != lowbit::attention::steps::Exp2Unit::sm90_ex2 || args.schedule != lowbit::kernels::attention::Sage2Schedule::serial)) {
    std::cerr << "check_sage2_gpu: --row-sum pv has instances with --exp2 sm90-ex2 and --schedule serial only\n";
    return 2;
  }
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::cerr << "check_sage2_gpu: error: " << e.what() << "\n";
    return 1;
  }
}
