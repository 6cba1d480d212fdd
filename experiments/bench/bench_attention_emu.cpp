// bench_attention_emu: the emulated attention pipelines' speed and memory, beside the float64
// reference in the same run.
//
// Per preset, one head of N = --tokens (4096) queries and keys, d = --dim (128), not causal,
// synthetic fp16 data: the exact multiply-accumulates forward() emulates (QK^T and P V together,
// ForwardResult::macs) per CPU second of the process with 1 thread ("per core"), and the speed-up
// from 1 to 2 threads: from CPU times (what two free cores would give: robust on a shared machine)
// and as measured in wall time, with the CPU-time ratio (1.0: the second thread added no work). The float64 reference runs on the same data, its rate counted with the same MACs. With
// --memory-tokens N (32768), sage2-8b and the reference each run once more at N tokens in a
// child process whose peak resident memory (getrusage) is reported.
// Writes bench_attention_emu.csv and .md (and the provenance JSON) under --out-dir.
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "emulation/attention/pipeline.hpp"
#include "experiments/common/results.hpp"
#include "numerics/attention_reference.hpp"
#include "numerics/synthetic.hpp"

using namespace lowbit;

namespace {

// CPU time of the process and of the calling thread, and wall time.
struct Clock {
  double cpu = 0, main_cpu = 0, wall = 0;
};

double seconds(clockid_t id) {
  timespec t{};
  clock_gettime(id, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

Clock now() {
  return {seconds(CLOCK_PROCESS_CPUTIME_ID), seconds(CLOCK_THREAD_CPUTIME_ID),
          std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count()};
}

Clock since(const Clock& start) {
  const Clock t = now();
  return {t.cpu - start.cpu, t.main_cpu - start.main_cpu, t.wall - start.wall};
}

// One head of the synthetic generator's data, rounded to fp16 (a model's activations).
struct Inputs {
  Tensor4 q, k, v;
};

Inputs make_inputs(int tokens, int dim, std::uint64_t seed) {
  SyntheticAttentionSpec s;
  s.heads = 1;
  s.tokens = tokens;
  s.dim = dim;
  s.seed = seed;
  const AttentionData d = make_synthetic_attention(s);
  Inputs in{Tensor4(1, 1, tokens, dim), Tensor4(1, 1, tokens, dim), Tensor4(1, 1, tokens, dim)};
  for (auto [t, m] : {std::pair{&in.q, &d.q[0]}, std::pair{&in.k, &d.k[0]}, std::pair{&in.v, &d.v[0]}})
    for (Eigen::Index i = 0; i < m->size(); ++i) t->values[std::size_t(i)] = float(_Float16(m->data()[i]));
  return in;
}

struct Row {
  std::string name;
  double macs = 0;
  Clock one = {}, two = {};
  double rate() const { return macs / one.cpu; }
  double speedup() const { return one.wall / two.wall; }
  // With 2 threads the calling thread runs the serial parts and its share of the blocks; the
  // other thread the rest. On two free cores the run takes the longer of the two: this speed-up
  // counts CPU time only, so other processes on the machine do not change it.
  double cpu_speedup() const { return one.cpu / std::max(two.main_cpu, two.cpu - two.main_cpu); }
  double cpu_ratio() const { return two.cpu / one.cpu; }
};

// Peak resident memory (MiB) of running `work` in a child process; -1 if it failed.
template <class Work>
double peak_memory_mib(Work&& work) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    work();
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const long kib = usage.ru_maxrss;
    if (write(fds[1], &kib, sizeof kib) != sizeof kib) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  long kib = -1;
  const bool read_ok = read(fds[0], &kib, sizeof kib) == sizeof kib;
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return read_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? double(kib) / 1024 : -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_attention_emu: emulated attention pipelines, MACs per CPU second, thread scaling, peak memory"};
  int tokens = 4096, dim = 128, memory_tokens = 32768;
  std::uint64_t seed = 1;
  std::string out_dir = "build/results";
  std::vector<std::string> names;
  for (const auto& p : attention::preset_list()) names.emplace_back(p.name);
  app.add_option("--tokens", tokens, "queries and keys per run")->capture_default_str()->check(CLI::Range(16, 1 << 20));
  app.add_option("--dim", dim, "head dimension")->capture_default_str()->check(CLI::Range(8, 256));
  app.add_option("--memory-tokens", memory_tokens, "tokens of the peak-memory runs (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--presets", names, "presets to time")->delimiter(',')->capture_default_str();
  app.add_option("--seed", seed, "synthetic data seed")->capture_default_str();
  app.add_option("--out-dir", out_dir, "where bench_attention_emu.csv and .md go")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    experiments::RunInfo run = experiments::RunInfo::from_args(argc, argv);
    run.seeds = {{"synthetic", seed}};
    run.formats = names;
    run.config = {{"tokens", tokens}, {"dim", dim}, {"heads", 1}, {"causal", false}, {"memory_tokens", memory_tokens}};
    const experiments::ResultDirectory folder(out_dir, run, "bench_attention_emu");
    const Inputs in = make_inputs(tokens, dim, seed);

    std::vector<Row> rows;
    for (const std::string& name : names) {
      const attention::Pipeline p = attention::preset(name, dim);
      Row row{name, 0};
      for (unsigned threads : {1u, 2u}) {
        const Clock start = now();
        const attention::ForwardResult r =
            attention::forward(p, in.q, in.k, in.v, {.threads = threads, .keep_operands = false});
        (threads == 1 ? row.one : row.two) = since(start);
        row.macs = double(r.macs);
      }
      fmt::print(stderr, "{}: {:.3g} MAC/s per core, 2 threads: {:.2f}x (CPU critical path), {:.2f}x (wall)\n", name,
                 row.rate(), row.cpu_speedup(), row.speedup());
      rows.push_back(row);
    }
    Row reference{"float64 reference", 2.0 * tokens * double(tokens) * dim};
    for (unsigned threads : {1u, 2u}) {
      const Clock start = now();
      reference_attention(in.q, in.k, in.v, {.threads = threads});
      (threads == 1 ? reference.one : reference.two) = since(start);
    }
    fmt::print(stderr, "reference: {:.3g} MAC/s per core\n", reference.rate());

    double sage_memory = -1, reference_memory = -1;
    if (memory_tokens > 0) {
      fmt::print(stderr, "peak memory at N = {} (sage2-8b, then the reference; minutes)\n", memory_tokens);
      sage_memory = peak_memory_mib([&] {
        const Inputs big = make_inputs(memory_tokens, dim, seed);
        attention::forward(attention::preset("sage2-8b", dim), big.q, big.k, big.v, {.keep_operands = false});
      });
      reference_memory = peak_memory_mib([&] {
        const Inputs big = make_inputs(memory_tokens, dim, seed);
        reference_attention(big.q, big.k, big.v);
      });
    }

    double load = 0;
    getloadavg(&load, 1);
    const Row* sage = nullptr;
    for (const Row& r : rows)
      if (r.name == "sage2-8b") sage = &r;
    std::string table = fmt::format(
        "One head, N = {} queries and keys, d = {}, not causal, synthetic fp16 data (seed {}). MAC/s: the exact "
        "multiply-accumulates\nforward() emulates (QK^T and P V) per CPU second with 1 thread. 2 threads: the "
        "speed-up on two free cores from CPU times\n(1-thread CPU time / the longer of the two threads' CPU times), the "
        "measured wall-time speed-up, and the CPU ratio\n(CPU time with 2 threads / 1 thread: the work added). The "
        "reference runs on the same data, rated with 2 N^2 d MACs.\nLoad average {:.2f} (the machine is shared: wall "
        "times suffer, CPU times much less).\n\n"
        "| pipeline | MACs | CPU s (1 thread) | MAC/s per core | vs reference | speed-up, CPU | wall s 1 / 2 threads "
        "| speed-up, wall | CPU ratio |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        tokens, dim, seed, load);
    std::string csv = "pipeline,macs,cpu_s_1,wall_s_1,cpu_s_2,main_thread_cpu_s_2,wall_s_2,macs_per_cpu_s,vs_reference,"
                      "speedup_2_threads_cpu,speedup_2_threads_wall,cpu_ratio_2_threads\n";
    for (const Row* r : [&] {
           std::vector<const Row*> all;
           for (const Row& x : rows) all.push_back(&x);
           all.push_back(&reference);
           return all;
         }()) {
      table += fmt::format("| {} | {:.4g} | {:.2f} | {:.3g} | {:.2f}x | {:.2f}x | {:.2f} / {:.2f} | {:.2f}x | {:.2f} |\n",
                           r->name, r->macs, r->one.cpu, r->rate(), r->rate() / reference.rate(), r->cpu_speedup(),
                           r->one.wall, r->two.wall, r->speedup(), r->cpu_ratio());
      csv += fmt::format("{},{:.0f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4g},{:.3f},{:.3f},{:.3f},{:.3f}\n",
                         experiments::csv_field(r->name), r->macs, r->one.cpu, r->one.wall, r->two.cpu, r->two.main_cpu,
                         r->two.wall, r->rate(), r->rate() / reference.rate(), r->cpu_speedup(), r->speedup(),
                         r->cpu_ratio());
    }
    std::string verdict = "\nTargets (sage2-8b):\n";
    if (sage) {
      verdict += fmt::format("- >= 2e8 MAC/s per core: {:.3g}, {}\n", sage->rate(), sage->rate() >= 2e8 ? "met" : "NOT met");
      verdict += fmt::format("- >= 1.8x from 2 threads: {:.2f}x on two free cores (CPU times), {}; measured wall "
                             "time {:.2f}x at load average {:.2f}\n",
                             sage->cpu_speedup(), sage->cpu_speedup() >= 1.8 ? "met" : "NOT met", sage->speedup(), load);
    }
    if (memory_tokens > 0) {
      verdict += fmt::format("- peak memory at N = {}, d = {}, one head (whole process: inputs, data generation, "
                             "outputs): sage2-8b {:.0f} MiB, {}; float64 reference {:.0f} MiB\n",
                             memory_tokens, dim, sage_memory, sage_memory >= 0 && sage_memory < 1024 ? "under 1 GB" : "NOT under 1 GB",
                             reference_memory);
      csv += fmt::format("# peak_memory_mib tokens={} sage2-8b={:.1f} reference={:.1f}\n", memory_tokens, sage_memory,
                         reference_memory);
    }
    fmt::print("{}{}", table, verdict);
    folder.csv("bench_attention_emu.csv", csv, {fmt::format("load_average={:.2f}", load)});
    folder.markdown("bench_attention_emu.md", "# bench_attention_emu\n\n`" + folder.run().machine.comment_line() +
                                                  "`, compiler " + folder.run().machine.compiler + "\n\n" + table + verdict);
    folder.write_provenance();
    fmt::print("wrote {}/bench_attention_emu.{{csv,md}}\n", out_dir);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_attention_emu: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
