// bench_attention: the sage2-8b kernels' speed on the GPU. For each (head dim, causal, tokens):
// fp16 inputs [batch, heads, tokens, dim] made on the GPU (fill_attention_like, seed per
// configuration; check_sage2_gpu --configs bench checks these exact inputs bit for bit), then
//   lowbit      sage2_attention_quantized on inputs quantized once (the kernel alone)
//   lowbit_e2e  sage2_attention from fp16 (statistics, quantization, attention)
// for each exp2 unit of --exp2 (lowbit_ex2, lowbit_ex2_e2e: the kernels with MUFU.EX2, sage2-8b-ex2)
// each timed with CUDA events around every run, median of --repeats runs after --warmup runs.
// TOPS = 4 B H N^2 d / time, halved for causal. Prints a table; --json writes one object per
// measurement (bench_attention.py adds PyTorch SDPA, measured in the same run, and the CSV).
#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/attention/sage2_attention.hpp"
#include "kernels/device.hpp"
#include "experiments/bench/bench_attention_inputs.hpp"
#include "numerics/provenance.hpp"

using namespace lowbit;
using kernels::check_cuda;
using kernels::attention::Sage2Problem;

namespace {

template <class T>
struct Device {
  T* p = nullptr;
  explicit Device(std::size_t count) { check_cuda(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc (bench)"); }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

template <class F>
double median_ms(int warmup, int repeats, F&& run) {
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    check_cuda(cudaEventRecord(start), "cudaEventRecord");
    run();
    check_cuda(cudaEventRecord(stop), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times.size() % 2 ? times[times.size() / 2] : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_attention: sage2-8b kernel speed on the GPU (kernel alone and end to end from fp16)"};
  int batch = 4, heads = 32, warmup = 3, repeats = 20;
  std::vector<int> tokens{1024, 2048, 4096, 8192, 16384, 32768}, dims{64, 128};
  std::vector<std::string> causal_modes{"no", "yes"}, exp2_units = lowbit::attention::kernel_exp2_names();
  std::vector<std::string> schedules{"serial"};
  std::string json;
  app.add_option("--batch", batch, "Batch size")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--heads", heads, "Heads (Q and KV)")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--tokens", tokens, "Sequence lengths")->check(CLI::Range(1, 1 << 20))->delimiter(',');
  app.add_option("--dims", dims, "Head dimensions (64, 128)")->delimiter(',');
  app.add_option("--causal", causal_modes, "no, yes or both")->delimiter(',')->check(CLI::IsMember({"no", "yes"}));
  app.add_option("--exp2", exp2_units,
                 "The kernels' exp2: poly5 (preset sage2-8b; rows lowbit, lowbit_e2e), sm90-ex2 (MUFU.EX2, preset "
                 "sage2-8b-ex2; rows lowbit_ex2, lowbit_ex2_e2e)")
      ->delimiter(',')
      ->check(CLI::IsMember(lowbit::attention::kernel_exp2_names()))
      ->capture_default_str();
  app.add_option("--schedule", schedules,
                 "The attention kernel's schedules (Sage2Schedule): serial, overlapped (rows lowbit..._overlapped, "
                 "timed beside the serial ones)")
      ->delimiter(',')
      ->check(CLI::IsMember({"serial", "overlapped"}))
      ->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed runs first")->check(CLI::Range(0, 100))->capture_default_str();
  app.add_option("--repeats", repeats, "Timed runs (the median is reported)")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--json", json, "Write the measurements as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  const auto gpu = kernels::first_gpu();
  if (!gpu) {
    fmt::print(stderr, "bench_attention: no GPU found (or no CUDA driver); skipped\n");
    return 77;
  }
  try {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    fmt::print("{:<12} {:>8} {:>4} {:>6} {:>7} {:>10} {:>8} {:>10} {:>8} {:>10}\n", "gpu", "exp2", "d", "causal", "n",
               "kernel ms", "TOPS", "e2e ms", "TOPS", "schedule");
    for (int d : dims)
      for (const auto& mode : causal_modes)
        for (int n : tokens)
          for (const auto& unit : exp2_units)
            for (const auto& schedule : schedules) {
            Sage2Problem p;
            p.exp2 = *lowbit::attention::kernel_exp2_unit(unit);
            p.schedule = *kernels::attention::parse_schedule(schedule);
            const bool ex2 = p.exp2 == lowbit::attention::steps::Exp2Unit::sm90_ex2;
            p.batch = batch;
            p.heads_q = p.heads_kv = heads;
            p.tokens = n;
            p.head_dim = d;
            p.causal = mode == "yes";
            if (auto why = p.validate()) throw std::invalid_argument(*why);
            const std::size_t count = p.elements(heads);
            Device<std::uint16_t> q(count), k(count), v(count), out(count);
            Device<float> lse(std::size_t(batch) * heads * n);
            const std::uint64_t seed = bench::attention_seed(d, p.causal, n);
            bench::fill_attention_inputs(p, q.p, k.p, v.p);
            kernels::attention::Sage2Workspace workspace(p);
            kernels::attention::sage2_quantize(p, q.p, k.p, v.p, workspace.buffers());
            const double kernel_ms = median_ms(warmup, repeats, [&] {
              kernels::attention::sage2_attention_quantized(p, workspace.buffers(), out.p, lse.p);
            });
            const double e2e_ms = median_ms(warmup, repeats, [&] {
              kernels::attention::sage2_attention(p, q.p, k.p, v.p, workspace, out.p, lse.p);
            });
            check_cuda(cudaDeviceSynchronize(), "bench_attention");
            const double ops = 4.0 * batch * heads * double(n) * double(n) * d / (p.causal ? 2 : 1);
            const double kernel_tops = ops / (kernel_ms * 1e-3) / 1e12, e2e_tops = ops / (e2e_ms * 1e-3) / 1e12;
            fmt::print("{:<12} {:>8} {:>4} {:>6} {:>7} {:>10.3f} {:>8.1f} {:>10.3f} {:>8.1f} {:>10}\n", gpu->name.substr(0, 12),
                       unit, d, mode, n, kernel_ms, kernel_tops, e2e_ms, e2e_tops, schedule);
            std::fflush(stdout);
            const std::string name = std::string(ex2 ? "lowbit_ex2" : "lowbit") + (schedule == "serial" ? "" : "_" + schedule);
            for (const auto& [kernel, ms, tops] : {std::tuple{name, kernel_ms, kernel_tops}, std::tuple{name + "_e2e", e2e_ms, e2e_tops}})
              rows.push_back({{"kernel", kernel}, {"d", d}, {"causal", p.causal}, {"n", n}, {"batch", batch}, {"heads", heads},
                              {"ms", ms}, {"tops", tops}, {"seed", seed}, {"schedule", schedule}});
            }
    if (!json.empty()) {
      Provenance prov = Provenance::current();
      prov.gpu = gpu->name;
      prov.gpu_driver = gpu->driver;
      prov.cuda_runtime = gpu->runtime;
      nlohmann::ordered_json doc{{"provenance", prov.to_json()},
                                 {"method", fmt::format("CUDA events around each run, median of {} after {} warm-up runs", repeats, warmup)},
                                 {"measurements", rows}};
      std::ofstream(json) << doc.dump(2) << "\n";
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_attention: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
