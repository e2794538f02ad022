#pragma once
// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
// Element i of a draw depends only on (seed, offset, i), so a mask or an
// initialisation is the same for a seed whatever the thread count, and any
// thread can produce any slice of it.
#include <array>
#include <cstdint>

namespace cmha {

class Tensor;

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// A stream of counters: each draw of n numbers reserves ceil(n/4) counters.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves counters for n values and returns the first counter.
  uint64_t reserve(uint64_t n) {
    uint64_t first = offset_;
    offset_ += (n + 3) / 4;
    return first;
  }
  std::array<uint32_t, 2> key() const {
    return {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)};
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The four 32-bit draws of counter `c` of a stream with key `key`.
inline std::array<uint32_t, 4> philox_block(uint64_t c, std::array<uint32_t, 2> key) {
  return philox4x32({static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0u, 0u}, key);
}
// Uniform in [0, 1) with 24 random bits.
inline float uint_to_unit(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }

// In-place fills of an f32 tensor (any layout, written in logical order),
// through the kernel table's random family (backend/random.h; defined in
// backend/tensor_random.cpp, as the tensor layer sits below the table).
void uniform_(Tensor& t, Generator& gen, float low = 0.0f, float high = 1.0f);
void normal_(Tensor& t, Generator& gen, float mean = 0.0f, float std = 1.0f);
// Normal resampled until inside the absolute bounds [a, b], as timm's trunc_normal_.
// Each element owns kTruncNormalBlocks counters (two draws each) to resample from.
inline constexpr int kTruncNormalBlocks = 16;  // P(all 32 draws outside ±2σ) ≈ 1e-42
void trunc_normal_(Tensor& t, Generator& gen, float mean, float std, float a, float b);

}  // namespace cmha
