#include "run/checkpoint.h"

#include "autograd/engine.h"
#include "tensor/safetensors.h"

namespace cmha::run {

namespace {
constexpr const char* kFormat = "cmha-checkpoint-1";
constexpr const char* kOptimizer = "optimizer.";
constexpr const char* kEma = "ema.";

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  std::map<std::string, Tensor> all;
  for (const auto& [k, t] : ckpt.weights) {
    CMHA_CHECK(!starts_with(k, kOptimizer) && !starts_with(k, kEma),
               "checkpoint '" + path + "': weight name '" + k + "' collides with the optimizer/ema prefixes");
    all[k] = t;
  }
  for (const auto& [k, t] : ckpt.optimizer) all[kOptimizer + k] = t;
  for (const auto& [k, t] : ckpt.ema) all[kEma + k] = t;
  save_safetensors(path, all, {{"format", kFormat}, {"recipe", ckpt.recipe}, {"trainer", ckpt.trainer.dump()}});
}

Checkpoint load_checkpoint(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  auto meta = [&](const char* key) -> const std::string& {
    auto it = f.metadata.find(key);
    CMHA_CHECK(it != f.metadata.end(), "'" + path + "' is not a cmha checkpoint: its metadata has no '" + key + "'");
    return it->second;
  };
  CMHA_CHECK(meta("format") == kFormat, "'" + path + "' has checkpoint format '" + meta("format") + "', expected '" +
                                            kFormat + "'");
  Checkpoint c;
  c.recipe = meta("recipe");
  try {
    c.trainer = nlohmann::json::parse(meta("trainer"));
  } catch (const nlohmann::json::exception& e) {
    throw Error("checkpoint '" + path + "': the trainer state is corrupt JSON: " + e.what());
  }
  CMHA_CHECK(c.trainer.is_object(), "checkpoint '" + path + "': the trainer state is not a JSON object");
  for (auto& [k, t] : f.tensors) {
    if (starts_with(k, kOptimizer)) c.optimizer[k.substr(10)] = t;
    else if (starts_with(k, kEma)) c.ema[k.substr(4)] = t;
    else c.weights[k] = t;
  }
  return c;
}

void restore_weights(const std::string& path, const std::map<std::string, Tensor>& source,
                     const std::map<std::string, Tensor>& params) {
  autograd::NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    auto it = source.find(name);
    CMHA_CHECK(it != source.end(), "checkpoint '" + path + "' has no tensor '" + name + "' that the model needs");
    CMHA_CHECK(it->second.shape() == p.shape(), "checkpoint '" + path + "': tensor '" + name + "' is " +
                                                   shape_str(it->second.shape()) + " but the model expects " +
                                                   shape_str(p.shape()));
    CMHA_CHECK(it->second.dtype() == DType::f32, "checkpoint '" + path + "': tensor '" + name + "' is " +
                                                     dtype_name(it->second.dtype()) + ", expected f32");
    Tensor dst = p;
    dst.copy_(it->second);
  }
  for (const auto& [name, t] : source)
    CMHA_CHECK(params.count(name), "checkpoint '" + path + "' holds tensor '" + name + "' that the model does not have");
}

}  // namespace cmha::run
