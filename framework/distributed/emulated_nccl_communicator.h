#pragma once
// The `emulated-nccl` backend: data-parallel ranks on the asynchronous
// emulated GPU (CMHA_EMULATE_CUDA=async, tensor/emulated_stream.h), ordered
// exactly as NcclCommunicator (distributed/nccl_communicator.h) orders them
// on a GPU, and built without CUDA (CI's sanitized build emulates too).
// make_communicator picks it for train.device=cuda under the asynchronous
// emulator when several ranks start under torchrun-style variables.
//
// A float or bf16 collective records an event on the compute stream and
// queues, on the comm stream, a wait for that event and then the collective
// itself; its Request's test() queries the event recorded after it, and
// wait() makes the compute stream wait for that event: the host never waits.
// The blocking forms do the same and wait(): the compute stream's later
// work sees the result, and the host reads it only through a finished copy.
//
// The collective runs on `channel`, a host communicator of its own over the
// same ranks (GlooCommunicator::open_channel), called from the comm stream's
// thread alone. It cannot share the host communicator (double buffers,
// bytes, barrier): Gloo matches collectives by the order they are called in
// on one context, and the host thread's and the comm stream's calls
// interleave differently on each rank. A collective that fails on the comm
// stream (a peer died, or hung past train.dist_timeout_s) ends the process
// with a message naming the rank, as NCCL's watchdog does: the compute
// stream would otherwise wait for it forever.
#include <memory>

#include "distributed/communicator.h"

namespace cmha::distributed {

class EmulatedNcclCommunicator final : public Communicator {
 public:
  // `host` and `channel`: two communicators over the same ranks, in the same rank order.
  EmulatedNcclCommunicator(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> channel);
  ~EmulatedNcclCommunicator() override;
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int local_rank() const override { return host_->local_rank(); }
  int local_size() const override { return host_->local_size(); }
  const char* backend() const override { return "emulated-nccl"; }
  void all_reduce(float* data, size_t count, ReduceOp op) override;
  void all_reduce(double* data, size_t count, ReduceOp op) override { host_->all_reduce(data, count, op); }
  std::unique_ptr<Request> all_reduce_async(float* data, size_t count, ReduceOp op) override;
  std::unique_ptr<Request> all_reduce_async(bf16* data, size_t count, ReduceOp op) override;
  void broadcast(float* data, size_t count, int root) override;
  std::unique_ptr<Request> broadcast_async(float* data, size_t count, int root) override;
  void all_gather(const float* send, float* recv, size_t count) override;
  std::unique_ptr<Request> all_gather_async(const float* send, float* recv, size_t count) override;
  void reduce_scatter(const float* send, float* recv, size_t count, ReduceOp op) override;
  std::unique_ptr<Request> reduce_scatter_async(const float* send, float* recv, size_t count, ReduceOp op) override;
  std::vector<std::string> all_gather_bytes(const std::string& mine) override { return host_->all_gather_bytes(mine); }
  // Waits for the comm stream (a counted host wait), then meets the other ranks on the host.
  void barrier() override;
  [[noreturn]] void abort(int code) override;

 private:
  std::unique_ptr<Communicator> host_;
  std::shared_ptr<Communicator> channel_;  // shared with the queued collectives
};

}  // namespace cmha::distributed
