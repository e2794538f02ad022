#pragma once
// The rendezvous of a job started without MPI (torchrun-style variables:
// RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): a key-value store that rank 0
// serves over TCP at MASTER_PORT and every rank reaches at
// MASTER_ADDR:MASTER_PORT. The ranks publish what their peers need (gloo's
// addresses, NCCL's unique id, their world size) and wait for the others'.
// Like PyTorch's TCPStore, but only what a rendezvous needs: set and a
// waiting get, each bounded by the job's timeout.
#include <chrono>
#include <memory>
#include <string>

namespace cmha::distributed {

class TcpStore {
 public:
  // serve: this process (rank 0) listens on `port` on every interface.
  // Every process then connects to host:port, retrying until `timeout` has
  // passed (rank 0 may start last). `who` names this process in messages
  // ("rank 1 of 2"). Errors are one sentence naming the address, the
  // variables that gave it and train.dist_timeout_s.
  TcpStore(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout, std::string who);
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::string& value);
  // The value of `key`, once some process has set it; waits at most the
  // timeout, then says which key it waited for (`meaning`: what the key's
  // absence means, e.g. "rank 3 has not joined").
  std::string get(const std::string& key, const std::string& meaning = "");
  std::string address() const;
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Limits on what one request may carry (a malformed or hostile client is
  // dropped, never buffered without bound).
  static constexpr size_t kMaxKeyBytes = 4096;
  static constexpr size_t kMaxValueBytes = size_t{64} << 20;

 private:
  class Server;
  std::unique_ptr<Server> server_;
  std::string host_;
  int port_ = 0;
  std::chrono::milliseconds timeout_;
  std::string who_;
  int fd_ = -1;
};

}  // namespace cmha::distributed
