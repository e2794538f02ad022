#include "tensor/storage.h"

#include <atomic>
#include <sys/resource.h>

#include <malloc.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <map>
#include <vector>

#include "tensor/cuda_runtime.h"
#include "tensor/emulated_stream.h"
#include "tensor/error.h"

namespace cmha {

namespace {

constexpr size_t kCacheMin = size_t{1} << 20;
constexpr size_t kHugePage = size_t{2} << 20;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheEnabled = false;
#else
constexpr bool kCacheEnabled = true;
#endif

// CMHA_CPU_CACHE_MB, read once. A bad value is kept as an error sentence
// that the first allocation throws: the cap is also read in ~Storage, where
// throwing would abort, so there it falls back to the default.
struct CacheCap {
  size_t bytes = size_t{4096} << 20;
  std::string error;
};
const CacheCap& cache_cap() {
  static const CacheCap cap = [] {
    constexpr unsigned long long kMaxMb = 1ull << 30;  // 1 PiB: far above any machine, and << 20 cannot overflow
    CacheCap c;
    const char* env = std::getenv("CMHA_CPU_CACHE_MB");
    if (!env) return c;
    char* end = nullptr;
    errno = 0;
    const unsigned long long mb = std::strtoull(env, &end, 10);
    if (*env < '0' || *env > '9' || *end != '\0' || errno == ERANGE || mb > kMaxMb)
      c.error = std::string("the environment variable CMHA_CPU_CACHE_MB='") + env +
                "' must be a whole number of MiB from 0 to " + std::to_string(kMaxMb);
    else
      c.bytes = static_cast<size_t>(mb) << 20;
    return c;
  }();
  return cap;
}

// Bytes of live CPU tensor blocks, and their peak.
std::atomic<int64_t> g_live_cpu_bytes{0}, g_peak_cpu_bytes{0};
void count_cpu_block(int64_t bytes) {
  const int64_t live = g_live_cpu_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = g_peak_cpu_bytes.load(std::memory_order_relaxed);
  while (live > peak && !g_peak_cpu_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

struct BlockCache {
  std::mutex mutex;
  std::map<size_t, std::vector<void*>> free_blocks;  // by block size, ordered for best fit
  size_t bytes = 0;
};
BlockCache& block_cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: storages may die after static teardown
  return *c;
}

// Blocks of 1 MiB and more are rounded up to a size class, four per power of
// two (wasting at most a quarter): activations whose shapes change with every
// batch (translation: sentence lengths) then reuse the same few cached blocks
// instead of filling the cache with sizes that never come back while every
// new size page-faults afresh. Huge-page sized blocks stay 2 MiB multiples.
size_t rounded_size(size_t nbytes) {
  size_t r = (nbytes + Storage::kAlignment - 1) / Storage::kAlignment * Storage::kAlignment;
  if (r >= kCacheMin) {
    const size_t step = (size_t{1} << (63 - __builtin_clzll(r))) / 4;  // a quarter of the power of two below
    r = (r + step - 1) / step * step;
  }
  if (r >= kHugePage) r = (r + kHugePage - 1) / kHugePage * kHugePage;
  return r == 0 ? Storage::kAlignment : r;
}

// The smallest cached block of `rounded` to 2·`rounded` bytes (its size in
// *capacity), or null. Taking a larger block beats page-faulting a new one.
void* take_cached(size_t rounded, size_t* capacity) {
  if (!kCacheEnabled || rounded < kCacheMin) return nullptr;
  BlockCache& c = block_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto it = c.free_blocks.lower_bound(rounded); it != c.free_blocks.end() && it->first <= 2 * rounded; ++it) {
    if (it->second.empty()) continue;
    void* p = it->second.back();
    it->second.pop_back();
    c.bytes -= it->first;
    *capacity = it->first;
    return p;
  }
  return nullptr;
}

// Keeps a freed block (already taken off the live count) unless that would
// push the cache past its cap, or live tensors plus cached blocks past the
// most that live tensors have ever held: the cache serves the next step's
// allocations, which the last step's peak bounds, and never holds memory
// that no step asked for. Without the second bound, translation's batches of
// changing shapes left blocks of every size class cached, 600 MB on top of a
// 1.26 GB tensor peak in the local EN-DE recipe.
bool give_cached(void* p, size_t rounded) {
  if (!kCacheEnabled || rounded < kCacheMin) return false;
  BlockCache& c = block_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.bytes + rounded > cache_cap().bytes) return false;
  const int64_t live = g_live_cpu_bytes.load(std::memory_order_relaxed);
  if (live + static_cast<int64_t>(c.bytes + rounded) > g_peak_cpu_bytes.load(std::memory_order_relaxed)) return false;
  c.free_blocks[rounded].push_back(p);
  c.bytes += rounded;
  return true;
}

}  // namespace

