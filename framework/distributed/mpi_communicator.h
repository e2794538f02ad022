#pragma once
// The `mpi` backend: MPI_COMM_WORLD of the processes mpirun or srun started.
// Compiled only when CMake finds MPI (CMHA_MPI); make_communicator
// (distributed/launch.h) is the one way to get it.
//
// Asynchronous collectives are MPI's nonblocking ones (MPI_Iallreduce, ...).
// MPI advances them only inside MPI calls, so the caller pokes them with
// Request::test() while it computes (the gradient buckets do so from the
// gradient-ready hooks of the backward pass). A communication thread would
// do the same without poking, but needs MPI_THREAD_MULTIPLE and a core of
// its own: on CPU clusters every core already runs compute threads.
#include <memory>

#include "distributed/communicator.h"

namespace cmha::distributed {

class MpiCommunicator final : public Communicator {
 public:
  // Initialises MPI (once per process; MPI_Finalize at exit).
  MpiCommunicator();
  ~MpiCommunicator() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  const char* backend() const override { return "mpi"; }
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

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace cmha::distributed
