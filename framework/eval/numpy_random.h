#pragma once
// numpy's default random generator, bit for bit: np.random.default_rng(seed)
// is PCG64 (XSL-RR 128/64) seeded through SeedSequence, and sacreBLEU draws
// its bootstrap resamples with Generator.choice(n, size, replace=True) and
// its approximate-randomisation swaps with Generator.integers(2, size,
// dtype=bool). Reproducing these draws is what makes `cmha bleu --paired-bs`
// and `--paired-ar` give sacreBLEU's means, intervals and p-values exactly.
// (numpy/random/bit_generator.pyx, _pcg64.pyx, src/pcg64/pcg64.h,
// src/distributions/distributions.c.)
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cmha::eval {

// SeedSequence(entropy) with no spawn key and a pool of 4 words.
class SeedSequence {
 public:
  explicit SeedSequence(uint64_t entropy);
  // generate_state(n_words, np.uint32).
  std::vector<uint32_t> generate_state32(size_t n_words) const;
  // generate_state(n_words, np.uint64): pairs of 32-bit words, low word first.
  std::vector<uint64_t> generate_state64(size_t n_words) const;
  const uint32_t* pool() const { return pool_; }

 private:
  uint32_t pool_[4];
};

// np.random.PCG64 seeded from a SeedSequence, and the Generator methods
// sacreBLEU calls on it.
class NumpyGenerator {
 public:
  // np.random.default_rng(seed).
  explicit NumpyGenerator(uint64_t seed);

  // PCG64's 64-bit output (bit_generator.random_raw()).
  uint64_t next64();
  // numpy's next_uint32: half of a 64-bit output, the low half first.
  uint32_t next32();

  // Generator.choice(n, size=count, replace=True): indices in [0, n)
  // (Lemire's bounded integers on 32-bit draws for n <= 2^32).
  std::vector<int64_t> choice(int64_t n, size_t count);
  // Generator.integers(2, size=count, dtype=bool): each 32-bit draw gives 32
  // booleans, its lowest bit first.
  std::vector<uint8_t> booleans(size_t count);

  // The 128-bit state and increment, as numpy's bit_generator.state reports them.
  unsigned __int128 state() const { return state_; }
  unsigned __int128 increment() const { return inc_; }

 private:
  unsigned __int128 state_ = 0, inc_ = 0;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

}  // namespace cmha::eval
