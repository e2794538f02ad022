#pragma once
// The kernel profile (`cmha bench --profile`, CMHA_PROFILE=1 for `cmha train`):
// when on, every call through CMHA_KERNEL is timed and summed per (kernel
// entry, phase), with the floating-point work of the GEMMs, like the table of
// torch.profiler. Off (the default), a kernel call pays one relaxed atomic load.
//
// Phases: "forward" unless a ProfilePhase says otherwise; autograd's
// run_backward marks "backward", the trainer and bench mark "optimizer". A
// kernel called from inside another timed kernel is counted in the outer one
// only, so the rows add up to at most the wall time.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace cmha::backend {

extern std::atomic<bool> g_profiling;
inline bool profiling() { return g_profiling.load(std::memory_order_relaxed); }
void set_profiling(bool on);
void reset_profile();

// The phase label of this thread's kernel calls while the guard lives.
class ProfilePhase {
 public:
  explicit ProfilePhase(const char* phase);
  ~ProfilePhase();
  ProfilePhase(const ProfilePhase&) = delete;
  ProfilePhase& operator=(const ProfilePhase&) = delete;

 private:
  const char* prev_;
};

struct ProfileRow {
  std::string entry;  // "softmax.forward", "matmul.matmul"
  std::string phase;  // forward, backward, optimizer
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;   // floating-point operations (GEMMs; 0 where not counted)
};
// Everything recorded since the last reset, largest time first.
std::vector<ProfileRow> profile_rows();

// The table a user reads: one line per row with calls, ms per step, the share
// of the step, GFLOP/s where counted; then the kernels' total and the rest of
// the step (autograd bookkeeping, allocation, the framework itself). `steps`
// steps took `wall_seconds` in all. At most `max_rows` rows (the rest summed).
std::string profile_table(const std::vector<ProfileRow>& rows, double wall_seconds, int64_t steps, size_t max_rows = 25);

namespace detail {
// Floating-point work of a kernel call: 2·M·N·K for matmul.matmul, else 0.
template <typename... A>
double kernel_flops(const char*, const A&...) {
  return 0;
}
double kernel_flops(const char* entry, const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c);

// Times the outermost kernel call of this thread; records on destruction.
class KernelTimer {
 public:
  KernelTimer(const char* entry, double flops);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  const char* entry_;
  double flops_;
  bool outermost_;
  std::chrono::steady_clock::time_point start_;
};
}  // namespace detail

// What CMHA_KERNEL returns: the entry's function, timed when profiling is on.
template <typename Fn>
struct ProfiledKernel;
template <typename R, typename... A>
struct ProfiledKernel<R (*)(A...)> {
  R (*fn)(A...);
  const char* entry;
  R operator()(A... args) const {  // the entry's own parameter types, so braced arguments still convert
    const EmulatedKernelScope scope;  // the emulated CUDA device's memory is readable inside
    if (!profiling()) return fn(std::forward<A>(args)...);
    detail::KernelTimer timer(entry, detail::kernel_flops(entry, args...));
    return fn(std::forward<A>(args)...);
  }
};

}  // namespace cmha::backend
