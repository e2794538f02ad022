#include "distributed/collective_check.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace cmha::distributed {
namespace {

// Element i of rank r's buffer: exact in f32, and so is any sum of them over ranks.
float value_of(int rank, size_t i) { return static_cast<float>(rank + 1) + static_cast<float>(i % 7); }

}  // namespace

CollectiveCheck check_collectives(Communicator& comm, size_t bytes, int iterations) {
  const size_t n = bytes / sizeof(float);
  const int world = comm.size();
  std::vector<float> buf(n);
  CollectiveCheck r;
  r.bytes = bytes;
  // Correctness first: Σ_r (r + 1 + i%7) = world(world+1)/2 + world·(i%7), exactly.
  for (size_t i = 0; i < n; ++i) buf[i] = value_of(comm.rank(), i);
  comm.all_reduce(buf.data(), n, ReduceOp::sum);
  const float base = static_cast<float>(world) * static_cast<float>(world + 1) / 2.0f;
  bool ok = true;
  for (size_t i = 0; i < n && ok; ++i) ok = buf[i] == base + static_cast<float>(world) * static_cast<float>(i % 7);
  for (size_t i = 0; i < n; ++i) buf[i] = comm.rank() == 0 ? value_of(0, i) : -1.0f;
  comm.broadcast(buf.data(), n, 0);
  bool bok = true;
  for (size_t i = 0; i < n && bok; ++i) bok = buf[i] == value_of(0, i);
  // Every rank's verdict, so rank 0 can say which one failed.
  double flags[2] = {ok ? 0.0 : 1.0, bok ? 0.0 : 1.0};
  comm.all_reduce(flags, 2, ReduceOp::sum);
  r.all_reduce_ok = flags[0] == 0.0;
  r.broadcast_ok = flags[1] == 0.0;
  // Then speed: the median of `iterations` all-reduces after one warm-up.
  std::vector<double> times;
  comm.all_reduce(buf.data(), n, ReduceOp::sum);
  for (int k = 0; k < iterations; ++k) {
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    comm.all_reduce(buf.data(), n, ReduceOp::sum);
    // After the barrier every rank starts together; an all-reduce ends on a
    // rank only once every rank's data has reached it.
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
  r.seconds = times[times.size() / 2];
  return r;
}

}  // namespace cmha::distributed
