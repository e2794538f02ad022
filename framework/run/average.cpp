#include "run/average.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <regex>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace cmha::run {

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

}  // namespace cmha::run
