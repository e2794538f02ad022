#include "tensor/emulated_stream.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tensor/device.h"

namespace cmha {
namespace {

thread_local bool t_stream_thread = false;
thread_local bool t_host_thread = false;

std::atomic<uint64_t> g_host_syncs{0};
std::mutex g_causes_mutex;
std::map<std::string, uint64_t>& causes() {
  static auto* m = new std::map<std::string, uint64_t>;
  return *m;
}

void count_sync(const char* what) {
  g_host_syncs.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_causes_mutex);
  ++causes()[what];
}

// One stream: a queue and the thread that runs it. Never destroyed (tensors
// freed by static destructors still queue their frees), its thread detached.
class Stream {
 public:
  // max_delay_us > 0: a seeded random sleep of up to that long before each op.
  explicit Stream(int max_delay_us, uint64_t seed) : max_delay_us_(max_delay_us), rng_(seed) {
    std::thread([this] { run(); }).detach();
  }

  void enqueue(std::function<void()> op) {
    if (t_stream_thread) {  // a kernel's own calls: already in stream order
      op();
      return;
    }
    t_host_thread = true;
    // Never throws (frees are queued from destructors): a failed op is
    // reported at the next wait, as a GPU reports it at the next synchronising call.
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(op));
    ++queued_;
    work_.notify_one();
  }

  // Waits until every op queued so far has run.
  void synchronize() {
    if (t_stream_thread) return;
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t target = queued_;
    done_cv_.wait(lock, [&] { return done_ >= target; });
    rethrow_failure(lock);
  }

 private:
  void rethrow_failure(std::unique_lock<std::mutex>& lock) {
    if (!failure_) return;
    std::exception_ptr e = failure_;
    failure_ = nullptr;
    lock.unlock();
    std::rethrow_exception(e);
  }

  void run() {
    t_stream_thread = true;
    for (;;) {
      std::function<void()> op;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_.wait(lock, [&] { return !queue_.empty(); });
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      if (max_delay_us_ > 0)
        std::this_thread::sleep_for(std::chrono::microseconds(rng_() % static_cast<uint64_t>(max_delay_us_)));
      std::exception_ptr failed;
      try {
        const EmulatedKernelScope scope;  // this thread's OpenMP team may read device memory
        op();
      } catch (...) {
        failed = std::current_exception();
      }
      op = nullptr;  // the tensors it held die here, in stream order
      std::lock_guard<std::mutex> lock(mutex_);
      if (failed && !failure_) failure_ = failed;
      ++done_;
      done_cv_.notify_all();
    }
  }

  const int max_delay_us_;
  std::mt19937_64 rng_;
  std::mutex mutex_;
  std::condition_variable work_, done_cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t queued_ = 0, done_ = 0;
  std::exception_ptr failure_;
};

uint64_t delay_seed() {
  const char* v = std::getenv("CMHA_EMULATE_CUDA_SEED");
  return v ? std::strtoull(v, nullptr, 10) : 20260401;
}

void drain_at_exit();

Stream& stream(EmulatedStreamId id) {
  // The copy and comm streams run up to 2 ms late per operation: long against
  // the kernels of the small test models, so an unawaited copy or collective
  // is caught. Each its own sequence of delays.
  static Stream* compute = new Stream(0, 0);
  static Stream* copy = new Stream(2000, delay_seed());
  static Stream* comm = new Stream(2000, delay_seed() * 31 + 7);
  // Queued frees touch the CPU block cache's statics: finish before they die
  // (they were made before the first queued op, so are destroyed after this).
  static const int registered = std::atexit(drain_at_exit);
  (void)registered;
  switch (id) {
    case EmulatedStreamId::compute: return *compute;
    case EmulatedStreamId::copy: return *copy;
    case EmulatedStreamId::comm: return *comm;
  }
  return *compute;
}

void drain_at_exit() { emulated_drain(); }

}  // namespace

void emulated_enqueue(EmulatedStreamId id, std::function<void()> op) { stream(id).enqueue(std::move(op)); }

