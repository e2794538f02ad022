#include "distributed/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <thread>

#include "distributed/nccl_api.h"
#include "tensor/cuda_runtime.h"
#include "tensor/error.h"

namespace cmha::distributed {

namespace {
ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::sum ? ncclSum : ncclAvg; }
}  // namespace

// The communicator's GPU side and its watchdog.
struct NcclCommunicator::State {
  int device = 0, rank = 0, world = 1;
  double timeout = 600;
  ncclComm_t comm = nullptr;
  cudaStream_t compute = nullptr;  // the device's compute stream (tensor/cuda_runtime.h)
  cudaStream_t stream = nullptr;   // NCCL's
  std::mutex mutex;
  std::condition_variable wake;
  struct InFlight {
    cudaEvent_t done;
    std::chrono::steady_clock::time_point since;
    const char* what;
  };
  std::list<InFlight> in_flight;  // guarded by mutex; the watchdog retires finished ones
  std::atomic<bool> stopping{false};
  std::thread watchdog;

  std::string what(const char* op) const {
    return std::string("NCCL ") + op + " on rank " + std::to_string(rank) + " of " + std::to_string(world);
  }

  // The collective's stream waits for the compute stream's work so far.
  void order_after_compute() {
    cudaEvent_t ready;
    cuda_check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags", what("launch"));
    cuda_check(cudaEventRecord(ready, compute), "cudaEventRecord", what("launch"));
    cuda_check(cudaStreamWaitEvent(stream, ready, 0), "cudaStreamWaitEvent", what("launch"));
    cudaEventDestroy(ready);  // released once the wait is satisfied
  }

  // An event after the collective just enqueued, watched until it completes.
  cudaEvent_t finished(const char* op) {
    cudaEvent_t done;
    cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags", what(op));
    cuda_check(cudaEventRecord(done, stream), "cudaEventRecord", what(op));
    std::lock_guard<std::mutex> lock(mutex);
    cudaEvent_t watched;
    cudaEventCreateWithFlags(&watched, cudaEventDisableTiming);
    cudaEventRecord(watched, stream);
    in_flight.push_back({watched, std::chrono::steady_clock::now(), op});
    wake.notify_one();
    return done;
  }

  [[noreturn]] void fail(const std::string& message) {
    std::fprintf(stderr, "cmha: rank %d of %d failed: %s\n", rank, world, message.c_str());
    std::fflush(stderr);
    if (comm) nccl().comm_abort(comm);
    std::_Exit(1);  // MPI_Abort could block behind the dead peer; the launcher ends the others
  }

  // Polls NCCL's asynchronous error and the age of each collective in flight.
  // A new thread starts on device 0: without its own cudaSetDevice, the
  // event queries of ranks 1.. would make a context on (and touch) GPU 0.
  void watch() {
    const cudaError_t set = cudaSetDevice(device);
    if (set != cudaSuccess) fail(what("watchdog") + ": cudaSetDevice(" + std::to_string(device) + "): " + cudaGetErrorString(set));
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      wake.wait_for(lock, std::chrono::milliseconds(200));
      ncclResult_t async = ncclSuccess;
      if (comm && nccl().comm_get_async_error(comm, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress)
        fail(what("communicator") + ": " + nccl().error_string(async) + " (a peer failed or the network broke)");
      const auto now = std::chrono::steady_clock::now();
      for (auto it = in_flight.begin(); it != in_flight.end();) {
        const cudaError_t q = cudaEventQuery(it->done);
        if (q == cudaSuccess) {
          cudaEventDestroy(it->done);
          it = in_flight.erase(it);
          continue;
        }
        if (q != cudaErrorNotReady) fail(what(it->what) + ": " + cudaGetErrorString(q));
        if (std::chrono::duration<double>(now - it->since).count() > timeout)
          fail(what(it->what) + " did not finish within " + std::to_string(static_cast<int>(timeout)) +
               " s (train.dist_timeout_s): another rank died or hangs");
        ++it;
      }
    }
  }
};

namespace {

class NcclRequest final : public Request {
 public:
  NcclRequest(cudaEvent_t done, cudaStream_t compute) : done_(done), compute_(compute) {}
  ~NcclRequest() override {
    if (done_) cudaEventDestroy(done_);
  }
  bool test() override { return cudaEventQuery(done_) == cudaSuccess; }
  // The compute stream waits for the result; the host does not.
  void wait() override {
    cuda_check(cudaStreamWaitEvent(compute_, done_, 0), "cudaStreamWaitEvent", "NCCL request wait");
  }

