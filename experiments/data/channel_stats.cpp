// channel_stats: the channel and token statistics of Q, K and V that decide how they quantize
// (numerics/channel_stats.hpp defines each), per head and layer of captured activations
// (a folder of layerLL_{q,k,v}.npy, as experiments/data/capture_smollm2.py writes them) or of
// the synthetic generator at a preset. Writes stats.json (every head, every query/key pair, and
// quantiles over all of them) and stats.md (medians per layer and tensor).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "numerics/channel_stats.hpp"
#include "numerics/nonfinite.hpp"
#include "numerics/npy.hpp"
#include "numerics/provenance.hpp"
#include "numerics/synthetic.hpp"

using namespace lowbit;
namespace fs = std::filesystem;

namespace {

struct Layer {
  int index;
  std::vector<MatrixF> q, k, v;  // one [tokens x d] matrix per head
};

// [1, heads, tokens, d] (the capture's layout), [heads, tokens, d] or [tokens, d].
std::vector<MatrixF> read_heads(const fs::path& path) {
  const NpyArray a = read_npy(path.string());
  std::vector<std::size_t> shape = a.shape;
  if (shape.size() == 4 && shape[0] == 1) shape.erase(shape.begin());
  if (shape.size() == 2) shape.insert(shape.begin(), 1);
  if (shape.size() != 3)
    throw std::runtime_error(path.string() + ": shape has " + std::to_string(a.shape.size()) +
                             " dimensions; expected [1, heads, tokens, d], [heads, tokens, d] or [tokens, d]");
  const std::size_t heads = shape[0], tokens = shape[1], dim = shape[2];
  if (heads * tokens * dim == 0) throw std::runtime_error(path.string() + ": empty array");
  std::vector<MatrixF> out;
  for (std::size_t h = 0; h < heads; ++h) {
    const std::span<const float> head(a.data.data() + h * tokens * dim, tokens * dim);
    if (const NonFiniteReport bad = scan_nonfinite(head); bad.any())
      throw std::runtime_error(bad.describe(path.string() + " head " + std::to_string(h), dim));
    out.push_back(MatrixView<float>(head.data(), Eigen::Index(tokens), Eigen::Index(dim)));
  }
  return out;
}

std::vector<Layer> read_folder(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error(dir.string() + ": not a folder");
  const std::regex name(R"(layer(\d+)_q\.npy)");
  std::vector<Layer> layers;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, m, name)) continue;
    const std::string stem = "layer" + m[1].str();
    Layer l{std::stoi(m[1].str()), read_heads(entry.path()), read_heads(dir / (stem + "_k.npy")),
            read_heads(dir / (stem + "_v.npy"))};
    if (l.k.size() != l.v.size() || l.q.size() % l.k.size() != 0)
      throw std::runtime_error(stem + ": " + std::to_string(l.q.size()) + " query heads, " + std::to_string(l.k.size()) +
                               " key heads, " + std::to_string(l.v.size()) +
                               " value heads; need equal key and value heads and a multiple of them as query heads");
    layers.push_back(std::move(l));
  }
  if (layers.empty()) throw std::runtime_error(dir.string() + ": no layerLL_q.npy files");
  std::sort(layers.begin(), layers.end(), [](const Layer& a, const Layer& b) { return a.index < b.index; });
  return layers;
}

