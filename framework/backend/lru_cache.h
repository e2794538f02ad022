#pragma once
// A bounded cache of kernel plans (oneDNN matmul primitives, cuBLASLt plans)
// keyed by geometry: translation batches change shape with every batch, so an
// unbounded cache grows for as long as a run lasts. The least recently used
// entry goes when the cache is full. Values are shared: a caller keeps its
// plan alive while it runs even if another thread evicts it meanwhile.
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace cmha::backend {

template <typename Key, typename Value, typename Hash = std::hash<Key>>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // The cached value, or the one `make()` builds (under the lock: plans are
  // built once per key even when threads ask together).
  template <typename Make>
  std::shared_ptr<Value> get_or_make(const Key& key, Make make) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);  // now the most recent
      return it->second->second;
    }
    std::shared_ptr<Value> value = make();
    order_.emplace_front(key, value);
    index_.emplace(key, order_.begin());
    ++created_;
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return value;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_.size();
  }
  size_t created() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return created_;
  }
  size_t capacity() const { return capacity_; }

 private:
  using Entry = std::pair<Key, std::shared_ptr<Value>>;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> order_;  // most recent first
  std::unordered_map<Key, typename std::list<Entry>::iterator, Hash> index_;
  size_t created_ = 0;
};

}  // namespace cmha::backend
