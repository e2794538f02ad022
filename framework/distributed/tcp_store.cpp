#include "distributed/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "tensor/error.h"

namespace cmha::distributed {

// Wire format, little-endian: a request is an op byte, a u32 key length and
// the key; a set ('S') adds a u64 value length and the value and is answered
// by 'k'; a get ('G') is answered by a u64 length and the value once the key
// has been set. A client sends one request at a time.
namespace {

using Clock = std::chrono::steady_clock;

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::string errno_text() { return std::strerror(errno); }

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

// Milliseconds left until `deadline` (0 once it has passed).
int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(std::min<long long>(left, 1 << 30)) : 0;
}

}  // namespace

// Rank 0's side: one thread polls the listening socket and every client.
class TcpStore::Server {
 public:
  Server(int port, const std::string& what) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    AddrInfo ai;
    const std::string service = std::to_string(port);
    const int gai = getaddrinfo(nullptr, service.c_str(), &hints, &ai.list);
    CMHA_CHECK(gai == 0, what + ": cannot listen on port " + service + ": " + gai_strerror(gai));
    std::string failure;
    // IPv6 first (dual stack: it takes IPv4 peers too), then IPv4.
    for (int family : {AF_INET6, AF_INET}) {
      for (addrinfo* a = ai.list; a && listen_fd_ < 0; a = a->ai_next) {
        if (a->ai_family != family) continue;
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        const int one = 1, zero = 0;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
          listen_fd_ = fd;
        } else {
          failure = errno_text();
          close(fd);
        }
      }
    }
    CMHA_CHECK(listen_fd_ >= 0, what + ": rank 0 cannot listen on port " + service + " (MASTER_PORT): " +
                                    (failure.empty() ? "no usable address" : failure) +
                                    "; choose another port (another job may hold it)");
    if (pipe2(wake_, O_CLOEXEC) != 0) {
      close(listen_fd_);
      throw Error(what + ": cannot create the rendezvous server's wake-up pipe: " + errno_text());
    }
    thread_ = std::thread([this] { loop(); });
  }

  ~Server() {
    const char byte = 0;
    if (write(wake_[1], &byte, 1) < 0) {
    }  // nothing to do: the loop also ends when the pipe closes
    thread_.join();
    for (auto& c : clients_) close(c.fd);
    close(listen_fd_);
    close(wake_[0]);
    close(wake_[1]);
  }

 private:
  struct Client {
    int fd = -1;
    std::string in, out;
    std::optional<std::string> waiting;  // the key of a get not yet answered
    bool dead = false;
  };

  static void answer_get(Client& c, const std::string& value) {
    put_le(c.out, value.size(), 8);
    c.out += value;
  }

  // Takes every complete request off c.in. A request over the limits drops the client.
  void parse(Client& c) {
    while (!c.dead && !c.waiting) {
      if (c.in.size() < 5) return;
      const char op = c.in[0];
      const uint64_t key_len = get_le(c.in.data() + 1, 4);
      if ((op != 'S' && op != 'G') || key_len > kMaxKeyBytes) {
        c.dead = true;
        return;
      }
      size_t need = 5 + key_len;
      uint64_t value_len = 0;
      if (op == 'S') {
        if (c.in.size() < need + 8) return;
        value_len = get_le(c.in.data() + need, 8);
        if (value_len > kMaxValueBytes) {
          c.dead = true;
          return;
        }
        need += 8 + value_len;
      }
      if (c.in.size() < need) return;
      std::string key = c.in.substr(5, key_len);
      if (op == 'S') {
        std::string value = c.in.substr(need - value_len, value_len);
        c.out.push_back('k');
        for (auto& other : clients_)
          if (other.waiting == key) {
            answer_get(other, value);
            other.waiting.reset();
          }
        values_[key] = std::move(value);
      } else if (auto it = values_.find(key); it != values_.end()) {
        answer_get(c, it->second);
      } else {
        c.waiting = std::move(key);
      }
      c.in.erase(0, need);
    }
  }

  void loop() {
    std::vector<pollfd> fds;
    char buffer[65536];
    for (;;) {
      fds.clear();
      fds.push_back({wake_[0], POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (const auto& c : clients_) fds.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      if (poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) clients_.push_back(Client{fd, {}, {}, {}, false});
      }
      // clients_ may have grown: only the first fds.size() - 2 have poll results.
      for (size_t i = 0; i + 2 < fds.size(); ++i) {
        Client& c = clients_[i];
        const short ev = fds[i + 2].revents;
        if (ev & POLLIN) {
          const ssize_t n = recv(c.fd, buffer, sizeof buffer, 0);
          if (n <= 0) c.dead = true;
          else c.in.append(buffer, static_cast<size_t>(n));
          parse(c);
        } else if (ev & (POLLERR | POLLHUP | POLLNVAL)) {
          c.dead = true;
        }
      }
      for (auto& c : clients_) {
        if (c.dead || c.out.empty()) continue;
        const ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) c.out.erase(0, static_cast<size_t>(n));
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
        if (c.out.empty() && !c.dead) parse(c);  // a request that waited behind the answer
      }
      for (size_t i = clients_.size(); i-- > 0;)
        if (clients_[i].dead) {
          close(clients_[i].fd);
          clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i));
        }
    }
  }

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::vector<Client> clients_;
  std::map<std::string, std::string> values_;
  std::thread thread_;
};

