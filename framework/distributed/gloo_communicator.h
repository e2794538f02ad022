#pragma once
// The `gloo` backend: CPU ranks started without mpirun (torchrun-style
// variables RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) train
// together over Gloo, the library PyTorch uses for CPU collectives. Compiled
// only when CMake finds Gloo (CMHA_GLOO); make_communicator (distributed/launch.h)
// is the one way to get it.
//
// The ranks meet at rank 0's TcpStore (distributed/tcp_store.h) and connect a full
// mesh of TCP pairs. Every collective, blocking or not, runs on one
// communication thread in the order it was asked for (the order every rank
// asks in), so an asynchronous all-reduce progresses while the caller's
// backward pass computes: nothing has to poke it. A collective or a
// rendezvous unfinished after the timeout, or a peer that exits, is an error
// naming the rank and the operation.
#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "distributed/launch.h"

namespace cmha::distributed {

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const Launch& launch, double timeout_seconds);
  ~GlooCommunicator() override;
  int rank() const override;
  int size() const override;
  int local_rank() const override;
  int local_size() const override;
  const char* backend() const override { return "gloo"; }
  void all_reduce(float* data, size_t count, ReduceOp op) override;
  void all_reduce(double* data, size_t count, ReduceOp op) override;
  std::unique_ptr<Request> all_reduce_async(float* data, size_t count, ReduceOp op) override;
  std::unique_ptr<Request> all_reduce_async(bf16* data, size_t count, ReduceOp op) override;
  void broadcast(float* data, size_t count, int root) override;
  std::unique_ptr<Request> broadcast_async(float* data, size_t count, int root) override;
  void all_gather(const float* send, float* recv, size_t count) override;
  std::unique_ptr<Request> all_gather_async(const float* send, float* recv, size_t count) override;
  void reduce_scatter(const float* send, float* recv, size_t count, ReduceOp op) override;
  std::unique_ptr<Request> reduce_scatter_async(const float* send, float* recv, size_t count, ReduceOp op) override;
  std::vector<std::string> all_gather_bytes(const std::string& mine) override;
  void barrier() override;
  [[noreturn]] void abort(int code) override;

  // A second communicator over the same ranks: its own Gloo context and TCP
  // pairs, met through this one's store (keys under "gloo/<name>/"), its own
  // communication thread. Collectives called on it never interleave with
  // this one's, so two threads of a rank may each use one (the emulated GPU's
  // comm stream: distributed/emulated_nccl_communicator.h). Every rank opens
  // the same channels in the same order.
  std::unique_ptr<GlooCommunicator> open_channel(const std::string& name);

  struct Impl;

 private:
  explicit GlooCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cmha::distributed
