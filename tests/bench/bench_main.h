#pragma once
// The main() both benchmark programs share: the OpenMP wait policy, 3
// repetitions by default, Google Benchmark's run, then the program's summary.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cmha::bench {

// On a 2-core machine shared with other work, libgomp's default wait policy
// (spin, then sleep) makes a 2-thread parallel region wait for a time slice
// on the busy core: we measured 8 ms per empty region, against 10 us with
// OMP_WAIT_POLICY=passive. libgomp reads the variable when it loads, so when
// it is unset the program sets it and runs itself again. Set it yourself
// (e.g. OMP_WAIT_POLICY=active on a dedicated machine) to override.
inline void ensure_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);
  std::perror("re-running with OMP_WAIT_POLICY=passive failed; going on with the default");
}

inline int run_main(int argc, char** argv, void (*register_all)(), void (*print_summary)()) {
  ensure_wait_policy(argv);
  std::printf("OMP_WAIT_POLICY=%s\n", std::getenv("OMP_WAIT_POLICY"));
  register_all();
  // Defaults that a command-line flag given later overrides.
  std::vector<char*> args{argv[0], const_cast<char*>("--benchmark_repetitions=3")};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}

}  // namespace cmha::bench
