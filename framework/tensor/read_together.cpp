#include "tensor/read_together.h"

#include <map>
#include <utility>

#include "tensor/error.h"

namespace cmha {

std::vector<Tensor> read_together(const std::vector<Tensor>& xs) {
  std::vector<Tensor> out(xs.size());
  // The device tensors by (device, dtype), in order.
  std::map<std::pair<std::string, DType>, std::vector<size_t>> groups;
  for (size_t i = 0; i < xs.size(); ++i) {
    CMHA_CHECK(xs[i].defined(), "read_together: tensor " + std::to_string(i) + " is undefined");
    if (xs[i].device().is_cpu()) out[i] = xs[i];
    else groups[{xs[i].device().str(), xs[i].dtype()}].push_back(i);
  }
  for (const auto& [key, members] : groups) {
    const Tensor& first = xs[members.front()];
    int64_t total = 0;
    for (size_t i : members) total += xs[i].numel();
    // [total]: the tensors' elements one after the other, copied on the device.
    Tensor buffer = Tensor::empty({total}, first.dtype(), first.device());
    int64_t at = 0;
    for (size_t i : members) {
      const int64_t n = xs[i].numel();
      if (n > 0) buffer.narrow(0, at, n).copy_(xs[i].detach().reshape({n}));
      at += n;
    }
    const Tensor host = buffer.to(Device::cpu());  // the one wait
    at = 0;
    for (size_t i : members) {
      const int64_t n = xs[i].numel();
      out[i] = host.narrow(0, at, n).reshape(xs[i].shape());
      at += n;
    }
  }
  return out;
}

}  // namespace cmha
