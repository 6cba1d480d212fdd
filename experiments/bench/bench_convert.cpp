// bench_convert: conversions per second on one core, on the same inputs in one run, of
//  * lowbit's fast path (each output width), the scalar reference (the generic `encode`, element
//    by element) and, when the CUDA headers are present, CUDA's host conversions; every path must
//    give the reference's codes;
//  * what bounds the fast path: a loop that moves the same bytes without arithmetic (memory),
//    the fast path on inputs that stay in cache (instructions), and instructions per value where
//    the CPU's counters can be read;
//  * the Python peers side by side (PyTorch and ml_dtypes, where importable with --python): the
//    inputs go to files and experiments/bench/convert_peers.py times each peer in rounds that
//    alternate with lowbit called through ctypes in the same process (that script says why), after
//    checking the peer gives lowbit's codes. A missing peer is reported as not measured, with why.
// Cases: float32 -> e4m3 and e5m2 (saturating and not), e2m1 (one code per byte and packed), bf16,
// and bfloat16 -> e4m3, all nearest-even. Prints the tables and writes OUT_DIR/bench_convert.md,
// bench_convert.csv and bench_convert_peers.csv, each with a provenance line (default
// build/results; results/README.md has the command of the committed record).
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <immintrin.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulation/convert.hpp"
#include "emulation/convert_fast.hpp"
#include "experiments/bench/bench_convert_measure.hpp"
#include "experiments/common/results.hpp"

#if LOWBIT_HAVE_CUDA_HEADERS
#include <cuda_bf16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#endif

namespace {

using namespace lowbit;
using namespace lowbit::bench_convert;  // bench_convert_measure.hpp

struct Case {
  std::string input;   // "float32" or "bfloat16"
  std::string format;  // the output format's spec
  ConversionOptions options;
  bool bf16_input() const { return input == "bfloat16"; }
  std::string overflow() const { return std::string(to_string(options.overflow)); }
  std::string name() const { return input + " -> " + format + " " + overflow(); }
};

// The conversions, plus float32 -> bf16. Nearest-even throughout.
const std::vector<Case> kCases{
    {"float32", "e4m3", {}},
    {"float32", "e4m3", {.overflow = Overflow::nan}},
    {"float32", "e5m2", {}},
    {"float32", "e5m2", {.overflow = Overflow::inf}},
    {"float32", "e2m1", {}},
    {"float32", "bf16", {}},
    {"bfloat16", "e4m3", {}},
    {"bfloat16", "e4m3", {.overflow = Overflow::nan}},
};

// Inputs are normal(0, max_finite/8) of the output format (bfloat16 inputs: those, rounded to
// bf16): they spread over the format's binades and overflow with probability ~1e-15 (8 sigma),
// so every path converts the same kind of values and no overflow rule is exercised.
double input_sigma(const Format& f) { return max_finite(f) / 8; }

struct Inputs {
  std::vector<float> f32;
  std::vector<Bf16Bits> bf16;
  float value(std::size_t i, bool bf16_input) const {
    return bf16_input ? std::bit_cast<float>(std::uint32_t(bf16[i].bits) << 16) : f32[i];
  }
};

Inputs make_inputs(const Format& f, std::size_t count, std::uint64_t seed) {
  Inputs in;
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, float(input_sigma(f)));
  in.f32.resize(count);
  for (float& x : in.f32) x = normal(generator);
  std::vector<std::uint16_t> bf16(count);
  encode(formats::bf16, in.f32, std::span<std::uint16_t>(bf16));
  in.bf16.resize(count);
  for (std::size_t i = 0; i < count; ++i) in.bf16[i] = Bf16Bits{bf16[i]};
  return in;
}

