// SeedSequence, PCG64 and the Generator draws of numpy_random.h, transcribed
// from numpy (bit_generator.pyx, pcg64.h, distributions.c).
#include "eval/numpy_random.h"

#include "tensor/error.h"

namespace cmha::eval {

namespace {

// SeedSequence's hash constants (bit_generator.pyx).
constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
constexpr uint32_t kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
constexpr int kXShift = 16;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

constexpr unsigned __int128 kPcgMultiplier =
    (static_cast<unsigned __int128>(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;

}  // namespace

SeedSequence::SeedSequence(uint64_t entropy) {
  // The entropy as little-endian 32-bit words (_coerce_to_uint32_array).
  std::vector<uint32_t> words;
  do {
    words.push_back(static_cast<uint32_t>(entropy));
    entropy >>= 32;
  } while (entropy != 0);
  uint32_t hash_const = kInitA;
  for (size_t i = 0; i < 4; ++i) pool_[i] = hashmix(i < words.size() ? words[i] : 0, hash_const);
  for (size_t src = 0; src < 4; ++src)
    for (size_t dst = 0; dst < 4; ++dst)
      if (src != dst) pool_[dst] = mix(pool_[dst], hashmix(pool_[src], hash_const));
  for (size_t src = 4; src < words.size(); ++src)
    for (size_t dst = 0; dst < 4; ++dst) pool_[dst] = mix(pool_[dst], hashmix(words[src], hash_const));
}

std::vector<uint32_t> SeedSequence::generate_state32(size_t n_words) const {
  std::vector<uint32_t> state(n_words);
  uint32_t hash_const = kInitB;
  for (size_t i = 0; i < n_words; ++i) {
    uint32_t v = pool_[i % 4];
    v ^= hash_const;
    hash_const *= kMultB;
    v *= hash_const;
    v ^= v >> kXShift;
    state[i] = v;
  }
  return state;
}

std::vector<uint64_t> SeedSequence::generate_state64(size_t n_words) const {
  const std::vector<uint32_t> w = generate_state32(2 * n_words);
  std::vector<uint64_t> out(n_words);
  for (size_t i = 0; i < n_words; ++i) out[i] = w[2 * i] | static_cast<uint64_t>(w[2 * i + 1]) << 32;
  return out;
}

NumpyGenerator::NumpyGenerator(uint64_t seed) {
  // PCG64._seed_seq: generate_state(4, uint64) -> seed = (s[0] << 64) | s[1],
  // inc = (s[2] << 64) | s[3]; then pcg_setseq_128_srandom_r.
  const std::vector<uint64_t> s = SeedSequence(seed).generate_state64(4);
  const unsigned __int128 initstate = static_cast<unsigned __int128>(s[0]) << 64 | s[1];
  const unsigned __int128 initseq = static_cast<unsigned __int128>(s[2]) << 64 | s[3];
  inc_ = initseq << 1 | 1;
  state_ = 0;
  state_ = state_ * kPcgMultiplier + inc_;
  state_ += initstate;
  state_ = state_ * kPcgMultiplier + inc_;
}

uint64_t NumpyGenerator::next64() {
  // Step, then the XSL-RR output of the new state.
  state_ = state_ * kPcgMultiplier + inc_;
  const uint64_t x = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  return (x >> rot) | (x << ((64 - rot) & 63));
}

uint32_t NumpyGenerator::next32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const uint64_t next = next64();
  has_uint32_ = true;
  uinteger_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next);
}

std::vector<int64_t> NumpyGenerator::choice(int64_t n, size_t count) {
  CMHA_CHECK(n > 0 && static_cast<uint64_t>(n) <= (uint64_t{1} << 32),
             "choice: the population size must be in 1..2^32, got " + std::to_string(n));
  std::vector<int64_t> out(count, 0);
  const uint64_t rng = static_cast<uint64_t>(n) - 1;  // numpy's inclusive range
  if (rng == 0) return out;
  if (rng == 0xFFFFFFFFULL) {
    for (auto& v : out) v = next32();
    return out;
  }
  // buffered_bounded_lemire_uint32.
  const uint32_t rng_excl = static_cast<uint32_t>(rng) + 1;
  for (auto& v : out) {
    uint64_t m = static_cast<uint64_t>(next32()) * rng_excl;
    uint32_t leftover = static_cast<uint32_t>(m);
    if (leftover < rng_excl) {
      const uint32_t threshold = (UINT32_MAX - static_cast<uint32_t>(rng)) % rng_excl;
      while (leftover < threshold) {
        m = static_cast<uint64_t>(next32()) * rng_excl;
        leftover = static_cast<uint32_t>(m);
      }
    }
    v = static_cast<int64_t>(m >> 32);
  }
  return out;
}

std::vector<uint8_t> NumpyGenerator::booleans(size_t count) {
  // buffered_bounded_bool: a fresh 32-bit draw, then its bits shifted out.
  std::vector<uint8_t> out(count);
  uint32_t buf = 0;
  int bcnt = 0;
  for (auto& v : out) {
    if (bcnt == 0) {
      buf = next32();
      bcnt = 31;
    } else {
      buf >>= 1;
      --bcnt;
    }
    v = buf & 1U;
  }
  return out;
}

}  // namespace cmha::eval
