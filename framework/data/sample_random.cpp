#include "data/sample_random.h"

#include "tensor/philox.h"

namespace cmha::data {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

SampleRandom::SampleRandom(uint64_t seed, int64_t epoch, uint64_t stream, uint32_t domain)
    : stream_(stream), domain_(domain) {
  // The key mixes (seed, epoch); the counter carries (draw block, domain, stream).
  const uint64_t k = splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(epoch));
  key_ = {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
}

uint32_t SampleRandom::next_u32() {
  if (used_ == 4) {
    buffer_ = philox4x32({static_cast<uint32_t>(block_), domain_, static_cast<uint32_t>(stream_),
                          static_cast<uint32_t>(stream_ >> 32)},
                         key_);
    ++block_;
    used_ = 0;
  }
  return buffer_[used_++];
}

float SampleRandom::uniform() { return uint_to_unit(next_u32()); }

int64_t SampleRandom::integer(int64_t lo, int64_t hi_exclusive) {
  if (hi_exclusive <= lo + 1) return lo;
  const uint64_t span = static_cast<uint64_t>(hi_exclusive - lo);
  const uint64_t r = (static_cast<uint64_t>(next_u32()) << 32) | next_u32();
  return lo + static_cast<int64_t>(r % span);  // bias below 2^-32 for any span used here
}

float SampleRandom::normal() {
  // The shared Box-Muller (tensor/philox.h), which the image kernels also draw with.
  const uint32_t a = next_u32(), b = next_u32();
  return philox_box_muller(a, b);
}

uint64_t SampleRandom::position() const { return block_ * 4 - 4 + static_cast<uint64_t>(used_); }

std::array<uint32_t, 2> SampleRandom::key() const { return key_; }

double SampleRandom::gamma(double shape) {
  if (shape < 1) {
    // Gamma(a) = Gamma(a + 1) · U^(1/a) (Marsaglia & Tsang 2000, section 6).
    const double u = 1.0 - uniform();
    return gamma(shape + 1) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3, c = 1.0 / std::sqrt(9 * d);
  for (;;) {
    double x, v;
    do {
      x = normal();
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

double SampleRandom::beta(double a, double b) {
  const double x = gamma(a), y = gamma(b);
  return x + y > 0 ? x / (x + y) : 0.5;
}

}  // namespace cmha::data