void emulated_synchronize(EmulatedStreamId id, const char* what) {
  if (t_stream_thread) return;
  count_sync(what);
  stream(id).synchronize();
}

void emulated_run_and_wait(const std::function<void()>& op, const char* what) {
  if (t_stream_thread) {
    op();
    return;
  }
  std::exception_ptr failed;
  stream(EmulatedStreamId::compute).enqueue([&] {
    try {
      op();
    } catch (...) {
      failed = std::current_exception();
    }
  });
  emulated_synchronize(EmulatedStreamId::compute, what);
  if (failed) std::rethrow_exception(failed);
}

void emulated_drain() {
  for (EmulatedStreamId id : {EmulatedStreamId::copy, EmulatedStreamId::comm, EmulatedStreamId::compute}) {
    try {
      stream(id).synchronize();
    } catch (const std::exception& e) {  // nobody is left to report it to but the user
      std::fprintf(stderr, "cmha: warning: an emulated GPU operation failed: %s\n", e.what());
    }
  }
}

struct EmulatedEvent::State {
  std::mutex mutex;
  std::condition_variable reached_cv;
  uint64_t recorded = 0;  // records queued by the host
  uint64_t reached = 0;   // records the stream has passed
};

EmulatedEvent::EmulatedEvent() : state_(std::make_shared<State>()) {}

void EmulatedEvent::record(EmulatedStreamId id) {
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    generation = ++state_->recorded;
  }
  emulated_enqueue(id, [s = state_, generation] {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (generation > s->reached) s->reached = generation;
    s->reached_cv.notify_all();
  });
}

void EmulatedEvent::wait_on(EmulatedStreamId id) const {
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    generation = state_->recorded;  // the last record so far, as cudaStreamWaitEvent
  }
  if (generation == 0) return;
  emulated_enqueue(id, [s = state_, generation] {
    std::unique_lock<std::mutex> lock(s->mutex);
    s->reached_cv.wait(lock, [&] { return s->reached >= generation; });
  });
}

bool EmulatedEvent::query() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->reached >= state_->recorded;
}

namespace {
struct CopiesAhead {
  std::mutex mutex;
  EmulatedEvent compute_point;  // where a copy ahead enters the compute stream's order
  EmulatedEvent ahead_done;     // after the last copy ahead (the copy stream runs in order)
  std::set<const void*> unawaited;
};
CopiesAhead& copies_ahead() {
  static auto* c = new CopiesAhead;
  return *c;
}
}  // namespace

void emulated_copy_ahead(const void* dst, std::function<void()> copy) {
  CopiesAhead& c = copies_ahead();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.compute_point.record(EmulatedStreamId::compute);
  c.compute_point.wait_on(EmulatedStreamId::copy);
  emulated_enqueue(EmulatedStreamId::copy, std::move(copy));
  c.ahead_done.record(EmulatedStreamId::copy);
  c.unawaited.insert(dst);
}

void emulated_await_copies_ahead() {
  CopiesAhead& c = copies_ahead();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.unawaited.empty()) return;
  c.ahead_done.wait_on(EmulatedStreamId::compute);
  c.unawaited.clear();
}

void emulated_free_after_copy_ahead(const void* dst) {
  CopiesAhead& c = copies_ahead();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.unawaited.erase(dst)) c.ahead_done.wait_on(EmulatedStreamId::compute);
}

bool on_emulated_stream() { return t_stream_thread; }
void mark_emulated_host_thread() { t_host_thread = true; }
bool is_emulated_host_thread() { return t_host_thread; }

uint64_t emulated_host_syncs() { return g_host_syncs.load(std::memory_order_relaxed); }
std::map<std::string, uint64_t> emulated_host_syncs_by_cause() {
  std::lock_guard<std::mutex> lock(g_causes_mutex);
  return causes();
}

void emulated_poison(void* p, size_t nbytes) {
  if (nbytes > 0) std::memset(p, 0xFF, nbytes);
}

}  // namespace cmha
