#include "optim/optimizer.h"

#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/error.h"

namespace cmha::optim {
namespace {

AdamOptions adam_options(const OptimizerOptions& o, bool decoupled) {
  CMHA_CHECK(o.betas.size() == 2, "optim.betas needs two numbers, got " + std::to_string(o.betas.size()));
  AdamOptions a;
  a.lr = o.lr;
  a.beta1 = o.betas[0];
  a.beta2 = o.betas[1];
  a.eps = o.eps;
  a.weight_decay = o.weight_decay;
  a.decoupled_weight_decay = decoupled;
  return a;
}

SgdOptions sgd_options(const OptimizerOptions& o) {
  SgdOptions s;
  s.lr = o.lr;
  s.momentum = o.momentum;
  s.nesterov = o.nesterov;
  s.weight_decay = o.weight_decay;
  return s;
}

}  // namespace

std::vector<OptimParam> all_with_weight_decay(const std::vector<Tensor>& tensors) {
  std::vector<OptimParam> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back({t, true});
  return out;
}

void Optimizer::zero_grad() {
  for (OptimParam& p : params_) p.tensor.zero_grad();
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, std::vector<OptimParam> params) {
  const std::string& name = options.name;
  if (name == "adam") return std::make_unique<Adam>(std::move(params), adam_options(options, false));
  if (name == "adamw") return std::make_unique<Adam>(std::move(params), adam_options(options, true));
  if (name == "sgd") return std::make_unique<SGD>(std::move(params), sgd_options(options));
  throw Error("unknown optimiser '" + name + "' (known: adam, adamw, sgd)");
}

}  // namespace cmha::optim