// One lowbit path of a case: a name, what it writes, how to run it on all inputs (and on the
// first `prefix` of them), and its codes afterwards.
struct Path {
  std::string name;
  std::string output;  // "32-bit codes", "8-bit codes", ...
  std::function<void(std::size_t prefix)> run;
  std::function<Code(std::size_t)> code_at;
  bool fast = false;
  double bytes_per_value = 0;  // fast paths: bytes read and written per value
  bool streams = false;        // fast paths: whether it writes all inputs' codes with streaming stores
  std::function<void(bool streaming)> move_same_bytes = nullptr;  // fast paths: the memory probe with those bytes
  // Fast narrow paths of the split algorithm: all inputs through it with the stores named.
  std::function<void(fastconv::Stores)> run_with_stores = nullptr;
  Timing median{};
  std::size_t mismatches = 0;
};

struct Buffers {
  std::vector<Code> reference, code32;
  std::vector<std::uint8_t> code8, packed4, cuda8, probe8;
  std::vector<std::uint16_t> code16, cuda16, probe16;
};

std::vector<Path> paths_for(const Case& c, const Format& f, const Inputs& in, Buffers& b) {
  const std::size_t n = in.f32.size();
  const bool bf16 = c.bf16_input();
  const ConversionOptions o = c.options;
  const double in_bytes = bf16 ? 2 : 4;
  std::vector<Path> paths;
  b.reference.assign(n, 0);
  paths.push_back({"scalar reference", "32-bit codes",
                   [&, f, o, bf16](std::size_t prefix) {
                     for (std::size_t i = 0; i < prefix; ++i) b.reference[i] = encode(f, double(in.value(i, bf16)), o);
                   },
                   [&](std::size_t i) { return b.reference[i]; }});
  const auto isa = fastconv::best_available();
  const auto algorithm = fastconv::algorithm_used(f, o);
  const bool split = isa && algorithm == fastconv::Algorithm::split;
  const auto fast = [&](std::string output, double out_bytes, std::function<void(std::size_t)> run,
                        std::function<Code(std::size_t)> code_at, std::function<void(bool)> probe,
                        std::function<void(fastconv::Stores)> run_with_stores = nullptr) {
    Path p{"fast", std::move(output), std::move(run), std::move(code_at)};
    p.fast = true;
    p.bytes_per_value = in_bytes + out_bytes;
    p.streams = isa && algorithm && probe &&
                fastconv::streams({*isa, *algorithm}, out_bytes < 1 ? 1 : std::size_t(out_bytes),
                                  std::size_t(out_bytes * double(n)), out_bytes < 1);
    p.move_same_bytes = std::move(probe);
    if (split) p.run_with_stores = std::move(run_with_stores);
    paths.push_back(std::move(p));
  };
  if (!bf16) {
    b.code32.assign(n, 0);
    fast("32-bit codes", 4,
         [&, f, o](std::size_t prefix) {
           encode(f, std::span(in.f32.data(), prefix), std::span<Code>(b.code32.data(), prefix), o);
         },
         [&](std::size_t i) { return b.code32[i]; }, nullptr);
  }
  const auto one_per_element = [&]<class Out>(std::vector<Out>& codes, std::vector<Out>& probe, std::string output) {
    codes.assign(n, 0);
    probe.assign(n, 0);
    fast(
        std::move(output), sizeof(Out),
        [&, f, o, bf16](std::size_t prefix) {
          if (bf16) encode(f, std::span(in.bf16.data(), prefix), std::span<Out>(codes.data(), prefix), o);
          else encode(f, std::span(in.f32.data(), prefix), std::span<Out>(codes.data(), prefix), o);
        },
        [&](std::size_t i) { return Code(codes[i]); },
        [&, bf16, n](bool streaming) {
          if (bf16) move_bytes(in.bf16.data(), probe.data(), n, false, streaming);
          else move_bytes(in.f32.data(), probe.data(), n, false, streaming);
        },
        [&, f, o, bf16, isa](fastconv::Stores stores) {
          const fastconv::Variant v{*isa, fastconv::Algorithm::split, stores};
          if (bf16) fastconv::encode_with(v, f, std::span<const Bf16Bits>(in.bf16), std::span<Out>(codes), o);
          else fastconv::encode_with(v, f, std::span<const float>(in.f32), std::span<Out>(codes), o);
        });
  };
  if (f.code_bits() <= 8) one_per_element(b.code8, b.probe8, "8-bit codes");
  else one_per_element(b.code16, b.probe16, "16-bit codes");
  if (f.code_bits() <= 4) {
    b.packed4.assign((n + 1) / 2, 0);
    fast(
        "packed 4-bit codes", 0.5,
        [&, f, o, bf16](std::size_t prefix) {
          const std::span<std::uint8_t> out(b.packed4.data(), (prefix + 1) / 2);
          if (bf16) encode_packed4(f, std::span(in.bf16.data(), prefix), out, o);
          else encode_packed4(f, std::span(in.f32.data(), prefix), out, o);
        },
        [&](std::size_t i) { return Code(b.packed4[i / 2] >> (i % 2 ? 4 : 0)) & 0xF; },
        [&, bf16, n](bool streaming) {
          if (bf16) move_bytes(in.bf16.data(), b.probe8.data(), n, true, streaming);
          else move_bytes(in.f32.data(), b.probe8.data(), n, true, streaming);
        },
        [&, f, o, bf16, isa](fastconv::Stores stores) {
          const fastconv::Variant v{*isa, fastconv::Algorithm::split, stores};
          const std::span<std::uint8_t> out(b.packed4);
          if (bf16) fastconv::encode_packed4_with(v, f, std::span<const Bf16Bits>(in.bf16), out, o);
          else fastconv::encode_packed4_with(v, f, std::span<const float>(in.f32), out, o);
        });
  }
#if LOWBIT_HAVE_CUDA_HEADERS
  const auto cuda = [&]<class Out>(std::vector<Out>& codes, std::function<Out(std::size_t)> convert) {
    codes.assign(n, 0);
    paths.push_back({"CUDA host", fmt::format("{}-bit codes", 8 * sizeof(Out)),
                     [&, convert](std::size_t prefix) {
                       for (std::size_t i = 0; i < prefix; ++i) codes[i] = convert(i);
                     },
                     [&](std::size_t i) { return Code(codes[i]); }});
  };
  const bool saturating = o.overflow == Overflow::saturate;
  const __nv_saturation_t saturation = saturating ? __NV_SATFINITE : __NV_NOSAT;
  const bool fp8 = c.format == "e4m3" || c.format == "e5m2";
  const __nv_fp8_interpretation_t fp8_kind = c.format == "e4m3" ? __NV_E4M3 : __NV_E5M2;
  if (fp8 && !bf16)
    cuda(b.cuda8, std::function<std::uint8_t(std::size_t)>(
                      [&, saturation, fp8_kind](std::size_t i) { return __nv_cvt_float_to_fp8(in.f32[i], saturation, fp8_kind); }));
  if (fp8 && bf16)
    cuda(b.cuda8, std::function<std::uint8_t(std::size_t)>([&, saturation, fp8_kind](std::size_t i) {
           __nv_bfloat16_raw raw;
           raw.x = in.bf16[i].bits;
           return __nv_cvt_bfloat16raw_to_fp8(raw, saturation, fp8_kind);
         }));
  if (c.format == "e2m1" && !bf16)
    cuda(b.cuda8, std::function<std::uint8_t(std::size_t)>(
                      [&](std::size_t i) { return __nv_cvt_float_to_fp4(in.f32[i], __NV_E2M1, cudaRoundNearest); }));
  // __float2bfloat16_rn does not saturate; the inputs never overflow bf16, so it must agree.
  if (c.format == "bf16" && !bf16)
    cuda(b.cuda16, std::function<std::uint16_t(std::size_t)>(
                       [&](std::size_t i) { return std::bit_cast<std::uint16_t>(__float2bfloat16_rn(in.f32[i])); }));
#endif
  return paths;
}

