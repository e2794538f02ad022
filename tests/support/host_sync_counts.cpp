#include "support/host_sync_counts.h"

#include <gtest/gtest.h>

namespace cmha::test {

namespace {

uint64_t total_waits(const HostWaitsByCause& c) {
  uint64_t n = 0;
  for (const auto& [cause, k] : c) n += k;
  return n;
}

HostWaitsByCause waits_between(const HostWaitsByCause& later, const HostWaitsByCause& earlier) {
  HostWaitsByCause d;
  for (const auto& [cause, n] : later) {
    const auto before = earlier.find(cause);
    const uint64_t k = n - (before == earlier.end() ? 0 : before->second);
    if (k > 0) d[cause] = k;
  }
  return d;
}

std::string describe_waits(const HostWaitsByCause& c) {
  std::string s;
  for (const auto& [cause, n] : c) s += (s.empty() ? "" : ", ") + cause + " " + std::to_string(n);
  return s.empty() ? "none" : s;
}

}  // namespace

void expect_waits_only_at_log_lines(const std::vector<HostWaitsByCause>& at, const std::string& what) {
  ASSERT_EQ(at.size(), 7u) << what;
  for (size_t u = 1; u + 1 < at.size(); ++u) {  // update u+1's waits (0-based u: update 1 is at[0])
    const int64_t update = static_cast<int64_t>(u) + 1;
    const HostWaitsByCause waits = waits_between(at[u + 1], at[u]);
    if (update % 3 != 0) {
      EXPECT_EQ(total_waits(waits), 0u) << what << ": update " << update << " waited: " << describe_waits(waits);
    } else {
      EXPECT_LE(total_waits(waits), 3u) << what << ": log line at update " << update << ": " << describe_waits(waits);
      for (const auto& [cause, n] : waits)
        EXPECT_EQ(cause, "copy to host") << what << ": " << describe_waits(waits);
    }
  }
}

}  // namespace cmha::test
