#include "tensor/rng.h"

#include "tensor/philox.h"

namespace cmha {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  const PhiloxWords r = philox4x32_10(c[0], c[1], c[2], c[3], k[0], k[1]);
  return {r.w[0], r.w[1], r.w[2], r.w[3]};
}

}  // namespace cmha
