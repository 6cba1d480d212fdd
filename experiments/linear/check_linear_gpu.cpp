// check_linear_gpu: the intra-chunk GLA kernels (kernels/linear/gla_intra.hpp) on the GPU against
// their emulation, bit for bit, and their speed side by side in one run.
//
// For each shape (d_k, d_v) it makes synthetic Q, K, V (numerics/synthetic, the default preset) and
// GLA gates (tau 16), runs every kernel (bf16, int8-smooth, bf16-fp8, int8-smooth-fp8), compares the
// intra-chunk output and P of the first --check-heads heads with linear::intra_chunk of the kernel's
// preset (every bit), then times each kernel (CUDA events, --reps launches after 3 warm-up
// launches). It prints a table and writes OUT/gpu.csv and OUT/gpu.json. A mismatch is counted by
// stage, as verification/gla_compare.hpp compares: P in the diagonal blocks, P in the strips, and
// the output of chunks whose P is equal; the first
// --keep mismatching chunks of each kernel and shape are kept as .npy (the chunk's q, k, v,
// log_alpha and both sides' P and output) under OUT/failing/, enough to replay the chunk offline.
// Exit status: 0 all bits equal, 1 a mismatch or an error, 77 no GPU (skipped).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cuda_runtime.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "emulation/linear/gla.hpp"
#include "kernels/device.hpp"
#include "kernels/linear/gla_intra.hpp"
#include "numerics/gates.hpp"
#include "numerics/npy.hpp"
#include "numerics/provenance.hpp"
#include "numerics/synthetic.hpp"
#include "verification/gla_compare.hpp"

using namespace lowbit;

