#include "train/device.h"

#include "backend/kernels.h"
#include "tensor/error.h"

namespace cmha::train {

Device recipe_device(const Recipe& recipe) {
  const std::string text = recipe.string("train.device");
  return checked_device(text, "train.device=" + text);
}

Device checked_device(const std::string& text, const std::string& what) {
  Device device;
  try {
    device = Device::parse(text);
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
  backend::require_device(device, what);
  return device;
}

}  // namespace cmha::train
