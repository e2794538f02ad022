// cmha dist-check: what a user runs first on a new cluster. Under any
// launcher (or alone), every rank reports where it runs; then an all-reduce
// and a broadcast are checked element for element and the all-reduce's
// bandwidth is measured at a few sizes, as nccl-tests reports it.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "distributed/collective_check.h"
#include "distributed/launch.h"
#include "run/device.h"
#include "tensor/device.h"
#include "tensor/error.h"

namespace cmha::cli {

namespace {

const char* kDistCheckDescription =
    "Checks a data-parallel launch: run it the way you will run 'cmha train'\n"
    "(mpirun -np N, srun, or alone). Every rank reports its host, its rank and\n"
    "local rank and the device 'train.device=cuda' would give it; then an\n"
    "all-reduce (sum) and a broadcast are checked element for element on every\n"
    "rank, and the all-reduce is timed at sizes from 4 KiB up to --max-mb:\n"
    "algbw = bytes / time, busbw = algbw · 2(n-1)/n (what each link carries, as\n"
    "nccl-tests reports it). Exit 0 when every check holds, 1 when one fails.\n";

// "host | rank r | local l of L | device" of this rank.
std::string where_am_i(const distributed::Communicator& comm) {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  const int gpus = cuda_device_count();
  const std::string device =
      gpus == 0 ? "cpu (no GPU visible)"
                : (comm.local_rank() < gpus ? run::describe_device(Device::cuda(comm.local_rank()))
                                            : "cpu: local rank " + std::to_string(comm.local_rank()) + " has no GPU (" +
                                                  std::to_string(gpus) + " visible)");
  return std::string(host) + "\t" + std::to_string(comm.rank()) + "\t" + std::to_string(comm.local_rank()) + "/" +
         std::to_string(comm.local_size()) + "\t" + device;
}

std::string human_bytes(size_t b) {
  char buf[32];
  if (b >= (size_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
  else
    std::snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
  return buf;
}

}  // namespace

int dist_check_command(const Args& args) {
  std::string backend = "auto";
  long long max_mb = 64, iterations = 20;
  CommandLine cl("dist-check", kDistCheckDescription);
  cl.app().add_option("--backend", backend, "communicator, as train.dist_backend")
      ->check(one_of({"auto", "single", "mpi"}))->capture_default_str();
  cl.app().add_option("--max-mb", max_mb, "largest all-reduce, in MiB")
      ->check(whole_number(1, 16384))->type_name("MB")->capture_default_str();
  cl.app().add_option("--iterations", iterations, "timed all-reduces per size (the median is shown)")
      ->check(whole_number(1, 100000))->type_name("N")->capture_default_str();
  if (!cl.parse(args)) return 0;
  const distributed::Launch launch = distributed::launch_from_environment();
  const auto comm = distributed::make_communicator(backend, launch);
  return distributed::run_or_abort(*comm, [&] {
    const std::vector<std::string> ranks = comm->all_gather_bytes(where_am_i(*comm));
    const bool main = comm->is_main();
    if (main) {
      std::printf("cmha dist-check: %d rank%s, backend %s%s\n", comm->size(), comm->size() == 1 ? "" : "s",
                  comm->backend(), launch.launcher.empty() ? "" : (", launched by " + launch.launcher).c_str());
      std::printf("%-24s %6s %7s  %s\n", "host", "rank", "local", "device");
      for (const std::string& line : ranks) {
        std::vector<std::string> f;
        size_t start = 0;
        for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
          f.push_back(line.substr(start, tab - start));
        f.push_back(line.substr(start));
        std::printf("%-24s %6s %7s  %s\n", f[0].c_str(), f[1].c_str(), f[2].c_str(), f[3].c_str());
      }
      std::printf("\n%10s %12s %12s %12s  %s\n", "size", "time (us)", "algbw GB/s", "busbw GB/s", "checks");
    }
    bool all_ok = true;
    const double world = comm->size();
    for (size_t bytes = 4 << 10; bytes <= static_cast<size_t>(max_mb) << 20; bytes *= 16) {
      const distributed::CollectiveCheck r = distributed::check_collectives(*comm, bytes, static_cast<int>(iterations));
      all_ok = all_ok && r.all_reduce_ok && r.broadcast_ok;
      if (!main) continue;
      const double algbw = static_cast<double>(r.bytes) / r.seconds / 1e9;
      char bw[64] = "           -            -";  // one rank: nothing crosses a link
      if (world > 1) std::snprintf(bw, sizeof bw, "%12.2f %12.2f", algbw, algbw * 2.0 * (world - 1) / world);
      std::printf("%10s %12.1f %s  %s\n", human_bytes(r.bytes).c_str(), r.seconds * 1e6, bw,
                  r.all_reduce_ok && r.broadcast_ok ? "all-reduce ok, broadcast ok"
                  : !r.all_reduce_ok              ? "ALL-REDUCE WRONG on some rank"
                                                  : "BROADCAST WRONG on some rank");
    }
    if (main) std::printf("%s\n", all_ok ? "every check holds" : "a collective gave wrong values: see the table");
    return all_ok ? 0 : 1;
  });
}

}  // namespace cmha::cli
