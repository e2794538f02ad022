#include "nn/module.h"

#include <set>

#include "autograd/engine.h"

namespace cmha::nn {

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_)
    if (child) child->collect(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> all, unique;
  collect("", all);
  std::set<TensorImpl*> seen;
  for (auto& [name, t] : all)
    if (seen.insert(t.impl_ptr().get()).second) unique.emplace_back(name, t);
  return unique;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> all;
  collect("", all);
  return {all.begin(), all.end()};
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  autograd::NoGradGuard no_grad;
  std::vector<std::pair<std::string, Tensor>> all;
  collect("", all);
  std::string missing, mismatched, unexpected;
  std::set<std::string> known;
  for (auto& [name, t] : all) {
    known.insert(name);
    auto it = state.find(name);
    if (it == state.end()) {
      missing += (missing.empty() ? "" : ", ") + name;
      continue;
    }
    if (it->second.shape() != t.shape()) {
      mismatched += (mismatched.empty() ? "" : ", ") + name + " (have " + shape_str(t.shape()) + ", got " +
                    shape_str(it->second.shape()) + ")";
      continue;
    }
    Tensor dst = t;
    dst.copy_(it->second);
  }
  if (strict)
    for (auto& [name, t] : state)
      if (!known.count(name)) unexpected += (unexpected.empty() ? "" : ", ") + name;
  std::string msg;
  if (!missing.empty()) msg += "missing parameters: " + missing;
  if (!mismatched.empty()) msg += std::string(msg.empty() ? "" : "; ") + "shape mismatches: " + mismatched;
  if (!unexpected.empty()) msg += std::string(msg.empty() ? "" : "; ") + "unexpected parameters: " + unexpected;
  CMHA_CHECK(msg.empty(), "load_state_dict: " + msg);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_)
    if (child) child->train(on);
}

void Module::set_generator(std::shared_ptr<Generator> gen) {
  gen_ = gen;
  for (auto& [name, child] : children_)
    if (child) child->set_generator(gen);
}

Generator& Module::generator(const char* who) const {
  CMHA_CHECK(gen_ != nullptr, std::string(who) + ": no random generator set; call set_generator() on the model "
                                                 "before training with dropout");
  return *gen_;
}

void Module::to(Device device) {
  for (auto& [name, p] : named_parameters()) {
    Tensor t = p;
    t.move_to_(device);
  }
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  if (!t.requires_grad()) t.set_requires_grad(true);
  params_.emplace_back(name, t);
  return t;
}

}  // namespace cmha::nn