size_t cached_cpu_bytes() {
  BlockCache& c = block_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.bytes;
}

void release_cached_cpu_memory() {
  BlockCache& c = block_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [size, blocks] : c.free_blocks)
    for (void* p : blocks) std::free(p);
  c.free_blocks.clear();
  c.bytes = 0;
}

Storage::Storage(size_t nbytes, Device device)
    : nbytes_(nbytes), host_(device.is_cpu() || cuda_emulated()), device_(device) {
  if (!device.is_cpu() && host_ && device.index != 0)
    throw Error("cannot allocate on " + device.str() + ": the emulated CUDA device (CMHA_EMULATE_CUDA) is cuda:0 alone");
  if (host_) {
    if (!cache_cap().error.empty()) throw Error(cache_cap().error);
    // Blocks the cache refuses go back to the system at once: glibc would
    // otherwise raise its mmap threshold with every large free (up to 32
    // MiB) and keep such blocks in its heap, resident, where only its top
    // can be trimmed. Below 1 MiB (never cached) glibc's heap serves as usual.
    static const int fixed_mmap_threshold = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kCacheMin));
    (void)fixed_mmap_threshold;
    // aligned_alloc needs a size that is a multiple of the alignment.
    const size_t rounded = rounded_size(nbytes);
    capacity_ = rounded;
    if (!(data_ = take_cached(rounded, &capacity_))) {
      if (rounded >= kHugePage) {
        data_ = std::aligned_alloc(kHugePage, rounded);
        if (data_) madvise(data_, rounded, MADV_HUGEPAGE);
      } else {
        data_ = std::aligned_alloc(kAlignment, rounded);
      }
      if (!data_) throw std::bad_alloc();
    }
    count_cpu_block(static_cast<int64_t>(capacity_));
    // A fresh block of the asynchronous emulated GPU holds poison, in stream
    // order: a kernel that reads what nobody wrote reads NaN.
    if (!device.is_cpu() && cuda_emulated_async())
      emulated_enqueue(EmulatedStreamId::compute, [p = data_, nbytes] { emulated_poison(p, nbytes); });
    return;
  }
#ifdef CMHA_WITH_CUDA
  data_ = cuda_alloc(nbytes, device.index);
#else
  throw Error("cannot allocate on " + device.str() + ": this cmha was built without CUDA (CMHA_CUDA=OFF or no nvcc)");
#endif
}

std::shared_ptr<Storage> Storage::borrowed(void* data, size_t nbytes, Device device) {
  return std::shared_ptr<Storage>(new Storage(Borrow{}, data, nbytes, device));
}

std::shared_ptr<Storage> Storage::pinned_host(size_t nbytes) {
#ifdef CMHA_WITH_CUDA
  if (!cuda_emulated() && cuda_device_count() > 0) {
    auto s = std::shared_ptr<Storage>(new Storage(Borrow{}, cuda_host_alloc(nbytes), nbytes, Device::cpu()));
    s->owned_ = true;
    s->pinned_ = true;
    return s;
  }
#endif
  auto s = std::make_shared<Storage>(nbytes, Device::cpu());
  // The asynchronous emulator copies a pinned block late, as a GPU does.
  s->pinned_ = cuda_emulated_async();
  return s;
}

Storage::~Storage() {
  if (!data_ || !owned_) return;
#ifdef CMHA_WITH_CUDA
  // Page-locked (cuda_host_alloc, a borrowed-then-owned block: no capacity),
  // not the asynchronous emulator's ordinary pinned block.
  if (pinned_ && capacity_ == 0) {
    cuda_host_free(data_);
    return;
  }
#endif
  if (host_ && !device_.is_cpu() && cuda_emulated_async()) {
    // Freed in stream order (after a copy ahead into it that nobody awaited),
    // and poisoned: a stale pointer reads NaN.
    emulated_free_after_copy_ahead(data_);
    emulated_enqueue(EmulatedStreamId::compute, [p = data_, n = nbytes_, capacity = capacity_] {
      emulated_poison(p, n);
      count_cpu_block(-static_cast<int64_t>(capacity));
      if (!give_cached(p, capacity)) std::free(p);
    });
    return;
  }
  if (host_) {
    count_cpu_block(-static_cast<int64_t>(capacity_));
    if (!give_cached(data_, capacity_)) std::free(data_);
    return;
  }
#ifdef CMHA_WITH_CUDA
  cuda_free(data_, device_.index);
#endif
}

double peak_cpu_tensor_mb() {
  return static_cast<double>(g_peak_cpu_bytes.load(std::memory_order_relaxed)) / (1024.0 * 1024.0);
}

double process_peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

}  // namespace cmha
