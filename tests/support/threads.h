#pragma once
// The OpenMP thread count for one call, for tests of thread-count independence.
#include <omp.h>

namespace cmha::test {

// Runs f with `threads` OpenMP threads, restoring the previous setting; f's result.
template <typename F>
auto with_threads(int threads, F f) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  auto result = f();
  omp_set_num_threads(before);
  return result;
}

}  // namespace cmha::test
