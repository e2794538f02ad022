#pragma once
// The count of issue 33's "no host wait in a training step", shared by the
// one-rank test (tests/unit/training_host_syncs_test.cpp) and the 2-rank one
// (tests/mpi/host_syncs_test.cpp): the asynchronous emulator's host waits by
// cause (emulated_host_syncs_by_cause), read at each update's gradient
// exchange (the trainer polls its stop hook there) and differenced. The
// waits from update u's exchange to update u+1's are update u's clipping,
// step and log line (when u is a logging update) and update u+1's forward
// and backward passes.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cmha::test {

using HostWaitsByCause = std::map<std::string, uint64_t>;

// `at_exchange`: the counts at updates 1..7's exchanges of a run logging
// every 3 updates (3 and 6), with no checkpoint or validation before the
// end. From update 2 on, each non-logging update must wait 0 times; a
// logging update's waits must be copies to the host, at most one per dtype
// read (the checks' answers and the counts in i64, the losses in f32).
// Failures name `what`.
void expect_waits_only_at_log_lines(const std::vector<HostWaitsByCause>& at_exchange, const std::string& what);

}  // namespace cmha::test