 private:
  cudaEvent_t done_;
  cudaStream_t compute_;
};

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> host, int device, double timeout_seconds)
    : host_(std::move(host)), state_(std::make_shared<State>()) {
  State& s = *state_;
  s.device = device;
  s.rank = host_->rank();
  s.world = host_->size();
  s.timeout = timeout_seconds;
  const std::string what = s.what("start");
  const std::string id = exchange_nccl_unique_id(*host_);  // before any GPU work: it needs none
  cuda_check(cudaSetDevice(device), "cudaSetDevice", what + " (cuda:" + std::to_string(device) + ")");
  s.compute = static_cast<cudaStream_t>(cuda_stream(device));
  int lowest = 0, highest = 0;
  cudaDeviceGetStreamPriorityRange(&lowest, &highest);
  // NCCL's stream at the highest priority, so its kernels are not starved by the backward pass's.
  cuda_check(cudaStreamCreateWithPriority(&s.stream, cudaStreamNonBlocking, highest), "cudaStreamCreateWithPriority",
             what);
  ncclUniqueId uid;
  std::memcpy(uid.internal, id.data(), sizeof uid.internal);
  check_nccl(nccl().comm_init_rank(&s.comm, s.world, uid, s.rank), "ncclCommInitRank", what);
  s.watchdog = std::thread([state = state_] { state->watch(); });
}

NcclCommunicator::~NcclCommunicator() {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stopping = true;
    s.wake.notify_one();
  }
  if (s.watchdog.joinable()) s.watchdog.join();
  if (s.stream) cudaStreamSynchronize(s.stream);
  for (auto& f : s.in_flight) cudaEventDestroy(f.done);
  if (s.comm) nccl().comm_destroy(s.comm);
  if (s.stream) cudaStreamDestroy(s.stream);
}

namespace {
// In-place all-reduce of `count` elements of `type` on the collective stream.
std::unique_ptr<Request> all_reduce_on(NcclCommunicator::State& s, void* data, size_t count, ncclDataType_t type,
                                       ncclRedOp_t op, const char* name) {
  s.order_after_compute();
  check_nccl(nccl().all_reduce(data, data, count, type, op, s.comm, s.stream), "ncclAllReduce", s.what(name));
  return std::make_unique<NcclRequest>(s.finished(name), s.compute);
}
}  // namespace

std::unique_ptr<Request> NcclCommunicator::all_reduce_async(float* data, size_t count, ReduceOp op) {
  return all_reduce_on(*state_, data, count, ncclFloat32, nccl_op(op), "all-reduce");
}

std::unique_ptr<Request> NcclCommunicator::all_reduce_async(bf16* data, size_t count, ReduceOp op) {
  return all_reduce_on(*state_, data, count, ncclBfloat16, nccl_op(op), "bf16 all-reduce");
}

std::unique_ptr<Request> NcclCommunicator::broadcast_async(float* data, size_t count, int root) {
  State& s = *state_;
  s.order_after_compute();
  check_nccl(nccl().broadcast(data, data, count, ncclFloat32, root, s.comm, s.stream), "ncclBroadcast",
             s.what("broadcast"));
  return std::make_unique<NcclRequest>(s.finished("broadcast"), s.compute);
}

std::unique_ptr<Request> NcclCommunicator::all_gather_async(const float* send, float* recv, size_t count) {
  State& s = *state_;
  s.order_after_compute();
  check_nccl(nccl().all_gather(send, recv, count, ncclFloat32, s.comm, s.stream), "ncclAllGather",
             s.what("all-gather"));
  return std::make_unique<NcclRequest>(s.finished("all-gather"), s.compute);
}

std::unique_ptr<Request> NcclCommunicator::reduce_scatter_async(const float* send, float* recv, size_t count,
                                                                ReduceOp op) {
  State& s = *state_;
  s.order_after_compute();
  check_nccl(nccl().reduce_scatter(send, recv, count, ncclFloat32, nccl_op(op), s.comm, s.stream),
             "ncclReduceScatter", s.what("reduce-scatter"));
  return std::make_unique<NcclRequest>(s.finished("reduce-scatter"), s.compute);
}

// The blocking forms order the compute stream after the collective; the host
// reads the result through a device-to-host copy, which waits for it.
void NcclCommunicator::all_reduce(float* data, size_t count, ReduceOp op) { all_reduce_async(data, count, op)->wait(); }
void NcclCommunicator::broadcast(float* data, size_t count, int root) { broadcast_async(data, count, root)->wait(); }
void NcclCommunicator::all_gather(const float* send, float* recv, size_t count) {
  all_gather_async(send, recv, count)->wait();
}
void NcclCommunicator::reduce_scatter(const float* send, float* recv, size_t count, ReduceOp op) {
  reduce_scatter_async(send, recv, count, op)->wait();
}

void NcclCommunicator::barrier() {
  // Everything this rank queued for the collectives is done, then the ranks meet.
  cuda_check(cudaStreamSynchronize(state_->stream), "cudaStreamSynchronize", state_->what("barrier"));
  host_->barrier();
}

void NcclCommunicator::abort(int code) {
  if (state_->comm) nccl().comm_abort(state_->comm);
  host_->abort(code);
  std::abort();  // unreached: host_->abort does not return (the compiler cannot see that through the pointer)
}

}  // namespace cmha::distributed
