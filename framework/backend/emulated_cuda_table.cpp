#include "backend/emulated_cuda_table.h"

#include <cstring>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "backend/emulated_fused_attention.h"
#include "backend/kernel_entries.h"
#include "tensor/emulated_stream.h"
#include "tensor/error.h"

namespace cmha::backend {
namespace {

// The emulated device's transfer, with the real entry's checks (contiguous,
// one dtype and shape, one side on the CPU). Synchronous: host bytes to host
// bytes. Asynchronous: as cuda_runtime.cpp's copies on a GPU.
void emulated_transfer(const Tensor& dst, const Tensor& src) {
  CMHA_CHECK(dst.is_contiguous() && src.is_contiguous() && dst.dtype() == src.dtype() && dst.shape() == src.shape() &&
                 (dst.device().is_cpu() != src.device().is_cpu()),
             "copy.transfer: " + src.describe() + " -> " + dst.describe() +
                 " must be contiguous, of one dtype and shape, with exactly one side on the CPU");
  const size_t n = dst.nbytes();
  if (n == 0) return;
  void* to = dst.raw_data();
  if (!cuda_emulated_async()) {
    std::memcpy(to, src.raw_data(), n);
    return;
  }
  if (!src.device().is_cpu()) {
    // To the host: in the compute stream's order, and the host waits for it.
    emulated_enqueue(EmulatedStreamId::compute, [to, src, n] { std::memcpy(to, src.raw_data(), n); });
    emulated_synchronize(EmulatedStreamId::compute, "copy to host");
    return;
  }
  if (!src.is_pinned()) {
    // From pageable memory: staged now, so the caller may reuse src at once.
    const auto* from = static_cast<const char*>(src.raw_data());
    auto staged = std::make_shared<std::vector<char>>(from, from + n);
    emulated_enqueue(EmulatedStreamId::compute, [to, staged, dst] { std::memcpy(to, staged->data(), staged->size()); });
    return;
  }
  // From pinned memory: read when the copy runs. A copy ahead holds only the
  // destination's address, as a GPU's does: a block freed before the copy
  // is awaited is freed after it (storage.cpp), or the copy writes freed memory.
  if (copying_ahead()) {
    emulated_copy_ahead(to, [to, src, n] { std::memcpy(to, src.raw_data(), n); });
    return;
  }
  emulated_enqueue(EmulatedStreamId::compute, [to, src, dst, n] { std::memcpy(to, src.raw_data(), n); });
}

// An argument a queued kernel keeps a copy of: a value, or a const reference
// (a Tensor copy shares its storage, which then lives until the kernel has
// run, as a launched CUDA kernel's memory must).
template <typename T>
inline constexpr bool kQueueableArg =
    !std::is_pointer_v<std::decay_t<T>> &&
    (!std::is_lvalue_reference_v<T> || std::is_const_v<std::remove_reference_t<T>>);

// The asynchronous emulator's entry for one CPU kernel (Slot: its function
// and name): queued on the compute stream when it returns nothing; else run
// there while the host waits for its value (a host sync, under its name).
template <typename Fn>
struct Queued;
template <typename R, typename... A>
struct Queued<R (*)(A...)> {
  template <typename Slot>
  static R call(A... args) {
    R (*fn)(A...) = Slot::fn;
    if constexpr (std::is_void_v<R> && (kQueueableArg<A> && ...)) {
      emulated_enqueue(EmulatedStreamId::compute, [fn, saved = std::tuple<std::decay_t<A>...>(args...)] {
        std::apply([&](const auto&... a) { fn(a...); }, saved);
      });
    } else if constexpr (std::is_void_v<R>) {
      emulated_run_and_wait([&] { fn(std::forward<A>(args)...); }, Slot::name);
    } else {
      std::optional<R> result;
      emulated_run_and_wait([&] { result.emplace(fn(std::forward<A>(args)...)); }, Slot::name);
      return std::move(*result);
    }
  }
};

#define CMHA_EMULATED_SLOT(family, entry)                                            \
  struct Slot_##family##_##entry {                                                   \
    static inline decltype(std::declval<KernelTable>().family.entry) fn = nullptr;   \
    static constexpr const char* name = #family "." #entry;                          \
  };
CMHA_KERNEL_ENTRIES(CMHA_EMULATED_SLOT)
#undef CMHA_EMULATED_SLOT

}  // namespace

const KernelTable& emulated_cuda_table(bool async) {
  static const KernelTable sync_table = [] {
    KernelTable t = cpu::kernel_table();
    t.device_name = "CUDA (emulated on the CPU)";
    t.copy.transfer = emulated_transfer;
    use_emulated_fused_attention(t.attention);
    return t;
  }();
  static const KernelTable async_table = [] {
    KernelTable t = cpu::kernel_table();
    t.device_name = "CUDA (emulated on the CPU, asynchronous)";
    use_emulated_fused_attention(t.attention);
#define CMHA_QUEUE_ENTRY(family, entry)                                                                   \
  if (t.family.entry) {                                                                                   \
    Slot_##family##_##entry::fn = t.family.entry;                                                         \
    t.family.entry = &Queued<decltype(t.family.entry)>::template call<Slot_##family##_##entry>;          \
  }
    CMHA_KERNEL_ENTRIES(CMHA_QUEUE_ENTRY)
#undef CMHA_QUEUE_ENTRY
    t.copy.transfer = emulated_transfer;  // queues its own work: a copy to the host waits
    return t;
  }();
  return async ? async_table : sync_table;
}

}  // namespace cmha::backend
