#include "train/average.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <regex>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace cmha::train {

Checkpoint average_checkpoints(const std::vector<std::string>& paths) {
  CMHA_CHECK(!paths.empty(), "average: no checkpoints given");
  autograd::NoGradGuard no_grad;
  Checkpoint first = load_checkpoint(paths.front());
  std::map<std::string, Tensor> sum;
  for (auto& [name, t] : first.weights) sum[name] = t.to(DType::f32).clone();
  Checkpoint last = first;
  for (size_t i = 1; i < paths.size(); ++i) {
    Checkpoint c = load_checkpoint(paths[i]);
    for (auto& [name, t] : c.weights) {
      auto it = sum.find(name);
      CMHA_CHECK(it != sum.end(), "average: '" + paths[i] + "' has tensor '" + name + "' that '" + paths.front() +
                                      "' lacks");
      CMHA_CHECK(it->second.shape() == t.shape(), "average: tensor '" + name + "' is " + shape_str(t.shape()) +
                                                      " in '" + paths[i] + "' but " + shape_str(it->second.shape()) +
                                                      " in '" + paths.front() + "'");
      it->second = add(it->second, t.to(DType::f32));
    }
    CMHA_CHECK(c.weights.size() == sum.size(), "average: '" + paths[i] + "' lacks some of the tensors of '" +
                                                    paths.front() + "'");
    last = std::move(c);
  }
  Checkpoint out;
  out.recipe = last.recipe;
  out.trainer = last.trainer;
  out.trainer["averaged_from"] = paths;
  const float inv = 1.0f / static_cast<float>(paths.size());
  for (auto& [name, t] : sum) out.weights[name] = mul_scalar(t, inv);
  return out;
}

std::vector<std::string> update_checkpoints(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::vector<std::pair<int64_t, std::string>> found;
  if (fs::is_directory(run_dir)) {
    static const std::regex pattern(R"(checkpoint_(\d+)\.safetensors)");
    for (const auto& e : fs::directory_iterator(run_dir)) {
      std::smatch m;
      const std::string name = e.path().filename().string();
      int64_t update = 0;
      // A number past int64 (checkpoint_99999999999999999999) is no checkpoint of ours: skipped, not thrown.
      if (std::regex_match(name, m, pattern) &&
          std::from_chars(&*m[1].first, &*m[1].first + m[1].length(), update).ec == std::errc())
        found.emplace_back(update, e.path().string());
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::vector<std::string> last_checkpoints(const std::string& run_dir, int n) {
  CMHA_CHECK(std::filesystem::is_directory(run_dir), "average: run directory '" + run_dir + "' does not exist");
  std::vector<std::string> all = update_checkpoints(run_dir);
  CMHA_CHECK(static_cast<int>(all.size()) >= n, "average: '" + run_dir + "' holds " + std::to_string(all.size()) +
                                                    " update checkpoints, fewer than the " + std::to_string(n) +
                                                    " asked for");
  return {all.end() - n, all.end()};
}

}  // namespace cmha::train
