#include "distributed/emulated_nccl_communicator.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>

#include "tensor/emulated_stream.h"

namespace cmha::distributed {

namespace {

// The end of a collective on the comm stream.
class EmulatedNcclRequest final : public Request {
 public:
  explicit EmulatedNcclRequest(EmulatedEvent done) : done_(std::move(done)) {}
  bool test() override { return done_.query(); }
  // The compute stream waits for the result; the host does not.
  void wait() override { done_.wait_on(EmulatedStreamId::compute); }

 private:
  EmulatedEvent done_;
};

// Queues `collective` on the comm stream after the compute stream's work so
// far (it sees the packed bucket), and returns its request.
std::unique_ptr<Request> launch_on_comm_stream(const std::shared_ptr<Communicator>& channel, const char* name,
                                std::function<void(Communicator&)> collective) {
  EmulatedEvent ready;
  ready.record(EmulatedStreamId::compute);
  ready.wait_on(EmulatedStreamId::comm);
  // Raw pointers only: a tensor held here would be freed on the comm stream's thread.
  emulated_enqueue(EmulatedStreamId::comm, [channel, name, collective = std::move(collective)] {
    try {
      collective(*channel);
    } catch (const std::exception& e) {
      // The compute stream waits for this collective's event, which will never come.
      std::fprintf(stderr, "cmha: rank %d of %d failed: %s on the emulated GPU's comm stream: %s\n", channel->rank(),
                   channel->size(), name, e.what());
      std::fflush(stderr);
      std::_Exit(1);  // the peers' collectives fail as this process's connections close
    }
  });
  EmulatedEvent done;
  done.record(EmulatedStreamId::comm);
  return std::make_unique<EmulatedNcclRequest>(std::move(done));
}

}  // namespace

EmulatedNcclCommunicator::EmulatedNcclCommunicator(std::unique_ptr<Communicator> host,
                                                   std::unique_ptr<Communicator> channel)
    : host_(std::move(host)), channel_(std::move(channel)) {}

EmulatedNcclCommunicator::~EmulatedNcclCommunicator() {
  emulated_drain();  // nothing queued may outlive the ranks' meeting (the channel itself is shared)
}

std::unique_ptr<Request> EmulatedNcclCommunicator::all_reduce_async(float* data, size_t count, ReduceOp op) {
  if (count == 0) return std::make_unique<CompletedRequest>();
  return launch_on_comm_stream(channel_, "all-reduce", [=](Communicator& c) { c.all_reduce(data, count, op); });
}

std::unique_ptr<Request> EmulatedNcclCommunicator::all_reduce_async(bf16* data, size_t count, ReduceOp op) {
  if (count == 0) return std::make_unique<CompletedRequest>();
  // Each partial sum rounded to bf16 (sum_bf16), as NCCL's bf16 all-reduce.
  return launch_on_comm_stream(channel_, "bf16 all-reduce", [=](Communicator& c) { c.all_reduce_async(data, count, op)->wait(); });
}

std::unique_ptr<Request> EmulatedNcclCommunicator::broadcast_async(float* data, size_t count, int root) {
  if (count == 0) return std::make_unique<CompletedRequest>();
  return launch_on_comm_stream(channel_, "broadcast", [=](Communicator& c) { c.broadcast(data, count, root); });
}

std::unique_ptr<Request> EmulatedNcclCommunicator::all_gather_async(const float* send, float* recv, size_t count) {
  if (count == 0) return std::make_unique<CompletedRequest>();
  return launch_on_comm_stream(channel_, "all-gather", [=](Communicator& c) { c.all_gather(send, recv, count); });
}

std::unique_ptr<Request> EmulatedNcclCommunicator::reduce_scatter_async(const float* send, float* recv, size_t count,
                                                                        ReduceOp op) {
  if (count == 0) return std::make_unique<CompletedRequest>();
  return launch_on_comm_stream(channel_, "reduce-scatter", [=](Communicator& c) { c.reduce_scatter(send, recv, count, op); });
}

// The blocking forms order the compute stream after the collective; the host
// reads the result through a device-to-host copy, which waits for it.
void EmulatedNcclCommunicator::all_reduce(float* data, size_t count, ReduceOp op) {
  all_reduce_async(data, count, op)->wait();
}
void EmulatedNcclCommunicator::broadcast(float* data, size_t count, int root) {
  broadcast_async(data, count, root)->wait();
}
void EmulatedNcclCommunicator::all_gather(const float* send, float* recv, size_t count) {
  all_gather_async(send, recv, count)->wait();
}
void EmulatedNcclCommunicator::reduce_scatter(const float* send, float* recv, size_t count, ReduceOp op) {
  reduce_scatter_async(send, recv, count, op)->wait();
}

void EmulatedNcclCommunicator::barrier() {
  // Everything this rank queued for the collectives is done, then the ranks meet.
  emulated_synchronize(EmulatedStreamId::comm, "communicator barrier");
  host_->barrier();
}

void EmulatedNcclCommunicator::abort(int code) {
  host_->abort(code);
  std::abort();  // unreached: host_->abort does not return (the compiler cannot see that through the pointer)
}

}  // namespace cmha::distributed
