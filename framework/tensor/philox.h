#pragma once
// Philox4x32-10 (Salmon et al. 2011, "Parallel random numbers: as easy as 1,
// 2, 3"), the one generator of cmha, as a function that the CPU and the CUDA
// kernels share (tensor/rng.h wraps it for host code). Every device draws the
// same bits for a (counter, key).
#include <cstdint>

#include "tensor/host_device.h"

namespace cmha {

struct PhiloxWords {
  uint32_t w[4];
};

// Ten rounds on counter (c0, c1, c2, c3) with key (k0, k1).
CMHA_HOST_DEVICE PhiloxWords philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                           uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// The four words of 64-bit counter c (c2 = c3 = 0) of the stream with key (k0, k1).
CMHA_HOST_DEVICE PhiloxWords philox_counter(uint64_t c, uint32_t k0, uint32_t k1) {
  return philox4x32_10(static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0u, 0u, k0, k1);
}

// Uniform in [0, 1) with 24 random bits.
CMHA_HOST_DEVICE float philox_unit(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }

}  // namespace cmha
