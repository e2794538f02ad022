#pragma once
// The trainer always talks to a Communicator; world size 1 is the `single`
// backend. Collectives act on contiguous f32 buffers; the MPI (CPU) and NCCL
// (GPU) backends implement the same calls.
#include <cstddef>
#include <memory>
#include <string>

namespace cmha::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;
  // In place: every rank ends with the element-wise sum.
  virtual void all_reduce_sum(float* data, size_t count) = 0;
  virtual void all_reduce_sum(double* data, size_t count) = 0;
  // In place: every rank ends with root's values.
  virtual void broadcast(float* data, size_t count, int root) = 0;
  virtual void barrier() = 0;
  bool is_main() const { return rank() == 0; }
};

// World size 1: every collective is the identity.
class SingleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "single"; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum(double*, size_t) override {}
  void broadcast(float*, size_t, int) override {}
  void barrier() override {}
};

}  // namespace cmha::dist