// What serves the fast path for a case, e.g. "avx2 split".
std::string fast_variant(const Format& f, const ConversionOptions& o) {
  const auto isa = fastconv::best_available();
  const auto algorithm = fastconv::algorithm_used(f, o);
  return isa && algorithm ? fastconv::to_string(fastconv::Variant{*isa, *algorithm}) : "scalar";
}

std::string shell_quote(const std::string& s) {
  std::string quoted = "'";
  for (char ch : s) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

// The peers' side of the run: runs convert_peers.py on the cases' inputs; the response, or why
// there is none.
struct PeerRun {
  nlohmann::json response;
  std::string why_not;  // empty when the script ran
};
PeerRun run_peers(const std::string& python, const std::vector<nlohmann::json>& cases, int rounds,
                  const std::filesystem::path& work_dir) {
  const nlohmann::json request{{"library", LOWBIT_C_API_LIBRARY}, {"rounds", rounds}, {"cases", cases}};
  const auto request_path = work_dir / "request.json", response_path = work_dir / "response.json";
  std::ofstream(request_path) << request.dump(1);
  const std::string command = shell_quote(python) + " " + shell_quote(LOWBIT_PEER_SCRIPT) + " --request " +
                              shell_quote(request_path) + " --response " + shell_quote(response_path);
  fmt::print(stderr, "bench_convert: peers: {}\n", command);
  const int status = std::system(command.c_str());
  if (status != 0) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return {{}, code == 127 ? "--python '" + python + "' was not found"
                            : fmt::format("{} exited with status {} (its messages are above)", LOWBIT_PEER_SCRIPT, code)};
  }
  std::ifstream in(response_path);
  try {
    return {nlohmann::json::parse(in), ""};
  } catch (const std::exception& e) {
    return {{}, fmt::format("{}: unreadable response: {}", response_path.string(), e.what())};
  }
}

