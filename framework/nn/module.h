#pragma once
// nn::Module: a tree of named parameters and sub-modules with PyTorch-style
// dotted names ("decoder.layers.2.cross_attn.query.weight"), train/eval
// mode, state dicts and a shared random generator for dropout.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace cmha::nn {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter once (tied parameters are listed under their first name), in registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;
  // Every name, tied parameters under each of their names (as PyTorch's state_dict).
  std::map<std::string, Tensor> state_dict() const;
  // Copies values into the parameters. Missing or unexpected names and shape
  // mismatches are one error listing them; `strict=false` ignores unexpected names.
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);

  // Moves every parameter to `device`, in place (Tensor::move_to_), so the
  // layers' own handles follow. Build on the CPU (the initialisers draw the
  // same numbers on every device), then move.
  void to(Device device);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // The generator used by dropout layers below this module.
  void set_generator(std::shared_ptr<Generator> gen);
  Generator& generator(const char* who) const;

  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

 protected:
  // Registers a parameter (marks it requires_grad) and returns it.
  Tensor register_parameter(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::shared_ptr<Generator> gen_;
};

}  // namespace cmha::nn
