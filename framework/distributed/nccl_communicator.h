#pragma once
// The `nccl` backend: the float collectives of GPU tensors through NCCL, on a
// communication stream of their own; everything on the host (double
// buffers, bytes, barrier) through the MPI communicator that bootstrapped it
// (distributed/NCCL.md). Built only with CUDA and MPI; make_communicator is the one
// way to get it.
//
// Ordering without host waits: a collective's stream first waits for an
// event recorded on the compute stream (so it sees the packed bucket), and
// its Request records an event after it; wait() makes the compute stream
// wait for that event, so the unpack kernels that follow see the result.
// A watchdog thread polls NCCL's asynchronous errors and the age of every
// collective in flight: a dead or hung peer ends the job within the timeout
// with a message naming this rank, instead of a hang.
#include <memory>

#include "distributed/communicator.h"

namespace cmha::distributed {

class NcclCommunicator final : public Communicator {
 public:
  // Selects the GPU (`device`, a CUDA index) and creates the NCCL
  // communicator over `host`'s ranks. `timeout_seconds` bounds how long a
  // collective may stay unfinished before the job is aborted.
  NcclCommunicator(std::unique_ptr<Communicator> host, int device, double timeout_seconds);
  ~NcclCommunicator() override;
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int local_rank() const override { return host_->local_rank(); }
  int local_size() const override { return host_->local_size(); }
  const char* backend() const override { return "nccl"; }
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
  void barrier() override;
  [[noreturn]] void abort(int code) override;

  struct State;

 private:
  std::unique_ptr<Communicator> host_;
  std::shared_ptr<State> state_;
};

}  // namespace cmha::distributed
