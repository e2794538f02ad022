#include "backend/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/kernel_device.h"
#include "tensor/device.h"
#ifdef CMHA_WITH_CUDA
#include "backend/cuda/kernel_timing.h"
#endif

namespace cmha::backend {

std::atomic<bool> g_profiling{false};

namespace {

struct Totals {
  int64_t calls = 0;
  double seconds = 0, flops = 0;
};

std::mutex g_mutex;
// Keyed by the entry and phase strings' addresses' contents (both are literals).
std::map<std::pair<std::string, std::string>, Totals> g_totals;

thread_local const char* t_phase = "forward";
thread_local int t_depth = 0;
// The outermost kernel of this thread timed by CUDA events: its device and start event.
thread_local int t_gpu = -1;
thread_local void* t_start_event = nullptr;

// Kernels timed by CUDA events whose times are not read yet (g_mutex).
struct PendingGpuTime {
  const char* entry;
  const char* phase;
  double flops;
  void* start;
  void* end;
};
std::vector<PendingGpuTime> g_pending;

// Reads the pending events' times into the totals (waits for the GPU).
void settle_gpu_times() {
#ifdef CMHA_WITH_CUDA
  for (const PendingGpuTime& p : g_pending) {
    Totals& t = g_totals[{p.entry, p.phase}];
    ++t.calls;
    t.seconds += cuda::elapsed_ms_and_destroy(p.start, p.end) / 1e3;
    t.flops += p.flops;
  }
#endif
  g_pending.clear();
}

}  // namespace

void set_profiling(bool on) { g_profiling.store(on, std::memory_order_relaxed); }

void reset_profile() {
  std::lock_guard<std::mutex> lock(g_mutex);
  settle_gpu_times();
  g_totals.clear();
}

ProfilePhase::ProfilePhase(const char* phase) : prev_(t_phase) { t_phase = phase; }
ProfilePhase::~ProfilePhase() { t_phase = prev_; }

std::vector<ProfileRow> profile_rows() {
  std::lock_guard<std::mutex> lock(g_mutex);
  settle_gpu_times();
  std::vector<ProfileRow> rows;
  for (const auto& [key, t] : g_totals) rows.push_back({key.first, key.second, t.calls, t.seconds, t.flops});
  std::sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) { return a.seconds > b.seconds; });
  return rows;
}

namespace detail {

double kernel_flops(const char* entry, const Tensor& a, const Tensor&, const Tensor&, const Tensor& c) {
  if (std::strcmp(entry, "matmul.matmul") != 0 || a.dim() < 2) return 0;
  return 2.0 * static_cast<double>(c.numel()) * static_cast<double>(a.size(-1));  // c[..., M, N], K = a's last dim
}

KernelTimer::KernelTimer(const char* entry, double flops)
    : entry_(entry), flops_(flops), outermost_(t_depth++ == 0), start_(std::chrono::steady_clock::now()) {
#ifdef CMHA_WITH_CUDA
  const Device device = last_kernel_table_device();  // the table CMHA_KERNEL just looked up
  if (outermost_ && !device.is_cpu() && !cuda_emulated()) {
    t_gpu = device.index;
    t_start_event = cuda::record_timing_event(t_gpu);
  }
#endif
}

KernelTimer::~KernelTimer() {
  --t_depth;
  if (!outermost_) return;
#ifdef CMHA_WITH_CUDA
  if (t_gpu >= 0) {
    const int gpu = t_gpu;
    t_gpu = -1;
    void* end = nullptr;
    try {
      end = cuda::record_timing_event(gpu);
    } catch (...) {
      // The kernel's own error is the caller's to report; this time is lost.
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    g_pending.push_back({entry_, t_phase, flops_, t_start_event, end});
    // A long profiled run (CMHA_PROFILE=1) reads its events now and then, not never.
    if (g_pending.size() >= 8192) settle_gpu_times();
    return;
  }
#endif
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::lock_guard<std::mutex> lock(g_mutex);
  Totals& t = g_totals[{entry_, t_phase}];
  ++t.calls;
  t.seconds += s;
  t.flops += flops_;
}

}  // namespace detail

std::string profile_table(const std::vector<ProfileRow>& rows, double wall_seconds, int64_t steps, size_t max_rows) {
  const double per_step = 1e3 / static_cast<double>(std::max<int64_t>(steps, 1));  // s in all -> ms per step
  const double wall = std::max(wall_seconds, 1e-12);
  std::string out;
  char line[512];
  int w = 28;  // the kernel column fits the longest name shown
  for (size_t i = 0; i < rows.size() && i < max_rows; ++i) w = std::max(w, static_cast<int>(rows[i].entry.size()));
  std::snprintf(line, sizeof line, "%-*s %-9s %8s %10s %7s %9s\n", w, "kernel", "phase", "calls", "ms/step", "step",
                "GFLOP/s");
  out += line;
  double kernels = 0, rest_s = 0;
  int64_t rest_calls = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const ProfileRow& r = rows[i];
    kernels += r.seconds;
    if (i >= max_rows) {
      rest_s += r.seconds;
      rest_calls += r.calls;
      continue;
    }
    char gflops[32] = "";
    if (r.flops > 0 && r.seconds > 0) std::snprintf(gflops, sizeof gflops, "%.1f", r.flops / r.seconds / 1e9);
    std::snprintf(line, sizeof line, "%-*s %-9s %8lld %10.2f %6.1f%% %9s\n", w, r.entry.c_str(), r.phase.c_str(),
                  static_cast<long long>(r.calls / std::max<int64_t>(steps, 1)), r.seconds * per_step,
                  100.0 * r.seconds / wall, gflops);
    out += line;
  }
  if (rest_calls > 0) {
    std::snprintf(line, sizeof line, "%-*s %-9s %8lld %10.2f %6.1f%%\n", w, "(other kernels)", "",
                  static_cast<long long>(rest_calls / std::max<int64_t>(steps, 1)), rest_s * per_step,
                  100.0 * rest_s / wall);
    out += line;
  }
  double gemm_flops = 0, gemm_s = 0;
  for (const ProfileRow& r : rows)
    if (r.flops > 0) gemm_flops += r.flops, gemm_s += r.seconds;
  std::snprintf(line, sizeof line, "%-*s %-9s %8s %10.2f %6.1f%%\n", w, "all kernels", "", "", kernels * per_step,
                100.0 * kernels / wall);
  out += line;
  std::snprintf(line, sizeof line, "%-*s %-9s %8s %10.2f %6.1f%%\n", w, "outside kernels", "", "",
                std::max(0.0, wall - kernels) * per_step, 100.0 * std::max(0.0, wall - kernels) / wall);
  out += line;
  std::snprintf(line, sizeof line, "step: %.2f ms (%lld steps); GEMMs %.1f%% of it at %.1f GFLOP/s\n",
                wall * per_step, static_cast<long long>(steps), 100.0 * gemm_s / wall,
                gemm_s > 0 ? gemm_flops / gemm_s / 1e9 : 0.0);
  out += line;
  return out;
}

}  // namespace cmha::backend
