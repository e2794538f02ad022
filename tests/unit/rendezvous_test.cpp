// Jobs started without MPI (torchrun-style variables): the launcher's
// variables, the TCP store the ranks meet at, and the Gloo communicator's
// collectives and launch errors, with two ranks as two threads of this
// process. (tests/mpi runs the data-parallel suites on two processes over
// Gloo: ctest -L gloo.)
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <thread>

#include "distributed/launch.h"
#include "distributed/tcp_store.h"
#include "support/check.h"
#ifdef CMHA_WITH_GLOO
#include "distributed/gloo_communicator.h"
#include "support/text.h"
#endif

using namespace cmha;
using test::env_of;
using test::error_of;
using namespace std::chrono_literals;

namespace {

using cmha::test::has;


// A port nobody listens on right now (the kernel's pick, released again).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

distributed::Launch torchrun(int rank, int size, int port) {
  return distributed::launch_from_environment(env_of({{"RANK", std::to_string(rank)},
                                               {"WORLD_SIZE", std::to_string(size)},
                                               {"LOCAL_RANK", std::to_string(rank)},
                                               {"MASTER_ADDR", "127.0.0.1"},
                                               {"MASTER_PORT", std::to_string(port)}}));
}

}  // namespace

TEST(Rendezvous, ReadsTorchrunVariablesAfterTheMpiLaunchers) {
  distributed::Launch l = torchrun(1, 4, 29500);
  EXPECT_EQ(l.launcher, "torchrun");
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.master_addr, "127.0.0.1");
  EXPECT_EQ(l.master_port, 29500);
  EXPECT_FALSE(l.mpi_launcher());
  // mpirun's variables win over a WORLD_SIZE left in the environment.
  l = distributed::launch_from_environment(env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"WORLD_SIZE", "8"}}));
  EXPECT_EQ(l.size, 2);
  EXPECT_TRUE(l.mpi_launcher());
  EXPECT_TRUE(has(error_of([] { distributed::launch_from_environment(env_of({{"WORLD_SIZE", "2"}})); }),
                  "WORLD_SIZE is set but RANK is not"));
  EXPECT_TRUE(has(error_of([] {
                    distributed::launch_from_environment(env_of({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_PORT", "70000"}}));
                  }),
                  "MASTER_PORT=70000 is not a TCP port"));
  EXPECT_TRUE(has(error_of([] {
                    distributed::launch_from_environment(env_of({{"WORLD_SIZE", "2"}, {"RANK", "2"}}));
                  }),
                  "RANK=2 is not below WORLD_SIZE=2"));
}

TEST(Rendezvous, TheBackendFollowsTheLauncher) {
  const distributed::Launch two = torchrun(0, 2, 29500);
  EXPECT_TRUE(has(error_of([&] { distributed::make_communicator("mpi", two); }),
                  "torchrun started 2 processes (WORLD_SIZE=2) without MPI but train.dist_backend is mpi"));
  EXPECT_TRUE(has(error_of([&] { distributed::make_communicator("gloo", two, Device::cuda(0)); }),
                  "train.dist_backend=gloo exchanges host memory, but train.device is cuda:0: use nccl"));
  distributed::Launch no_master = two;
  no_master.master_addr.clear();
  const std::string e = error_of([&] { distributed::make_communicator("auto", no_master); });
  if (distributed::gloo_built())
    EXPECT_TRUE(has(e, "rank 0 of 2 needs MASTER_ADDR and MASTER_PORT")) << e;
  else
    EXPECT_TRUE(has(e, "built without it: install libgloo-dev")) << e;
}

TEST(Rendezvous, StoreSetsAndWaitsAcrossRanks) {
  const int port = free_port();
  distributed::TcpStore server("127.0.0.1", port, true, 10s, "rank 0 of 2");
  distributed::TcpStore client("127.0.0.1", port, false, 10s, "rank 1 of 2");
  server.set("a", "alpha");
  EXPECT_EQ(client.get("a"), "alpha");
  // A get waits for a set that comes later, from another rank.
  auto later = std::async(std::launch::async, [&] { return server.get("b"); });
  std::this_thread::sleep_for(50ms);
  const std::string big(1 << 20, 'x');
  client.set("b", big);
  EXPECT_EQ(later.get(), big);
  client.set("empty", "");
  EXPECT_EQ(server.get("empty"), "");
  // Garbage from a stranger drops the stranger, not the store.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const char junk[] = "Xjunkjunkjunk\xff\xff\xff\xff";
  ASSERT_GT(send(fd, junk, sizeof junk, 0), 0);
  char byte = 0;
  EXPECT_EQ(recv(fd, &byte, 1, 0), 0);  // closed by the server
  close(fd);
  EXPECT_EQ(client.get("a"), "alpha");
}

TEST(Rendezvous, WaitsAreBoundedAndNamed) {
  const int port = free_port();
  // Nobody serves: the connect gives up after the timeout, naming the address.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string lost = error_of([&] { distributed::TcpStore("127.0.0.1", port, false, 500ms, "rank 1 of 2"); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_TRUE(has(lost, "MASTER_ADDR:MASTER_PORT=127.0.0.1:" + std::to_string(port)) &&
              has(lost, "rank 1 of 2 could not reach rank 0") && has(lost, "train.dist_timeout_s"))
      << lost;
  // A key nobody sets: the get gives up, naming the key and what its absence means.
  distributed::TcpStore alone("127.0.0.1", port, true, 300ms, "rank 0 of 2");
  const std::string waited = error_of([&] { alone.get("cmha/x", "rank 1 has not joined"); });
  EXPECT_TRUE(has(waited, "waited 0.3 s for 'cmha/x' (rank 1 has not joined)")) << waited;
  // A key past the store's limit is refused before it is sent.
  EXPECT_TRUE(has(error_of([&] { alone.set(std::string(distributed::TcpStore::kMaxKeyBytes + 1, 'k'), "v"); }),
                  "key or value too long"));
  // The port is taken: a second server says so.
  EXPECT_TRUE(has(error_of([&] { distributed::TcpStore("127.0.0.1", port, true, 300ms, "rank 0 of 2"); }),
                  "rank 0 cannot listen on port " + std::to_string(port)));
}

TEST(Rendezvous, ARankZeroThatExitsIsNamed) {
  const int port = free_port();
  auto server = std::make_unique<distributed::TcpStore>("127.0.0.1", port, true, 10s, "rank 0 of 2");
  distributed::TcpStore client("127.0.0.1", port, false, 10s, "rank 1 of 2");
  server.reset();  // rank 0 gone: its store closes every connection
  const std::string e = error_of([&] { client.get("never"); });
  EXPECT_TRUE(has(e, "rank 1 of 2") && (has(e, "rank 0 closed the connection") || has(e, "rank 0 has exited")))
      << e;
}

#ifdef CMHA_WITH_GLOO
TEST(Rendezvous, GlooCollectivesOnTwoRanks) {
  const int port = free_port();
  auto rank = [&](int r) {
    distributed::GlooCommunicator c(torchrun(r, 2, port), 30);
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.size(), 2);
    EXPECT_EQ(c.local_size(), 2);  // one host
    EXPECT_EQ(c.local_rank(), r);
    std::vector<float> x = {1.0f + r, 10.0f * (r + 1), -0.5f};
    c.all_reduce(x.data(), x.size(), distributed::ReduceOp::sum);
    EXPECT_EQ(x, (std::vector<float>{3.0f, 30.0f, -1.0f}));
    std::vector<double> d = {1.0 + r, 4.0};
    c.all_reduce(d.data(), d.size(), distributed::ReduceOp::average);
    EXPECT_EQ(d, (std::vector<double>{1.5, 4.0}));
    // bf16 values, the sum rounded to bf16: (1 + 2^-7) + 2^-8 needs 8 mantissa bits and ties to even, 1 + 2^-6.
    std::vector<bf16> h = {float_to_bf16(r == 0 ? 1.0f + 1.0f / 128 : 1.0f / 256), float_to_bf16(r == 0 ? 3.0f : 5.0f)};
    c.all_reduce_async(h.data(), h.size(), distributed::ReduceOp::sum)->wait();
    EXPECT_EQ(bf16_to_float(h[0]), 1.0f + 1.0f / 64);
    EXPECT_EQ(bf16_to_float(h[1]), 8.0f);
    std::vector<bf16> m = {float_to_bf16(1.0f + static_cast<float>(r))};
    c.all_reduce_async(m.data(), m.size(), distributed::ReduceOp::average)->wait();
    EXPECT_EQ(bf16_to_float(m[0]), 1.5f);
    std::vector<float> big(100003, static_cast<float>(r + 1));
    auto pending = c.all_reduce_async(big.data(), big.size(), distributed::ReduceOp::average);
    std::vector<float> b = {r == 1 ? 7.0f : 0.0f, r == 1 ? 8.0f : 0.0f};
    c.broadcast(b.data(), b.size(), 1);  // queued behind the all-reduce, on every rank
    pending->wait();
    EXPECT_EQ(big[100002], 1.5f);
    EXPECT_EQ(b, (std::vector<float>{7.0f, 8.0f}));
    const float mine[2] = {static_cast<float>(r), static_cast<float>(r) + 0.5f};
    std::vector<float> all(4);
    c.all_gather(mine, all.data(), 2);
    EXPECT_EQ(all, (std::vector<float>{0.0f, 0.5f, 1.0f, 1.5f}));
    const float blocks[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    float got = 0;
    c.reduce_scatter(blocks, &got, 1, distributed::ReduceOp::sum);  // send [2·1]: rank r gets block r summed over ranks
    EXPECT_EQ(got, 2.0f * blocks[r]);
    EXPECT_EQ(c.all_gather_bytes(r == 0 ? "" : "xyz"), (std::vector<std::string>{"", "xyz"}));
    EXPECT_EQ(c.all_gather_bytes(""), (std::vector<std::string>{"", ""}));
    c.barrier();
  };
  auto other = std::async(std::launch::async, rank, 1);
  rank(0);
  other.get();
}

TEST(Rendezvous, GlooRefusesRanksOfDifferentWorldSizes) {
  const int port = free_port();
  auto start = [&](int r, int size) { return error_of([&] { distributed::GlooCommunicator(torchrun(r, size, port), 20); }); };
  auto rank1 = std::async(std::launch::async, start, 1, 3);
  const std::string e0 = start(0, 2);
  const std::string e1 = rank1.get();
  EXPECT_TRUE(has(e0, "rank 1 was started with WORLD_SIZE=3 but rank 0 with WORLD_SIZE=2")) << e0;
  EXPECT_TRUE(has(e1, "rank 0 was started with WORLD_SIZE=2 but rank 1 with WORLD_SIZE=3")) << e1;
}

TEST(Rendezvous, GlooRankZeroAloneTimesOutNamingTheMissingRank) {
  const std::string e = error_of([] { distributed::GlooCommunicator(torchrun(0, 2, free_port()), 0.3); });
  EXPECT_TRUE(has(e, "(rank 1 has not joined)") && has(e, "train.dist_timeout_s")) << e;
}
#endif