namespace {

std::string seconds(std::chrono::milliseconds t) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(t.count()) / 1000.0);
  return text;
}

std::string hint(std::chrono::milliseconds timeout) {
  return "; train.dist_timeout_s (" + seconds(timeout) + " now) sets how long the ranks wait";
}

}  // namespace

TcpStore::TcpStore(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout, std::string who)
    : host_(host), port_(port), timeout_(timeout), who_(std::move(who)) {
  const std::string what = "rendezvous at MASTER_ADDR:MASTER_PORT=" + address();
  CMHA_CHECK(port > 0 && port < 65536, what + ": MASTER_PORT must be a TCP port (1 to 65535)");
  if (serve) server_ = std::make_unique<Server>(port, what);
  const Clock::time_point deadline = Clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string failure;
  for (;;) {
    AddrInfo ai;
    const int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &ai.list);
    if (gai != 0) {
      failure = std::string("cannot resolve '") + host + "': " + gai_strerror(gai);
      if (gai != EAI_AGAIN) break;
    }
    for (addrinfo* a = gai == 0 ? ai.list : nullptr; a && fd_ < 0; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fd_ = fd;
      } else {
        failure = errno_text();
        close(fd);
      }
    }
    if (fd_ >= 0 || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 0 may not be listening yet
  }
  if (fd_ < 0) {
    server_.reset();
    throw Error(what + ": " + who_ + " could not reach rank 0 within " + seconds(timeout) + " (" + failure +
                "): is rank 0 running, and do MASTER_ADDR and MASTER_PORT name its host and a free port" +
                hint(timeout));
  }
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) close(fd_);
  server_.reset();
}

std::string TcpStore::address() const { return host_ + ":" + std::to_string(port_); }

namespace {

void send_all(int fd, const std::string& bytes, const std::string& what) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    CMHA_CHECK(n > 0, what + ": the connection to rank 0 failed (" + errno_text() + "): rank 0 has exited");
    sent += static_cast<size_t>(n);
  }
}

// Reads exactly n bytes before `deadline`; false when it passes first.
bool read_exact(int fd, char* out, size_t n, Clock::time_point deadline, const std::string& what) {
  size_t got = 0;
  while (got < n) {
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, ms_left(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return false;
    const ssize_t r = recv(fd, out + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    CMHA_CHECK(r > 0, what + ": rank 0 closed the connection (it has exited or failed)");
    got += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

void TcpStore::set(const std::string& key, const std::string& value) {
  const std::string what = "rendezvous at " + address() + ": " + who_ + " setting '" + key + "'";
  CMHA_CHECK(key.size() <= kMaxKeyBytes && value.size() <= kMaxValueBytes, what + ": key or value too long");
  std::string frame = "S";
  put_le(frame, key.size(), 4);
  frame += key;
  put_le(frame, value.size(), 8);
  frame += value;
  send_all(fd_, frame, what);
  char ack = 0;
  CMHA_CHECK(read_exact(fd_, &ack, 1, Clock::now() + timeout_, what) && ack == 'k',
             what + ": rank 0 did not acknowledge within the timeout" + hint(timeout_));
}

std::string TcpStore::get(const std::string& key, const std::string& meaning) {
  const std::string what = "rendezvous at " + address() + ": " + who_;
  CMHA_CHECK(key.size() <= kMaxKeyBytes, what + ": key too long");
  std::string frame = "G";
  put_le(frame, key.size(), 4);
  frame += key;
  send_all(fd_, frame, what);
  const Clock::time_point deadline = Clock::now() + timeout_;
  char length[8];
  const bool arrived = read_exact(fd_, length, 8, deadline, what);
  CMHA_CHECK(arrived, what + " waited " + seconds(timeout_) + " for '" + key + "'" +
                          (meaning.empty() ? "" : " (" + meaning + ")") + hint(timeout_));
  const uint64_t n = get_le(length, 8);
  CMHA_CHECK(n <= kMaxValueBytes, what + ": a value of " + std::to_string(n) + " bytes for '" + key + "' is not cmha's");
  std::string value(n, '\0');
  CMHA_CHECK(read_exact(fd_, value.data(), n, Clock::now() + timeout_, what),
             what + ": the value of '" + key + "' stopped arriving" + hint(timeout_));
  return value;
}

}  // namespace cmha::distributed
