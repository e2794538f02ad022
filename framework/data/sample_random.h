#pragma once
// The random numbers of one sample (or one batch) of an image pipeline: a
// Philox stream keyed by (seed, epoch) whose 128-bit counter holds the
// stream id (the sample's slot in the epoch, or the batch index) and the draw
// number. A sample's augmentation therefore depends only on (seed, epoch,
// slot), never on which worker thread decodes it or in which order.
#include <array>
#include <cmath>
#include <cstdint>

#include "tensor/rng.h"

namespace cmha::data {

class SampleRandom {
 public:
  SampleRandom(uint64_t seed, int64_t epoch, uint64_t stream, uint32_t domain = 0);
  float uniform();                                  // [0, 1)
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  int64_t integer(int64_t lo, int64_t hi_exclusive);  // uniform in [lo, hi)
  bool bernoulli(float p) { return uniform() < p; }
  float normal();                                   // standard normal (Box-Muller)
  double gamma(double shape);                       // Gamma(shape, 1), Marsaglia-Tsang
  double beta(double a, double b);                  // Beta(a, b) from two gammas

  // Words drawn so far: the next draw starts at word position() of the
  // stream (tensor/philox.h's philox_stream_word(position(), domain, stream, key)).
  uint64_t position() const;
  std::array<uint32_t, 2> key() const;
  uint32_t domain() const { return domain_; }
  uint64_t stream() const { return stream_; }

 private:
  uint32_t next_u32();
  std::array<uint32_t, 2> key_;
  uint64_t stream_;
  uint32_t domain_;
  uint64_t block_ = 0;
  std::array<uint32_t, 4> buffer_{};
  int used_ = 4;
};

}  // namespace cmha::data