namespace {

struct Shape {
  int dk, dv;
};

Shape parse_shape(const std::string& text) {
  int dk = 0, dv = 0;
  char x = 0;
  std::istringstream in(text);
  if (!(in >> dk >> x >> dv) || x != 'x' || !in.eof())
    throw std::invalid_argument("--shapes: '" + text + "' is not DKxDV (e.g. 128x256)");
  return {dk, dv};
}

template <class T>
struct DeviceBuffer {
  T* data = nullptr;
  std::size_t size = 0;
  explicit DeviceBuffer(std::size_t n) : size(n) {
    kernels::check_cuda(cudaMalloc(&data, n * sizeof(T)), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<T>& host) {
    kernels::check_cuda(cudaMemcpy(data, host.data(), size * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  std::vector<T> download() const {
    std::vector<T> host(size);
    kernels::check_cuda(cudaMemcpy(host.data(), data, size * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return host;
  }
};

std::vector<float> flatten(const std::vector<MatrixF>& heads) {
  std::vector<float> out;
  for (const MatrixF& m : heads) out.insert(out.end(), m.data(), m.data() + m.size());
  return out;
}

// Multiply-adds of the intra-chunk work per chunk, as the kernel issues it: the inter-sub-chunk score
// blocks (16 x 16 x d_k each), the diagonal blocks (lower triangles, fp32), P V (64 x 64 x d_v).
double macs_per_chunk(int dk, int dv) {
  constexpr int C = kernels::kGlaChunk, c = kernels::kGlaSubChunk, n = C / c;
  return double(n * (n - 1) / 2) * c * c * dk + double(n) * c * (c + 1) / 2 * dk + double(C) * C * dv;
}

// One kernel and shape: the comparison with the emulation (verification/gla_compare.hpp), the
// chunks kept, and the speed.
struct Row : verification::GlaComparison {
  Shape shape;
  std::string kernel;
  std::size_t chunks_kept = 0;
  double ms = 0, tflops = 0, speedup = 0;
};

// The first mismatching chunks of head h as .npy files under OUT/failing/ (at most keep per row).
void keep_failing(Row& row, int h, int keep, const std::string& out, const MatrixF& q, const MatrixF& k,
                  const MatrixF& v, const MatrixF& log_alpha, const linear::IntraResult& emu,
                  const std::vector<float>& gpu_scores, const std::vector<float>& gpu_intra) {
  constexpr int C = kernels::kGlaChunk;
  const Eigen::Index tokens = q.rows(), dv = v.cols();
  const std::string dir = out + "/failing";
  for (Eigen::Index first = 0; first < tokens && row.chunks_kept < std::size_t(keep); first += C) {
    const float* gs = gpu_scores.data() + (std::size_t(h) * std::size_t(tokens) + std::size_t(first)) * C;
    const float* gi = gpu_intra.data() + (std::size_t(h) * std::size_t(tokens) + std::size_t(first)) * std::size_t(dv);
    if (!verification::gla_chunk_differs(emu, first, gs, gi)) continue;
    std::filesystem::create_directories(dir);
    const std::string stem = fmt::format("{}/{}x{}-{}-head{}-token{}-", dir, q.cols(), dv, row.kernel, h, first);
    const auto rows_of = [&](const MatrixF& m, const char* name) {
      const MatrixF block = m.middleRows(first, C);  // row-major copy of the chunk
      write_npy(stem + name + ".npy", {std::size_t(C), std::size_t(m.cols())},
                std::span<const float>(block.data(), std::size_t(block.size())));
    };
    rows_of(q, "q");
    rows_of(k, "k");
    rows_of(v, "v");
    rows_of(log_alpha, "log_alpha");
    rows_of(emu.scores, "scores_emulation");
    rows_of(emu.intra, "intra_emulation");
    write_npy(stem + "scores_gpu.npy", {std::size_t(C), std::size_t(C)}, std::span<const float>(gs, std::size_t(C * C)));
    write_npy(stem + "intra_gpu.npy", {std::size_t(C), std::size_t(dv)}, std::span<const float>(gi, std::size_t(C * dv)));
    ++row.chunks_kept;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"check_linear_gpu: the intra-chunk GLA kernels against their emulation, bit for bit, and their speed"};
  int heads = 16, tokens = 4096, check_heads = 2, reps = 20, keep = 2;
  std::uint64_t seed = 1;
  std::vector<std::string> shape_names{"64x64", "128x128", "128x256"};
  std::string out = "build/results/linear-gpu";
  app.add_option("--heads", heads, "heads (batch x heads) per launch")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--tokens", tokens, "tokens per head (a multiple of 64)")->check(CLI::Range(64, 1 << 20))->capture_default_str();
  app.add_option("--check-heads", check_heads, "heads compared with the emulation (0: none)")->check(CLI::Range(0, 4096))->capture_default_str();
  app.add_option("--keep", keep, "mismatching chunks kept as .npy per kernel and shape")->check(CLI::Range(0, 1000))->capture_default_str();
  app.add_option("--reps", reps, "timed launches per kernel")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--seed", seed, "data and gate seed")->capture_default_str();
  app.add_option("--shapes", shape_names, "DKxDV shapes: 64x64, 128x128, 128x256")->delimiter(',')->capture_default_str();
  app.add_option("--out", out, "output folder")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    std::vector<Shape> shapes;
    for (const std::string& s : shape_names) shapes.push_back(parse_shape(s));
    for (const Shape& s : shapes)
      if (auto why = kernels::GlaIntraShape{heads, tokens, s.dk, s.dv}.validate()) throw std::invalid_argument(*why);
    const auto gpu = kernels::first_gpu();
    if (!gpu) {
      std::cout << "check_linear_gpu: no GPU: skipped\n";
      return 77;
    }
    std::cout << "GPU: " << gpu->name << " (" << gpu->arch << "), driver " << gpu->driver << "\n";
    check_heads = std::min(check_heads, heads);
    std::vector<Row> rows;
    bool all_equal = true;
    for (const Shape& shape : shapes) {
      SyntheticAttentionSpec spec;
      spec.heads = heads;
      spec.tokens = tokens;
      spec.dim = shape.dk;
      spec.seed = seed;
      const AttentionData qk = make_synthetic_attention(spec);
      spec.dim = shape.dv;
      spec.seed = seed + 1000;
      const AttentionData vdata = make_synthetic_attention(spec);
      SyntheticGateSpec gates;
      gates.seed = seed;
      const std::vector<MatrixF> log_alpha = make_log_gates(gates, heads, tokens, shape.dk);

      const std::size_t nk = std::size_t(heads) * tokens * shape.dk, nv = std::size_t(heads) * tokens * shape.dv;
      DeviceBuffer<float> q(nk), k(nk), v(nv), a(nk), intra(nv), scores(std::size_t(heads) * tokens * kernels::kGlaChunk);
      q.upload(flatten(qk.q));
      k.upload(flatten(qk.k));
      v.upload(flatten(vdata.v));
      a.upload(flatten(log_alpha));
      const kernels::GlaIntraShape gs{heads, tokens, shape.dk, shape.dv};
      double bf16_ms = 0;
      for (kernels::GlaIntraKernel kernel : kernels::kGlaIntraKernels) {
        Row row;
        row.shape = shape;
        row.kernel = std::string(kernels::preset_of(kernel));
        kernels::launch_gla_intra(kernel, gs, q.data, k.data, v.data, a.data, intra.data, scores.data);
        kernels::check_cuda(cudaDeviceSynchronize(), "gla_intra");
        const std::vector<float> gpu_intra = intra.download(), gpu_scores = scores.download();
        const linear::Pipeline pipeline =
            linear::preset(kernels::preset_of(kernel), {kernels::kGlaChunk, kernels::kGlaSubChunk});
        for (int h = 0; h < check_heads; ++h) {
          const linear::IntraResult emu = linear::intra_chunk(pipeline, qk.q[std::size_t(h)], qk.k[std::size_t(h)],
                                                              vdata.v[std::size_t(h)], log_alpha[std::size_t(h)]);
          verification::compare_gla_head(row, h, emu, gpu_scores, gpu_intra);
          if (row.chunks_kept < std::size_t(keep))
            keep_failing(row, h, keep, out, qk.q[std::size_t(h)], qk.k[std::size_t(h)], vdata.v[std::size_t(h)],
                         log_alpha[std::size_t(h)], emu, gpu_scores, gpu_intra);
        }
        if (row.score_mismatches || row.intra_mismatches) all_equal = false;

        cudaEvent_t start, stop;
        kernels::check_cuda(cudaEventCreate(&start), "cudaEventCreate");
        kernels::check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
        for (int i = 0; i < 3; ++i) kernels::launch_gla_intra(kernel, gs, q.data, k.data, v.data, a.data, intra.data, scores.data);
        kernels::check_cuda(cudaEventRecord(start), "cudaEventRecord");
        for (int i = 0; i < reps; ++i) kernels::launch_gla_intra(kernel, gs, q.data, k.data, v.data, a.data, intra.data, scores.data);
        kernels::check_cuda(cudaEventRecord(stop), "cudaEventRecord");
        kernels::check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        kernels::check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        row.ms = ms / reps;
        row.tflops = 2 * macs_per_chunk(shape.dk, shape.dv) * (double(heads) * tokens / kernels::kGlaChunk) / (row.ms * 1e-3) / 1e12;
        if (kernel == kernels::GlaIntraKernel::bf16) bf16_ms = row.ms;
        row.speedup = bf16_ms / row.ms;
        rows.push_back(row);
      }
    }

    std::string table = fmt::format(
        "\n{} heads x {} tokens, chunk {}, sub-chunk {}; bits compared on {} heads; {} timed launches\n\n"
        "| d_k x d_v | kernel (preset) | values compared | P mismatches (diagonal / strips) | output mismatches "
        "(where P equal) | chunks mismatching / checked | ms / launch | TFLOPS (intra-chunk MACs x 2) | "
        "speed vs bf16 |\n|---|---|---|---|---|---|---|---|---|\n",
        heads, tokens, kernels::kGlaChunk, kernels::kGlaSubChunk, check_heads, reps);
    for (const Row& r : rows)
      table += fmt::format("| {}x{} | {} | {} | {} ({} / {}) | {} ({}) | {} / {} | {:.4f} | {:.1f} | {:.2f}x |\n",
                           r.shape.dk, r.shape.dv, r.kernel, r.checked, r.score_mismatches, r.diagonal_mismatches,
                           r.strip_mismatches, r.intra_mismatches, r.pv_only_mismatches, r.chunks_mismatching,
                           r.chunks_checked, r.ms, r.tflops, r.speedup);
    std::cout << table;
    for (const Row& r : rows)
      if (!r.first_mismatch.empty()) std::cout << "first mismatch, " << r.kernel << " " << r.shape.dk << "x" << r.shape.dv << ": " << r.first_mismatch << "\n";

    std::filesystem::create_directories(out);
    Provenance prov = Provenance::current();
    prov.gpu = gpu->name;
    prov.gpu_driver = gpu->driver;
    prov.cuda_runtime = gpu->runtime;
    std::ofstream csv(out + "/gpu.csv");
    csv << "dk,dv,kernel,values_compared,score_mismatches,diagonal_mismatches,strip_mismatches,intra_mismatches,"
           "intra_mismatches_p_equal,chunks_checked,chunks_mismatching,ms,tflops,speedup_vs_bf16\n";
    nlohmann::json j = nlohmann::json::array();
    for (const Row& r : rows) {
      csv << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{:.6f},{:.3f},{:.4f}\n", r.shape.dk, r.shape.dv, r.kernel,
                         r.checked, r.score_mismatches, r.diagonal_mismatches, r.strip_mismatches, r.intra_mismatches,
                         r.pv_only_mismatches, r.chunks_checked, r.chunks_mismatching, r.ms, r.tflops, r.speedup);
      j.push_back({{"dk", r.shape.dk}, {"dv", r.shape.dv}, {"kernel", r.kernel}, {"values_compared", r.checked},
                   {"score_mismatches", r.score_mismatches}, {"diagonal_mismatches", r.diagonal_mismatches},
                   {"strip_mismatches", r.strip_mismatches}, {"intra_mismatches", r.intra_mismatches},
                   {"intra_mismatches_p_equal", r.pv_only_mismatches}, {"chunks_checked", r.chunks_checked},
                   {"chunks_mismatching", r.chunks_mismatching}, {"chunks_kept", r.chunks_kept},
                   {"first_mismatch", r.first_mismatch}, {"ms", r.ms}, {"tflops", r.tflops}, {"speedup_vs_bf16", r.speedup}});
    }
    std::string command;
    for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
    std::ofstream(out + "/gpu.json") << nlohmann::json{{"provenance", prov.to_json()}, {"command", command},
                                                       {"heads", heads}, {"tokens", tokens}, {"check_heads", check_heads},
                                                       {"keep", keep}, {"reps", reps}, {"seed", seed}, {"rows", j}}.dump(2)
                                     << "\n";
    std::cout << "wrote " << out << "/gpu.csv, gpu.json\n";
    return all_equal ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "check_linear_gpu: error: " << e.what() << "\n";
    return 1;
  }
}
