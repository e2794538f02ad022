#pragma once
// Durations, as every part of cmha measures them: the steady clock (never
// set back by NTP or a user), in seconds.
#include <chrono>

namespace cmha {

using SteadyClock = std::chrono::steady_clock;

inline double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

}  // namespace cmha
