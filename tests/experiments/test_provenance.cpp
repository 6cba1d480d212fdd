// Provenance records the files a result was made from relative to the repository root when they
// lie inside it (the committed sample reads "experiments/data/..." on every checkout) and as given
// when they do not (a user's own data): repository_relative() on a made-up root, on this checkout
// (relative paths resolved against the current folder), and through RunInfo's provenance.json.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "experiments/common/results.hpp"
#include "numerics/provenance.hpp"

namespace fs = std::filesystem;
using lowbit::repository_relative;

namespace {

// Runs in `dir` for its lifetime, then back where it was.
class InFolder {
 public:
  explicit InFolder(const fs::path& dir) : before_(fs::current_path()) { fs::current_path(dir); }
  ~InFolder() { fs::current_path(before_); }
  InFolder(const InFolder&) = delete;
  InFolder& operator=(const InFolder&) = delete;

 private:
  fs::path before_;
};

}  // namespace

TEST_CASE("repository_relative: inside the root relative to it, outside as given", "[provenance]") {
  const fs::path root = "/srv/checkout";
  CHECK(repository_relative("/srv/checkout/experiments/data/smollm2-135m/layer00_q.npy", root) ==
        "experiments/data/smollm2-135m/layer00_q.npy");
  CHECK(repository_relative("/srv/checkout/experiments/data/smollm2-135m", root) == "experiments/data/smollm2-135m");
  CHECK(repository_relative("/srv/checkout//experiments/./data/../data/q.npy", root) == "experiments/data/q.npy");
  CHECK(repository_relative("/srv/checkout/model.safetensors:layers.0.q", root) == "model.safetensors:layers.0.q");
  CHECK(repository_relative("/srv/checkout/experiments/q.npy", "/srv/checkout/") == "experiments/q.npy");

  CHECK(repository_relative("/home/someone/data/q.npy", root) == "/home/someone/data/q.npy");
  CHECK(repository_relative("/srv/checkout-old/q.npy", root) == "/srv/checkout-old/q.npy");  // a prefix, not a parent
  CHECK(repository_relative("/srv/checkout/../elsewhere/q.npy", root) == "/srv/checkout/../elsewhere/q.npy");
  CHECK(repository_relative("data/q.npy", root) == "data/q.npy");  // relative to a folder outside the root
  CHECK(repository_relative("", root).empty());
}

TEST_CASE("repository_relative: this checkout, relative paths from the current folder", "[provenance]") {
  const fs::path root = LOWBIT_SOURCE_DIR;
  CHECK(lowbit::repository_root() == root);
  CHECK(repository_relative((root / "experiments/data/smollm2-135m").string()) == "experiments/data/smollm2-135m");
  const InFolder in_experiments(root / "experiments");
  CHECK(repository_relative("data/smollm2-135m/layer00_q.npy") == "experiments/data/smollm2-135m/layer00_q.npy");
  CHECK(repository_relative("../plots/plot_run.py") == "plots/plot_run.py");
  CHECK(repository_relative("../../elsewhere/q.npy") == "../../elsewhere/q.npy");
}

TEST_CASE("provenance.json's inputs: the repository's files relative, others as given", "[provenance]") {
  lowbit::experiments::RunInfo run;
  run.inputs = {std::string(LOWBIT_SOURCE_DIR) + "/experiments/data/smollm2-135m/layer29_v.npy", "/home/someone/k.npy"};
  CHECK(run.to_json().at("inputs") ==
        nlohmann::json(std::vector<std::string>{"experiments/data/smollm2-135m/layer29_v.npy", "/home/someone/k.npy"}));
}