// Linear interpolation between order statistics (numpy's default).
double quantile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double pos = p * double(v.size() - 1);
  const auto lo = std::size_t(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

nlohmann::json quantiles(const std::vector<double>& v) {
  return {{"min", quantile(v, 0)},    {"p25", quantile(v, 0.25)}, {"median", quantile(v, 0.5)},
          {"p75", quantile(v, 0.75)}, {"max", quantile(v, 1)},    {"heads", v.size()}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"channel_stats: channel and token statistics of Q, K, V (numerics/channel_stats.hpp defines them)"};
  std::string dir, preset, out_dir = "build/results/channel-stats";
  std::optional<int> heads, tokens, dim;
  std::uint64_t seed = 1;
  auto* dir_opt = app.add_option("--dir", dir, "folder of layerLL_{q,k,v}.npy ([1, heads, tokens, d], float16/float32)");
  std::string preset_help = "statistics of the synthetic generator at this preset:";
  for (const SyntheticPreset& p : synthetic_presets()) preset_help += " " + std::string(p.name);
  app.add_option("--synthetic", preset, preset_help)->excludes(dir_opt);
  app.add_option("--heads", heads, "synthetic heads (default: the preset's)");
  app.add_option("--tokens", tokens, "synthetic tokens (default: the preset's)");
  app.add_option("--dim", dim, "synthetic head dimension (default: the preset's)");
  app.add_option("--seed", seed, "synthetic seed")->capture_default_str();
  app.add_option("--out", out_dir, "output folder")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    std::vector<Layer> layers;
    nlohmann::json source;
    if (!preset.empty()) {
      SyntheticAttentionSpec spec = synthetic_preset(preset);
      spec.heads = heads.value_or(spec.heads);
      spec.tokens = tokens.value_or(spec.tokens);
      spec.dim = dim.value_or(spec.dim);
      spec.seed = seed;
      AttentionData d = make_synthetic_attention(spec);
      layers.push_back({0, std::move(d.q), std::move(d.k), std::move(d.v)});
      source = {{"synthetic", spec.to_json()}};
    } else if (!dir.empty()) {
      layers = read_folder(dir);
      source = {{"folder", repository_relative(dir)}};
    } else {
      throw std::invalid_argument("give --dir FOLDER or --synthetic PRESET (see --help)");
    }

    nlohmann::json heads_json = nlohmann::json::array(), pairs_json = nlohmann::json::array();
    std::map<std::string, std::map<std::string, std::vector<double>>> all;                 // tensor -> key -> values
    std::map<int, std::map<std::string, std::map<std::string, std::vector<double>>>> by_layer;  // layer -> tensor -> ...
    std::map<std::string, std::map<std::string, int>> top_channels;  // tensor -> channel -> heads
    std::map<std::string, std::map<std::string, std::vector<std::vector<double>>>> profiles;  // tensor -> name -> heads
    for (const Layer& l : layers) {
      for (const auto& [tensor, mats] : {std::pair{"q", &l.q}, std::pair{"k", &l.k}, std::pair{"v", &l.v}})
        for (std::size_t h = 0; h < mats->size(); ++h) {
          const TensorStatistics s = tensor_statistics((*mats)[h]);
          nlohmann::json j{{"layer", l.index},
                           {"tensor", tensor},
                           {"head", h},
                           {"token_amax_argmax", s.token_amax_argmax},
                           {"channel_mean_argmax", s.channel_mean_argmax},
                           {"channel_mean_profile_top8",
                            std::vector<double>(s.channel_mean_profile.begin(),
                                                s.channel_mean_profile.begin() + std::min<std::ptrdiff_t>(8, std::ssize(s.channel_mean_profile)))}};
          ++top_channels[tensor][std::to_string(s.channel_mean_argmax)];
          profiles[tensor]["channel_mean_profile"].push_back(s.channel_mean_profile);
          profiles[tensor]["channel_std_profile"].push_back(s.channel_std_profile);
          for (const auto& f : tensor_statistic_fields()) {
            j[std::string(f.key)] = s.*f.member;
            all[tensor][std::string(f.key)].push_back(s.*f.member);
            by_layer[l.index][tensor][std::string(f.key)].push_back(s.*f.member);
          }
          heads_json.push_back(j);
        }
      const std::size_t group = l.q.size() / l.k.size();
      for (std::size_t h = 0; h < l.q.size(); ++h) {
        const PairStatistics s = pair_statistics(l.q[h], l.k[h / group]);
        nlohmann::json j{{"layer", l.index}, {"q_head", h}, {"kv_head", h / group}};
        for (const auto& f : pair_statistic_fields()) {
          j[std::string(f.key)] = s.*f.member;
          all["qk"][std::string(f.key)].push_back(s.*f.member);
          by_layer[l.index]["qk"][std::string(f.key)].push_back(s.*f.member);
        }
        pairs_json.push_back(j);
      }
      std::cerr << "layer " << l.index << " done\n";
    }

    nlohmann::json definitions, summary;
    for (const auto& f : tensor_statistic_fields()) definitions[std::string(f.key)] = f.description;
    for (const auto& f : pair_statistic_fields()) definitions[std::string(f.key)] = f.description;
    for (const auto& [tensor, keys] : all)
      for (const auto& [key, values] : keys) summary[tensor][key] = quantiles(values);
    // The channel with the largest mean, counted over heads, and the median profile: the median
    // over heads of the largest, second largest, ... |mu_c| / s and sigma_c / s.
    for (const auto& [tensor, counts] : top_channels) summary[tensor]["channel_mean_argmax_heads"] = counts;
    for (const auto& [tensor, named] : profiles)
      for (const auto& [name, per_head] : named) {
        std::vector<double> median_profile;
        for (std::size_t rank = 0; rank < per_head.front().size(); ++rank) {
          std::vector<double> at_rank;
          for (const auto& p : per_head)
            if (rank < p.size()) at_rank.push_back(p[rank]);
          median_profile.push_back(quantile(at_rank, 0.5));
        }
        summary[tensor][name + "_median"] = median_profile;
      }
    definitions["channel_mean_profile_median"] = "median over heads of the sorted |mean_c| / median_c std_c, largest first";
    definitions["channel_std_profile_median"] = "median over heads of the sorted std_c / median_c std_c, largest first";
    definitions["channel_mean_argmax_heads"] = "heads whose largest |mean_c| is at channel c, by c";

    const std::string command = [&] {
      std::string s;
      for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
      return s;
    }();
    const Provenance prov = Provenance::current();
    fs::create_directories(out_dir);
    nlohmann::json j{{"provenance", prov.to_json()}, {"command", command},   {"source", source},
                     {"definitions", definitions},   {"summary", summary},   {"heads", heads_json},
                     {"pairs", pairs_json}};
    std::ofstream(out_dir + "/stats.json") << j.dump(1) << "\n";

    // stats.md: one row per statistic, the median over heads per layer and tensor, then the
    // quartiles over every head of every layer.
    std::string md = "<!-- " + prov.comment_line() + " -->\n<!-- command: " + command + " -->\n";
    std::vector<std::string> tensor_keys, pair_keys;
    for (const auto& f : tensor_statistic_fields()) tensor_keys.emplace_back(f.key);
    for (const auto& f : pair_statistic_fields()) pair_keys.emplace_back(f.key);
    for (const std::string tensor : {"q", "k", "v", "qk"}) {
      const std::vector<std::string>& keys = tensor == "qk" ? pair_keys : tensor_keys;
      md += fmt::format("\n### {}: median over heads per layer; quartiles over all {} heads\n\n| statistic |",
                        tensor == "qk" ? "query head with its key head" : tensor, all[tensor][keys[0]].size());
      for (const Layer& l : layers) md += fmt::format(" layer {} |", l.index);
      md += " p25 | median | p75 |\n|---|";
      for (std::size_t i = 0; i < layers.size() + 3; ++i) md += "---|";
      md += "\n";
      for (const std::string& key : keys) {
        const std::vector<double>& values = all[tensor][key];
        md += "| " + key + " |";
        for (const Layer& l : layers) md += fmt::format(" {:.3g} |", quantile(by_layer[l.index][tensor][key], 0.5));
        md += fmt::format(" {:.3g} | {:.3g} | {:.3g} |\n", quantile(values, 0.25), quantile(values, 0.5),
                          quantile(values, 0.75));
      }
    }
    std::ofstream(out_dir + "/stats.md") << md;
    std::cout << md << "\nwrote " << out_dir << "/{stats.json, stats.md}\n";
  } catch (const std::exception& e) {
    std::cerr << "channel_stats: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
