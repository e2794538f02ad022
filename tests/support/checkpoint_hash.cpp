#include "support/checkpoint_hash.h"

#include <sstream>

#include "tensor/safetensors.h"

namespace cmha::test {

std::string checkpoint_hash(const std::string& path) {
  const SafetensorsFile f = load_safetensors(path);
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const auto& [name, t] : f.tensors) {
    mix(name.data(), name.size());
    const std::string dt = dtype_name(t.dtype());
    mix(dt.data(), dt.size());
    mix(t.shape().data(), t.shape().size() * sizeof(int64_t));
    mix(t.raw_data(), t.nbytes());
  }
  const auto trainer = f.metadata.find("trainer");
  if (trainer != f.metadata.end() && trainer->second.find("averaged_from") == std::string::npos)
    mix(trainer->second.data(), trainer->second.size());
  std::ostringstream s;
  s << std::hex << h;
  return s.str();
}

}  // namespace cmha::test
