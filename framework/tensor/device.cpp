#include "tensor/device.h"

#include <charconv>

#include "tensor/error.h"

namespace cmha {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    int idx = -1;
    const char* b = text.data() + 5;
    const char* e = text.data() + text.size();
    auto r = std::from_chars(b, e, idx);
    if (r.ec == std::errc() && r.ptr == e && idx >= 0) return cuda(idx);
  }
  throw Error("unknown device '" + text + "': expected 'cpu', 'cuda' or 'cuda:N'");
}

std::string Device::str() const {
  return type == DeviceType::cpu ? "cpu" : "cuda:" + std::to_string(index);
}

#ifndef CMHA_WITH_CUDA
int cuda_device_count() { return 0; }
#endif

}  // namespace cmha