std::string rate_text(double per_second) { return fmt::format("{:.3g}", per_second); }
std::string csv_quoted(std::string text) {
  for (std::size_t at = 0; (at = text.find('"', at)) != std::string::npos; at += 2) text.insert(at, 1, '"');
  return '"' + text + '"';
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Times float32 -> e4m3, e5m2, e2m1, bf16 and bfloat16 -> e4m3 conversion (nearest-even) on one core: lowbit's "
      "fast path, the scalar reference, CUDA's host conversions, and PyTorch and ml_dtypes side by side, on the same "
      "inputs, and checks they give the same codes."};
  int log2_count = 24, repetitions = 7;
  std::uint64_t seed = 1;
  std::string out_dir = LOWBIT_DEFAULT_RESULTS_DIR, python = "python3";
  bool no_peers = false;
  app.add_option("--log2-count", log2_count, "number of inputs: 2^N")->capture_default_str()->check(CLI::Range(14, 30));
  app.add_option("--repetitions", repetitions, "timed rounds per path and per peer (the median is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 101));
  app.add_option("--seed", seed, "seed of the input generator")->capture_default_str();
  app.add_option("--out-dir", out_dir,
                 "where bench_convert.md, bench_convert.csv and bench_convert_peers.csv go (created if missing; the "
                 "committed record: results)")
      ->capture_default_str();
  app.add_option("--python", python, "the Python with torch and/or ml_dtypes that times the peers")->capture_default_str();
  app.add_flag("--no-peers", no_peers, "do not time the Python peers (they are reported as not measured)");
  CLI11_PARSE(app, argc, argv);

  // Outputs are checked before the minutes of timing. Append mode: a failed run keeps the last record.
  const std::filesystem::path dir(out_dir), markdown_path = dir / "bench_convert.md", csv_path = dir / "bench_convert.csv",
                                            peers_csv_path = dir / "bench_convert_peers.csv";
  std::error_code created;
  std::filesystem::create_directories(dir, created);
  for (const auto& path : {markdown_path, csv_path, peers_csv_path})
    if (created || !std::ofstream(path, std::ios::app)) {
      std::fprintf(stderr, "bench_convert: --out-dir '%s': cannot write %s%s%s\n", out_dir.c_str(), path.c_str(),
                   created ? ": " : "", created ? created.message().c_str() : "");
      return 2;
    }

  const std::size_t count = std::size_t{1} << log2_count;
  const std::size_t cache_slice = std::size_t{1} << 13;  // 32 KiB of float32 inputs: in L1/L2 with the outputs
  const auto isa = fastconv::best_available();
  const Provenance provenance = Provenance::current();
  experiments::RunInfo run = experiments::RunInfo::from_args(argc, argv);
  run.machine = provenance;
  run.seeds = {{"inputs", seed}};
  run.config = {{"log2_count", log2_count}, {"repetitions", repetitions}, {"peers", !no_peers},
                {"fast_path", isa ? fastconv::to_string(*isa) : "none (scalar)"}};
  const std::string& command = run.command;

  std::string table = fmt::format(
      "| input | format | overflow | path | output | ns/value | values/s | vs scalar reference | same codes |\n"
      "|---|---|---|---|---|---:|---:|---:|---|\n");
  std::string limits = fmt::format(
      "| input | format | overflow | output | bytes/value | the encoders' stores | memory probe, regular stores: "
      "values/s (GB/s) | memory probe, streaming stores: values/s (GB/s) | fast path, regular stores: values/s (GB/s) | "
      "fast path, streaming stores: values/s (GB/s) | fast path / probe, the encoders' stores | fast path in cache: "
      "values/s | instructions/value |\n|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
  std::string csv =
      "input,format,overflow,path,output,variant,inputs,rounds,median_cpu_seconds,median_wall_seconds,"
                    "values_per_second,ratio_vs_scalar,mismatches,bytes_per_value,streaming_stores,"
                    "memory_probe_regular_values_per_second,memory_probe_streaming_values_per_second,"
                    "fast_regular_values_per_second,fast_streaming_values_per_second,"
                    "cache_resident_values_per_second,instructions_per_value\n";
  bool all_identical = true;
  std::map<std::string, double> fast_rate;  // case name + output -> values/s of the fast path

  // Peer inputs are written next to the request; one file per input set.
  const std::filesystem::path work_dir =
      std::filesystem::temp_directory_path() / fmt::format("lowbit-bench-convert-{}", getpid());
  std::filesystem::create_directories(work_dir);
  std::vector<nlohmann::json> peer_cases;

  std::map<std::string, Inputs> inputs_of;  // by output format
  for (const Case& c : kCases) {
    const Format f = format_from_string(c.format);
    if (!inputs_of.count(c.format)) inputs_of[c.format] = make_inputs(f, count, seed);
    const Inputs& in = inputs_of[c.format];
    const std::string variant = fast_variant(f, c.options);

    Buffers buffers;
    std::vector<Path> paths = paths_for(c, f, in, buffers);
    fmt::print(stderr, "bench_convert: {}: {} paths, {} rounds each\n", c.name(), paths.size(), repetitions);
    std::vector<std::function<void()>> calls;
    for (const Path& p : paths) calls.push_back([&p, count] { p.run(count); });
    const std::vector<Timing> medians = time_interleaved(calls, repetitions);
    for (std::size_t k = 0; k < paths.size(); ++k) paths[k].median = medians[k];

    const double scalar_seconds = paths.front().median.cpu;
    for (Path& p : paths) {
      for (std::size_t i = 0; i < count; ++i) p.mismatches += p.code_at(i) != buffers.reference[i];
      all_identical = all_identical && p.mismatches == 0;
      const double rate = double(count) / p.median.cpu;
      const std::string path_name = p.fast ? "fast (" + variant + ")" : p.name;
      const std::string same = p.mismatches == 0 ? "yes" : fmt::format("NO: {} differ", p.mismatches);
      table += fmt::format("| {} | {} | {} | {} | {} | {:.3f} | {} | {:.1f}x | {} |\n", c.input, c.format, c.overflow(),
                           path_name, p.output, 1e9 * p.median.cpu / double(count), rate_text(rate),
                           scalar_seconds / p.median.cpu, same);
      std::string probe_columns = ",,,,,,,";
      if (p.fast && p.move_same_bytes) {
        fast_rate[c.name() + " " + p.output] = rate;
        // Its memory probe with regular and with streaming stores, the fast path with each (where
        // it is the split algorithm's; otherwise as the encoders take it), and its run in cache,
        // in the same rounds.
        const std::size_t repeats = count / cache_slice;
        const auto with_stores = [&](fastconv::Stores stores) -> std::function<void()> {
          if (p.run_with_stores) return [&p, stores] { p.run_with_stores(stores); };
          return [&p, count] { p.run(count); };
        };
        const std::vector<Timing> bounds = time_interleaved(
            {[&] { p.move_same_bytes(false); }, [&] { p.move_same_bytes(true); }, with_stores(fastconv::Stores::regular),
             with_stores(fastconv::Stores::streaming),
             [&] {
               for (std::size_t r = 0; r < repeats; ++r) p.run(cache_slice);
             }},
            repetitions);
        // The codes of each kind of stores, checked like every path's.
        for (const auto stores : {fastconv::Stores::regular, fastconv::Stores::streaming}) {
          with_stores(stores)();
          std::size_t differ = 0;
          for (std::size_t i = 0; i < count; ++i) differ += p.code_at(i) != buffers.reference[i];
          p.mismatches += differ;
          all_identical = all_identical && differ == 0;
        }
        const InstructionCount instructions = count_instructions([&] { p.run(count); });
        const auto rate_of = [&](std::size_t k) { return double(count) / bounds[k].cpu; };
        const double probe_regular = rate_of(0), probe_streaming = rate_of(1), fast_regular = rate_of(2),
                     fast_streaming = rate_of(3), cached_rate = double(repeats * cache_slice) / bounds[4].cpu;
        const auto gb = [&](double values_per_second) { return values_per_second * p.bytes_per_value * 1e-9; };
        const std::string not_split = "as the encoders' (not split)";
        limits += fmt::format(
            "| {} | {} | {} | {} | {} | {} | {} ({:.1f}) | {} ({:.1f}) | {} | {} | {:.0f}% | {} | {} |\n", c.input, c.format,
            c.overflow(), p.output, p.bytes_per_value, p.streams ? "streaming" : "regular", rate_text(probe_regular),
            gb(probe_regular), rate_text(probe_streaming), gb(probe_streaming),
            p.run_with_stores ? fmt::format("{} ({:.1f})", rate_text(fast_regular), gb(fast_regular)) : not_split,
            p.run_with_stores ? fmt::format("{} ({:.1f})", rate_text(fast_streaming), gb(fast_streaming)) : not_split,
            100 * (p.streams ? fast_streaming / probe_streaming : fast_regular / probe_regular), rate_text(cached_rate),
            instructions.count ? fmt::format("{:.2f}", *instructions.count / double(count))
                               : "not measured (" + instructions.why_not + ")");
        probe_columns = fmt::format("{},{},{:.6g},{:.6g},{},{},{:.6g},{}", p.bytes_per_value, p.streams ? "yes" : "no",
                                    probe_regular, probe_streaming,
                                    p.run_with_stores ? fmt::format("{:.6g}", fast_regular) : "",
                                    p.run_with_stores ? fmt::format("{:.6g}", fast_streaming) : "", cached_rate,
                                    instructions.count ? fmt::format("{:.4g}", *instructions.count / double(count)) : "");
      }
      csv += fmt::format("{},{},{},{},{},{},{},{},{:.6f},{:.6f},{:.6g},{:.4g},{},{}\n", c.input, c.format, c.overflow(),
                         p.name, p.output, p.fast ? variant : "", count, repetitions, p.median.cpu, p.median.wall, rate,
                         scalar_seconds / p.median.cpu, p.mismatches, probe_columns);
    }

    // The peers convert into one code per byte, or two per byte; lowbit's codes for those come
    // from the same encoders through lowbit_c_api.
    if (c.format == "bf16") continue;
    const std::string input_file = (work_dir / fmt::format("{}-{}.bin", c.input, c.format)).string();
    if (!std::filesystem::exists(input_file)) {
      std::ofstream file(input_file, std::ios::binary);
      if (c.bf16_input()) file.write(reinterpret_cast<const char*>(in.bf16.data()), std::streamsize(2 * count));
      else file.write(reinterpret_cast<const char*>(in.f32.data()), std::streamsize(4 * count));
    }
    for (const std::string output : {"8", "packed4"}) {
      if (output == "packed4" && f.code_bits() > 4) continue;
      peer_cases.push_back({{"name", c.name() + (output == "8" ? ", 8-bit codes" : ", packed 4-bit codes")},
                            {"format", c.format},
                            {"rounding", "nearest-even"},
                            {"overflow", c.overflow()},
                            {"input", c.input},
                            {"output", output},
                            {"inputs", input_file},
                            {"count", count}});
    }
  }

  // The peers, side by side.
  const PeerRun peers = no_peers ? PeerRun{{}, "--no-peers was given"}
                                 : run_peers(python, peer_cases, repetitions, work_dir);
  std::filesystem::remove_all(work_dir);
  std::string peer_table =
      "| conversion | peer | peer ns/value | lowbit ns/value (same rounds) | lowbit speed / peer speed | note |\n"
      "|---|---|---:|---:|---:|---|\n";
  std::string peers_csv =
      "conversion,peer,measured,rounds,peer_cpu_seconds,lowbit_cpu_seconds,speedup,peer_wall_seconds,"
                          "lowbit_wall_seconds,reason\n";
  std::string peer_versions = "not run: " + peers.why_not;
  std::map<std::string, double> torch_copy_speedup;  // conversion -> lowbit / torch copy_
  if (peers.why_not.empty()) {
    std::vector<std::string> versions;
    for (const auto& [name, version] : peers.response["versions"].items())
      versions.push_back(fmt::format("{} {}", name, version.is_string() ? version.get<std::string>() : version.dump()));
    peer_versions = fmt::format("{} (interpreter: `{}`)", fmt::join(versions, ", "), python);
    for (const auto& r : peers.response["results"]) {
      const std::string conversion = r["case"], peer = r["peer"];
      if (!r["measured"].get<bool>()) {
        const std::string reason = r["reason"];
        peer_table += fmt::format("| {} | {} | | | | not measured: {} |\n", conversion, peer, reason);
        peers_csv += fmt::format("{},{},no,,,,,,,{}\n", conversion, peer, csv_quoted(reason));
        continue;
      }
      const double peer_seconds = r["peer_cpu_seconds"], lowbit_seconds = r["lowbit_cpu_seconds"],
                   speedup = r["speedup"];
      if (peer == "torch copy_") torch_copy_speedup[conversion] = speedup;
      peer_table += fmt::format("| {} | {} | {:.3f} | {:.3f} | {:.2f}x | median of {} paired rounds |\n", conversion,
                                peer, 1e9 * peer_seconds / double(count), 1e9 * lowbit_seconds / double(count), speedup,
                                r["rounds"].get<int>());
      peers_csv += fmt::format("{},{},yes,{},{:.6f},{:.6f},{:.4g},{:.6f},{:.6f},\n", conversion, peer,
                               r["rounds"].get<int>(), peer_seconds, lowbit_seconds, speedup,
                               r["peer_wall_seconds"].get<double>(), r["lowbit_wall_seconds"].get<double>());
    }
  } else {
    peer_table += fmt::format("| every conversion | torch, ml_dtypes | | | | not measured: {} |\n", peers.why_not);
    peers_csv += fmt::format("every conversion,torch and ml_dtypes,no,,,,,,,{}\n", csv_quoted(peers.why_not));
  }

  // The targets of issue 16, stated for an AVX-512 machine.
  std::string targets;
  for (const nlohmann::json& pc : peer_cases) {
    const std::string conversion = pc["name"];
    const std::string key = conversion.substr(0, conversion.find(", ")) + " " +
                            (pc["output"] == "8" ? "8-bit codes" : "packed 4-bit codes");
    const double rate = fast_rate[key];
    const auto torch = torch_copy_speedup.find(conversion);
    targets += fmt::format("| {} | {} | {} | {} |\n", conversion, rate_text(rate), rate >= 2e9 ? "met" : "NOT met",
                           torch == torch_copy_speedup.end()
                               ? "no torch copy_ measured (see above)"
                               : fmt::format("{:.2f}x: {}", torch->second, torch->second >= 1.5 ? "met" : "NOT met"));
  }

  std::vector<std::string> sigmas;
  for (const auto& [name, unused] : inputs_of) sigmas.push_back(fmt::format("{} {:.3g}", name, input_sigma(format_from_string(name))));
  const std::string markdown = fmt::format(
      "{}\n\nCommand: `{}` (from the repository root, after building the target bench_convert).\n\n"
      "CPU: {}. Compiler: {}. Fast path: {} (per case: the algorithm in the path column).\n"
      "Peers: {}.\n\n"
      "Nearest-even throughout; {} inputs per case drawn from normal(0, sigma = max_finite/8) of the output format (sigma: "
      "{}), seed {}; bfloat16 inputs are those rounded to bfloat16. No input overflows or is NaN, so saturating and "
      "non-saturating conversions give the same codes here. One thread; median thread CPU time of {} rounds after a "
      "warm-up, the paths of a case timed in turn in every round (per CPU second, so time descheduled on a shared "
      "machine does not count; the CSV has wall time too).\n\n"
      "## lowbit's paths\n\n{}\n"
      "## What bounds the fast path\n\n"
      "Timed in the same rounds: a memory probe, a loop reading the same inputs and writing as many output bytes per "
      "value with no arithmetic, compiled for AVX2 and prefetching its input as the fast path does "
      "(fastconv::kPrefetchBytes ahead): what a plain loop moving those bytes reaches, not a strict bound (where "
      "GCC vectorizes it poorly, as for packed outputs, the fast path can pass it), with "
      "regular stores and with streaming ones (it writes each 4 KiB into a block in L1 and streams the block out); "
      "the fast path on all inputs with each kind of stores (fastconv::encode_with; its codes checked too); and the "
      "fast path on the first {} inputs, repeated, which stay in cache (its instruction throughput). Streaming "
      "stores do not read the output's lines before writing them (regular stores move as many bytes again as the "
      "output, which bytes/value does not count), but they send the output to memory even where it would have "
      "stayed in cache; the encoders take them from {} bytes of narrow output up (the column \"the encoders' "
      "stores\"). Instructions per value: the CPU's counter over one run of the fast path on all inputs.\n\n{}\n"
      "## Side by side with the Python peers\n\n"
      "Each peer and lowbit (called through ctypes, `lowbit_c_api`) in one process on the same inputs, in rounds that "
      "alternate lowbit, peer, peer, lowbit, ...; the ratio is the median over rounds of the peer's CPU time over "
      "lowbit's in the same round. A peer is timed only after its codes equal lowbit's on every input. torch runs "
      "with torch.set_num_threads(1).\n\n{}\n"
      "## Targets (issue 16; stated for an AVX-512 machine, this run's variant: {})\n\n"
      "| conversion | lowbit values/s | >= 2e9/s per core | lowbit speed / torch copy_ >= 1.5 |\n|---|---:|---|---|\n{}\n"
      "Every lowbit path gave the scalar reference's codes on every input: {}.\n",
      provenance.comment_line(), command, provenance.cpu, provenance.compiler, isa ? fastconv::to_string(*isa) : "none",
      peer_versions, count, fmt::join(sigmas, ", "), seed, repetitions, table, cache_slice, fastconv::kStreamingBytes,
      limits, peer_table,
      isa ? fastconv::to_string(*isa) : "none", targets, all_identical ? "yes" : "NO");
  std::fputs(markdown.c_str(), stdout);

  try {
    const experiments::ResultDirectory folder(out_dir, run, "bench_convert");
    folder.csv(csv_path.filename().string(), csv);
    folder.csv(peers_csv_path.filename().string(), peers_csv);
    folder.text(markdown_path.filename().string(), markdown);
    folder.write_provenance();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_convert: %s\n", e.what());
    return 1;
  }
  return all_identical ? 0 : 1;
}
