#pragma once
#include <cstddef>
#include <memory>

#include "tensor/device.h"

namespace cmha {

// A block of device memory shared by every tensor that views it.
// CPU blocks are 64-byte aligned (one cache line, one AVX-512 vector).
class Storage {
 public:
  static constexpr size_t kAlignment = 64;
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
};

}  // namespace cmha
