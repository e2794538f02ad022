#include "tensor/device.h"

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "tensor/emulated_stream.h"
#include "tensor/error.h"
#ifdef CMHA_WITH_CUDA
#include "tensor/cuda_runtime.h"
#endif

namespace cmha {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    int idx = -1;
    const char* b = text.data() + 5;
    const char* e = text.data() + text.size();
    auto r = std::from_chars(b, e, idx);
    if (r.ec == std::errc() && r.ptr == e && idx >= 0) return cuda(idx);
  }
  throw Error("unknown device '" + text + "': expected 'cpu', 'cuda' or 'cuda:N'");
}

std::string Device::str() const {
  return type == DeviceType::cpu ? "cpu" : "cuda:" + std::to_string(index);
}

namespace {
std::atomic<int>& emulation() {
  // -1: not yet read from the environment.
  static std::atomic<int> state{-1};
  return state;
}
std::atomic<int> open_kernels{0};

// 0: off, 1: synchronous, 2: asynchronous.
int emulation_mode() {
  int s = emulation().load(std::memory_order_relaxed);
  if (s < 0) {
    const char* env = std::getenv("CMHA_EMULATE_CUDA");
    s = !env ? 0 : std::strcmp(env, "1") == 0 ? 1 : std::strcmp(env, "async") == 0 ? 2 : 0;
    int expected = -1;
    emulation().compare_exchange_strong(expected, s);
    s = emulation().load();
  }
  return s;
}

void set_emulation_mode(int mode) {
  if (emulation_mode() == 2) emulated_drain();  // nothing of the old mode runs on in the new one
  emulation().store(mode);
}
}  // namespace

bool cuda_emulated() { return emulation_mode() != 0; }
bool cuda_emulated_async() { return emulation_mode() == 2; }
void set_cuda_emulated(bool on) {
  set_emulation_mode(on ? 1 : 0);
}
void set_cuda_emulated_async(bool on) { set_emulation_mode(on ? 2 : 0); }

bool emulated_memory_readable() {
  if (emulation_mode() != 2) return inside_emulated_kernel();
  return on_emulated_stream() || (!is_emulated_host_thread() && inside_emulated_kernel());
}

// A global count, not a thread-local one: a CPU kernel's OpenMP threads read
// the memory too. (It also lets another host thread in while a kernel runs;
// the emulator is a test tool and the trainer's host work is single-threaded.)
EmulatedKernelScope::EmulatedKernelScope() : counted_(cuda_emulated()) {
  if (counted_) open_kernels.fetch_add(1, std::memory_order_relaxed);
}
EmulatedKernelScope::~EmulatedKernelScope() {
  if (counted_) open_kernels.fetch_sub(1, std::memory_order_relaxed);
}
bool inside_emulated_kernel() { return open_kernels.load(std::memory_order_relaxed) > 0; }

namespace {
thread_local bool copy_ahead_open = false;
}  // namespace
CopyAheadScope::CopyAheadScope() : outer_(!copy_ahead_open) { copy_ahead_open = true; }
CopyAheadScope::~CopyAheadScope() {
  if (outer_) copy_ahead_open = false;
}
bool copying_ahead() { return copy_ahead_open; }

void await_copies_ahead(Device device) {
  if (!device.is_cpu() && cuda_emulated_async()) emulated_await_copies_ahead();
#ifdef CMHA_WITH_CUDA
  if (!device.is_cpu() && !cuda_emulated()) cuda_await_copies_ahead(device.index);
#else
  (void)device;
#endif
}

#ifndef CMHA_WITH_CUDA
int cuda_device_count() { return cuda_emulated() ? 1 : 0; }
#endif

}  // namespace cmha
