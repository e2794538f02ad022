#pragma once
// The image loader's batch buffers: a fixed number of host blocks (with
// `pinned`, page-locked when a GPU is present: Storage::pinned_host), each holding one batch's u8
// pixels and erase rows, handed out again and again. A buffer comes back when
// the last tensor viewing it dies (the batch's tensors, and on the emulated
// GPU a queued copy that still reads it); on a GPU a buffer that comes back is
// refilled only after the copies that read it have finished. A block is made
// when a buffer is first used, or used for a larger batch than before:
// allocations() counts them, and stays at the capacity once every buffer has
// held a full batch.
//
// Usage:
//   BatchBufferPool pool(6, true);
//   std::shared_ptr<Storage> b = pool.acquire(nbytes, true);  // waits for a free buffer
//   Tensor images = view_bytes(b, 0, {B, C, S, S}, DType::u8);  // (see image_loader.cpp)
//   // ... b returns to the pool when `images` and `b` are gone
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/storage.h"
#include "tensor/tensor.h"

namespace cmha::data {

class BatchBufferPool {
 public:
  BatchBufferPool(int capacity, bool pinned);
  BatchBufferPool(const BatchBufferPool&) = delete;
  BatchBufferPool& operator=(const BatchBufferPool&) = delete;

  // A free buffer of at least `nbytes`. When none is free: wait = true waits
  // for one (and calls the on_wait callback first), wait = false returns null.
  // Null as well once interrupt() was called (until resume()).
  std::shared_ptr<Storage> acquire(size_t nbytes, bool wait);
  // Wakes every waiting acquire (which returns null) and refuses new ones until resume().
  void interrupt();
  void resume();
  // Called, outside the pool's lock, each time an acquire starts waiting.
  void set_on_wait(std::function<void()> on_wait) { on_wait_ = std::move(on_wait); }

  int capacity() const { return capacity_; }
  // Whether `threads` acquires are waiting and no buffer is free: only the
  // holders of the buffers (not the pool's own users) can end the wait.
  bool stalled(int threads) const;
  int64_t allocations() const;  // blocks made so far
  int free_buffers() const;

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::shared_ptr<Storage>> blocks;  // by buffer index; null until first used
    std::vector<int> free;                          // indices of the buffers in the pool
    int waiting = 0;
    bool interrupted = false;
    int64_t allocations = 0;
  };
  int capacity_;
  bool pinned_;
  std::shared_ptr<State> state_;  // shared with the handed-out buffers, which may outlive the pool
  std::function<void()> on_wait_;
};

// A contiguous tensor of `shape` and `dtype` viewing `storage` from byte
// `byte_offset` on (a multiple of the dtype's size; the view must fit).
Tensor view_bytes(const std::shared_ptr<Storage>& storage, size_t byte_offset, const Shape& shape, DType dtype);

}  // namespace cmha::data
