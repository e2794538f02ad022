#pragma once
// Philox4x32-10 (Salmon et al. 2011, "Parallel random numbers: as easy as 1,
// 2, 3"), the one generator of cmha, as a function that the CPU and the CUDA
// kernels share (tensor/rng.h wraps it for host code). Every device draws the
// same bits for a (counter, key).
#include <cmath>
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

// Word w of a sample's stream (data/sample_random.h): word w % 4 of counter
// (w / 4 as 32 bits, domain, stream low, stream high) with key (k0, k1). A
// kernel that must draw what a host stream would draw from its w-th word on
// (the loader's random erasing, backend/image.h) reads it from here.
CMHA_HOST_DEVICE uint32_t philox_stream_word(uint64_t w, uint32_t domain, uint64_t stream, uint32_t k0, uint32_t k1) {
  const PhiloxWords r = philox4x32_10(static_cast<uint32_t>(w / 4), domain, static_cast<uint32_t>(stream),
                                      static_cast<uint32_t>(stream >> 32), k0, k1);
  return r.w[w % 4];
}

// A standard normal value from two words (Box-Muller, in double): u1 = 1 -
// unit(a) in (0, 1] keeps the log finite, u2 = unit(b).
CMHA_HOST_DEVICE float philox_box_muller(uint32_t a, uint32_t b) {
  const double u1 = 1.0 - static_cast<double>(philox_unit(a)), u2 = philox_unit(b);
  // ::, not cmha:: (autograd/ops.h has Tensor log, cos, sqrt).
  return static_cast<float>(::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586476925286766559 * u2));
}

}  // namespace cmha
