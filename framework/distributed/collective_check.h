#pragma once
// The check `cmha dist-check` runs at each size: an all-reduce (sum) and a
// broadcast compared element for element on every rank, then the all-reduce
// timed, as nccl-tests times it.
#include <cstddef>

#include "distributed/communicator.h"

namespace cmha::distributed {

struct CollectiveCheck {
  size_t bytes = 0;
  double seconds = 0;  // median of the timed all-reduces
  bool all_reduce_ok = false, broadcast_ok = false;  // on every rank
};

// Every rank calls it with the same arguments; every rank gets every rank's verdict.
CollectiveCheck check_collectives(Communicator& comm, size_t bytes, int iterations);

}  // namespace cmha::distributed
