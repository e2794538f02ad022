#pragma once
#include <cstdint>
#include <string>

namespace cmha {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int i) { return {DeviceType::cuda, i}; }
  // "cpu", "cuda", "cuda:1"; anything else is a cmha::Error naming the text.
  static Device parse(const std::string& text);
  std::string str() const;
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool operator==(const Device&) const = default;
};

// Number of CUDA devices visible (0 when cmha was built without CUDA).
int cuda_device_count();

}  // namespace cmha
