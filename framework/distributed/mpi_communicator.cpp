#include "distributed/mpi_communicator.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <functional>

#include "tensor/error.h"

namespace cmha::distributed {

namespace {

// MPI reports errors as codes once MPI_ERRORS_RETURN is set: one sentence naming the call and the rank.
void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw Error(std::string(call) + " failed on rank " + std::to_string(rank) + ": " + std::string(text, length));
}

int as_int(size_t count, const char* call) {
  CMHA_CHECK(count <= static_cast<size_t>(INT_MAX),
             std::string(call) + ": " + std::to_string(count) + " elements are more than MPI's int count allows");
  return static_cast<int>(count);
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// A nonblocking collective; `arrived` runs once its result is in (for
// ReduceOp::average: the scaling of the sum).
class MpiRequest final : public Request {
 public:
  MpiRequest(MPI_Request r, std::function<void()> arrived) : req_(r), arrived_(std::move(arrived)) {}
  // A request still in flight here was dropped by an exception unwinding towards
  // run_or_abort: waiting could block forever (the other ranks may never join),
  // and MPI_Abort follows, so it is left alone.
  ~MpiRequest() override = default;
  bool test() override {
    if (done_) return true;
    int flag = 0;
    check(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) finish();
    return done_;
  }
  void wait() override {
    if (done_) return;
    check(MPI_Wait(&req_, MPI_STATUS_IGNORE), "MPI_Wait");
    finish();
  }

 private:
  void finish() {
    done_ = true;
    if (arrived_) arrived_();
  }
  MPI_Request req_;
  std::function<void()> arrived_;
  bool done_ = false;
};

std::function<void()> scaling(float* out, size_t count, float factor) {
  if (factor == 1.0f) return {};
  return [=] { scale_in_place(out, count, factor); };
}

// MPI has no bf16: the values travel as MPI_UINT16_T with this sum.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  sum_bf16(static_cast<const bf16*>(in), static_cast<const bf16*>(inout), static_cast<bf16*>(inout),
           static_cast<size_t>(*len));
}

}  // namespace

MpiCommunicator::MpiCommunicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Only the thread that owns the communicator calls MPI; OpenMP threads never do.
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    std::atexit(finalize_at_exit);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
}

MpiCommunicator::~MpiCommunicator() = default;

void MpiCommunicator::all_reduce(float* data, size_t count, ReduceOp op) {
  check(MPI_Allreduce(MPI_IN_PLACE, data, as_int(count, "MPI_Allreduce"), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce");
  if (op == ReduceOp::average) scale_in_place(data, count, 1.0f / static_cast<float>(size_));
}

void MpiCommunicator::all_reduce(double* data, size_t count, ReduceOp op) {
  check(MPI_Allreduce(MPI_IN_PLACE, data, as_int(count, "MPI_Allreduce"), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce");
  if (op == ReduceOp::average) scale_in_place(data, count, 1.0 / static_cast<double>(size_));
}

std::unique_ptr<Request> MpiCommunicator::all_reduce_async(float* data, size_t count, ReduceOp op) {
  MPI_Request r;
  check(MPI_Iallreduce(MPI_IN_PLACE, data, as_int(count, "MPI_Iallreduce"), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r),
        "MPI_Iallreduce");
  return std::make_unique<MpiRequest>(r, scaling(data, count, op == ReduceOp::average ? 1.0f / static_cast<float>(size_) : 1.0f));
}

std::unique_ptr<Request> MpiCommunicator::all_reduce_async(bf16* data, size_t count, ReduceOp op) {
  static MPI_Op sum = [] {
    MPI_Op o;
    check(MPI_Op_create(&bf16_sum, /*commute=*/1, &o), "MPI_Op_create");
    return o;
  }();
  MPI_Request r;
  check(MPI_Iallreduce(MPI_IN_PLACE, data, as_int(count, "MPI_Iallreduce"), MPI_UINT16_T, sum, MPI_COMM_WORLD, &r),
        "MPI_Iallreduce");
  std::function<void()> arrived;
  if (op == ReduceOp::average) arrived = [data, count, f = 1.0f / static_cast<float>(size_)] { scale_bf16(data, count, f); };
  return std::make_unique<MpiRequest>(r, std::move(arrived));
}

void MpiCommunicator::broadcast(float* data, size_t count, int root) {
  check(MPI_Bcast(data, as_int(count, "MPI_Bcast"), MPI_FLOAT, root, MPI_COMM_WORLD), "MPI_Bcast");
}

std::unique_ptr<Request> MpiCommunicator::broadcast_async(float* data, size_t count, int root) {
  MPI_Request r;
  check(MPI_Ibcast(data, as_int(count, "MPI_Ibcast"), MPI_FLOAT, root, MPI_COMM_WORLD, &r), "MPI_Ibcast");
  return std::make_unique<MpiRequest>(r, std::function<void()>{});
}

void MpiCommunicator::all_gather(const float* send, float* recv, size_t count) {
  const int n = as_int(count, "MPI_Allgather");
  check(MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, MPI_COMM_WORLD), "MPI_Allgather");
}

std::unique_ptr<Request> MpiCommunicator::all_gather_async(const float* send, float* recv, size_t count) {
  const int n = as_int(count, "MPI_Iallgather");
  MPI_Request r;
  check(MPI_Iallgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, MPI_COMM_WORLD, &r), "MPI_Iallgather");
  return std::make_unique<MpiRequest>(r, std::function<void()>{});
}

void MpiCommunicator::reduce_scatter(const float* send, float* recv, size_t count, ReduceOp op) {
  check(MPI_Reduce_scatter_block(send, recv, as_int(count, "MPI_Reduce_scatter_block"), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD),
        "MPI_Reduce_scatter_block");
  if (op == ReduceOp::average) scale_in_place(recv, count, 1.0f / static_cast<float>(size_));
}

std::unique_ptr<Request> MpiCommunicator::reduce_scatter_async(const float* send, float* recv, size_t count,
                                                               ReduceOp op) {
  MPI_Request r;
  check(MPI_Ireduce_scatter_block(send, recv, as_int(count, "MPI_Ireduce_scatter_block"), MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD, &r),
        "MPI_Ireduce_scatter_block");
  return std::make_unique<MpiRequest>(r, scaling(recv, count, op == ReduceOp::average ? 1.0f / static_cast<float>(size_) : 1.0f));
}

std::vector<std::string> MpiCommunicator::all_gather_bytes(const std::string& mine) {
  const int length = as_int(mine.size(), "MPI_Allgatherv");
  std::vector<int> lengths(size_), offsets(size_);
  check(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
  size_t total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[r] = as_int(total, "MPI_Allgatherv");
    total += static_cast<size_t>(lengths[r]);
  }
  std::string all(total, '\0');
  check(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                       MPI_COMM_WORLD),
        "MPI_Allgatherv");
  std::vector<std::string> out(size_);
  for (int r = 0; r < size_; ++r) out[r] = all.substr(offsets[r], lengths[r]);
  return out;
}

void MpiCommunicator::barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

void MpiCommunicator::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; in case an implementation does
}

}  // namespace cmha::distributed
