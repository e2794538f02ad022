#pragma once
// When the CPU kernels split a loop across OpenMP threads.
#include <cstdint>

namespace cmha::cpu {

// Elements below which waking the threads costs more than it saves (measured
// on 2-core Zen4 and Xeon machines: a parallel region costs ~2–5 µs, a
// vectorised pass over 32 K floats about as much).
inline constexpr int64_t kParallelMin = 32768;

}  // namespace cmha::cpu
