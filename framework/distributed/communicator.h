#pragma once
// The trainer always talks to a Communicator; world size 1 is the `single`
// backend, `mpi` (distributed/mpi_communicator.h) runs under mpirun or srun, and a
// GPU backend (NCCL, see distributed/NCCL.md) implements the same calls. Collectives
// must be called by every rank in the same order (the usual MPI/NCCL rule);
// asynchronous ones return a handle. Float buffers are tensor data and live
// where the tensors live (host memory for the CPU backend, device memory for
// CUDA); double buffers and bytes are always host memory (counts, metrics,
// small state), so a GPU backend routes them through its host bootstrap.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace cmha::distributed {

enum class ReduceOp { sum, average };

// ReduceOp::average in host memory (the MPI and Gloo backends): the sum's
// elements times `factor`, 1 / ranks.
template <typename T>
void scale_in_place(T* data, size_t count, T factor) {
  for (size_t i = 0; i < count; ++i) data[i] *= factor;
}

// An asynchronous collective in flight. The buffer it was given must stay
// alive and untouched until wait() returns.
class Request {
 public:
  virtual ~Request() = default;
  // True once the result is in the buffer; lets the backend make progress
  // (MPI's nonblocking collectives advance only inside MPI calls).
  virtual bool test() = 0;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The rank among the processes on this machine (which GPU, how many threads).
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual const char* backend() const = 0;

  // In place: every rank ends with the element-wise sum (or mean) over ranks.
  virtual void all_reduce(float* data, size_t count, ReduceOp op) = 0;
  virtual void all_reduce(double* data, size_t count, ReduceOp op) = 0;
  virtual std::unique_ptr<Request> all_reduce_async(float* data, size_t count, ReduceOp op) = 0;
  // The same on bf16 values (half the bytes: train.dist_grad_dtype=bf16):
  // each partial sum is rounded to bf16 (sum_bf16), as NCCL does; the mean
  // is the sum times 1/size, rounded once more.
  virtual std::unique_ptr<Request> all_reduce_async(bf16* data, size_t count, ReduceOp op) = 0;
  // In place: every rank ends with root's values.
  virtual void broadcast(float* data, size_t count, int root) = 0;
  virtual std::unique_ptr<Request> broadcast_async(float* data, size_t count, int root) = 0;
  // send [count] from every rank → recv [size()·count], rank r's block at r·count.
  virtual void all_gather(const float* send, float* recv, size_t count) = 0;
  virtual std::unique_ptr<Request> all_gather_async(const float* send, float* recv, size_t count) = 0;
  // send [size()·count] → recv [count]: rank r gets the reduction of block r over ranks.
  virtual void reduce_scatter(const float* send, float* recv, size_t count, ReduceOp op) = 0;
  virtual std::unique_ptr<Request> reduce_scatter_async(const float* send, float* recv, size_t count,
                                                        ReduceOp op) = 0;
  // Every rank's bytes (of any length), in rank order, on every rank.
  virtual std::vector<std::string> all_gather_bytes(const std::string& mine) = 0;
  virtual void barrier() = 0;
  // Ends every process of the job now with `code` (after a rank failed: the
  // others may be blocked in a collective that will never complete).
  [[noreturn]] virtual void abort(int code) = 0;

  bool is_main() const { return rank() == 0; }
};

// out[i] = bf16(float(a[i]) + float(b[i])), rounded to nearest even: the
// reduction of the bf16 all-reduce in the host-memory backends (commutative,
// so every rank gets the same bits whichever partner adds). And x ← bf16(x·factor).
void sum_bf16(const bf16* a, const bf16* b, bf16* out, size_t count);
void scale_bf16(bf16* x, size_t count, float factor);

// A request that completed when it was made.
class CompletedRequest final : public Request {
 public:
  bool test() override { return true; }
  void wait() override {}
};

// World size 1: every collective is the identity (or a copy).
class SingleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  const char* backend() const override { return "single"; }
  void all_reduce(float*, size_t, ReduceOp) override {}
  void all_reduce(double*, size_t, ReduceOp) override {}
  std::unique_ptr<Request> all_reduce_async(float*, size_t, ReduceOp) override;
  std::unique_ptr<Request> all_reduce_async(bf16*, size_t, ReduceOp) override;
  void broadcast(float*, size_t, int) override {}
  std::unique_ptr<Request> broadcast_async(float*, size_t, int) override;
  void all_gather(const float* send, float* recv, size_t count) override;
  std::unique_ptr<Request> all_gather_async(const float* send, float* recv, size_t count) override;
  void reduce_scatter(const float* send, float* recv, size_t count, ReduceOp) override;
  std::unique_ptr<Request> reduce_scatter_async(const float* send, float* recv, size_t count, ReduceOp op) override;
  std::vector<std::string> all_gather_bytes(const std::string& mine) override { return {mine}; }
  void barrier() override {}
  [[noreturn]] void abort(int code) override;
};

}  // namespace cmha::distributed
