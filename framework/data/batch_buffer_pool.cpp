#include "data/batch_buffer_pool.h"

#include <string>

#include "tensor/device.h"
#include "tensor/error.h"
#ifdef CMHA_WITH_CUDA
#include "tensor/cuda_runtime.h"
#endif

namespace cmha::data {

BatchBufferPool::BatchBufferPool(int capacity, bool pinned)
    : capacity_(capacity), pinned_(pinned), state_(std::make_shared<State>()) {
  CMHA_CHECK(capacity >= 1, "batch buffer pool: capacity " + std::to_string(capacity));
  state_->blocks.resize(static_cast<size_t>(capacity));
  for (int i = capacity - 1; i >= 0; --i) state_->free.push_back(i);
}

std::shared_ptr<Storage> BatchBufferPool::acquire(size_t nbytes, bool wait) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  if (s.free.empty() && !s.interrupted) {
    if (!wait) return nullptr;
    ++s.waiting;
    if (on_wait_) {
      lock.unlock();
      on_wait_();
      lock.lock();
    }
    s.cv.wait(lock, [&] { return !s.free.empty() || s.interrupted; });
    --s.waiting;
  }
  if (s.interrupted) return nullptr;
  const int i = s.free.back();
  s.free.pop_back();
  std::shared_ptr<Storage>& block = s.blocks[static_cast<size_t>(i)];  // this thread's alone while it is out
  const bool grow = !block || block->nbytes() < nbytes;
  if (grow) ++s.allocations;
  lock.unlock();
  if (grow) {
    block.reset();  // the old block first: never two of one buffer at once
    block = pinned_ ? Storage::pinned_host(nbytes) : std::make_shared<Storage>(nbytes, Device::cpu());
  } else {
#ifdef CMHA_WITH_CUDA
    // Page-locked on a real GPU: copies queued from it may still be reading.
    if (block->pinned() && !cuda_emulated()) cuda_host_await_reads(block->data());
#endif
  }
  // The handed-out pointer owns nothing: its last copy puts the buffer back.
  return std::shared_ptr<Storage>(block.get(), [state = state_, i](Storage*) {
    {
      std::lock_guard<std::mutex> l(state->mu);
      state->free.push_back(i);
    }
    state->cv.notify_one();
  });
}

void BatchBufferPool::interrupt() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->interrupted = true;
  }
  state_->cv.notify_all();
}

void BatchBufferPool::resume() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->interrupted = false;
}

bool BatchBufferPool::stalled(int threads) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return threads > 0 && state_->waiting >= threads && state_->free.empty();
}

int64_t BatchBufferPool::allocations() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->allocations;
}

int BatchBufferPool::free_buffers() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return static_cast<int>(state_->free.size());
}

Tensor view_bytes(const std::shared_ptr<Storage>& storage, size_t byte_offset, const Shape& shape, DType dtype) {
  const size_t element = dtype_size(dtype);
  const auto bytes = static_cast<size_t>(shape_numel(shape)) * element;
  CMHA_CHECK(byte_offset % element == 0 && byte_offset + bytes <= storage->nbytes(),
             "view_bytes: " + std::to_string(bytes) + " bytes at " + std::to_string(byte_offset) + " of a block of " +
                 std::to_string(storage->nbytes()));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage;
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->offset = static_cast<int64_t>(byte_offset / element);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace cmha::data
