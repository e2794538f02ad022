#include "distributed/gloo_communicator.h"

#include <arpa/inet.h>
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "distributed/tcp_store.h"
#include "tensor/error.h"

namespace cmha::distributed {

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// gloo's rendezvous through cmha's store, its keys under `prefix` ("gloo/",
// or "gloo/<channel>/" for a channel's context). Its keys are rank numbers:
// a missing one is a rank that has not joined.
class StoreForGloo final : public gloo::rendezvous::Store {
 public:
  StoreForGloo(TcpStore& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = store_.get(prefix_ + key, meaning(key));
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) store_.get(prefix_ + k, meaning(k));
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override { wait(keys); }

 private:
  static std::string meaning(const std::string& key) {
    const bool number = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
    return number ? "rank " + key + " has not joined" : "";
  }
  TcpStore& store_;
  const std::string prefix_;
};

// The address this host uses to reach rank 0's host: the one the other ranks
// can reach it at, on a cluster with several networks. "" when the route
// cannot be found (gloo then resolves this host's name).
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* list = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list) != 0) return "";
  std::string out;
  for (addrinfo* a = list; a && out.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    // A UDP connect sends nothing: it only picks the route and the source address.
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* addr = local.ss_family == AF_INET6
                             ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                             : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
      if (inet_ntop(local.ss_family, addr, text, sizeof text)) out = text;
    }
    close(fd);
  }
  freeaddrinfo(list);
  return out;
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

class GlooRequest final : public Request {
 public:
  explicit GlooRequest(std::shared_future<void> done) : done_(std::move(done)) {}
  bool test() override {
    if (done_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    done_.get();  // rethrows the collective's error
    return true;
  }
  void wait() override { done_.get(); }

 private:
  std::shared_future<void> done_;
};

}  // namespace

struct GlooCommunicator::Impl {
  Launch launch;
  std::string who;
  std::shared_ptr<TcpStore> store;  // shared with the channels opened from it
  gloo::transport::tcp::attr attr;  // how this rank's pairs listen and connect
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<gloo::rendezvous::Context> context;
  int local_rank = 0, local_size = 1;
  uint32_t next_tag = 0;  // the communication thread's alone

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::packaged_task<void()>> queue;
  bool stopping = false;
  std::thread thread;

  // Runs `body` on the communication thread after everything asked before;
  // gloo's errors become one sentence naming the rank and the collective.
  std::shared_future<void> submit(const char* name, std::function<void(uint32_t tag)> body) {
    std::packaged_task<void()> task([this, name, body = std::move(body)] {
      const uint32_t tag = next_tag++;
      try {
        body(tag);
      } catch (const gloo::Exception& e) {
        throw Error("gloo " + std::string(name) + " on " + who + " failed: " + e.what() +
                    " (a peer exited or hung past train.dist_timeout_s, or the network failed)");
      }
    });
    std::shared_future<void> done = task.get_future().share();
    {
      std::lock_guard<std::mutex> lock(mutex);
      queue.push_back(std::move(task));
    }
    wake.notify_one();
    return done;
  }

  void run_queue() {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        task = std::move(queue.front());
        queue.pop_front();
      }
      task();
    }
  }

  template <typename T>
  void all_reduce_now(T* data, size_t count, ReduceOp op, uint32_t tag) {
    gloo::AllreduceOptions o(context);
    o.setOutput(data, count);
    o.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<T>));
    o.setTag(tag);
    gloo::allreduce(o);
    if (op == ReduceOp::average) scale_in_place(data, count, static_cast<T>(1) / static_cast<T>(context->size));
  }

  // Connects this rank's context to the others' (keys under `prefix`) and
  // starts the communication thread.
  void connect(const std::string& prefix) {
    StoreForGloo gloo_store(*store, prefix);
    try {
      auto device = gloo::transport::tcp::CreateDevice(attr);
      context = std::make_shared<gloo::rendezvous::Context>(launch.rank, launch.size);
      context->setTimeout(timeout);
      context->connectFullMesh(gloo_store, device);
    } catch (const gloo::Exception& e) {
      throw Error("gloo could not connect " + who + " to the other ranks (" + e.what() +
                  "); set GLOO_SOCKET_IFNAME to the network interface the ranks share");
    }
    thread = std::thread([this] { run_queue(); });
  }
};

GlooCommunicator::GlooCommunicator(const Launch& launch, double timeout_seconds) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.launch = launch;
  m.who = "rank " + std::to_string(launch.rank) + " of " + std::to_string(launch.size);
  CMHA_CHECK(!launch.master_addr.empty() && launch.master_port > 0,
             "train.dist_backend=gloo: " + m.who + " needs MASTER_ADDR and MASTER_PORT (rank 0's host and a free "
             "port, as torchrun sets them) to find the other ranks");
  m.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_seconds * 1000.0));
  m.store = std::make_shared<TcpStore>(launch.master_addr, launch.master_port, launch.rank == 0, m.timeout, m.who);

  // Every rank must have been told the same world size. Rank 0 publishes
  // its own and checks each other rank's; the others read rank 0's before
  // they publish theirs, so they know of a mismatch even when rank 0 has
  // already given up and closed the store.
  const std::string size_text = std::to_string(launch.size);
  const auto world_key = [](int r) { return "cmha/world_size/" + std::to_string(r); };
  const auto mismatch = [&](int other, const std::string& theirs) {
    return Error("rank " + std::to_string(other) + " was started with " + launch.size_variable + "=" + theirs +
                 " but rank " + std::to_string(launch.rank) + " with " + launch.size_variable + "=" + size_text +
                 ": start every rank with the same world size");
  };
  if (launch.rank == 0) {
    m.store->set(world_key(0), size_text);
    for (int r = 1; r < launch.size; ++r) {
      const std::string theirs = m.store->get(world_key(r), "rank " + std::to_string(r) + " has not joined");
      if (theirs != size_text) throw mismatch(r, theirs);
    }
  } else {
    const std::string rank0 = m.store->get(world_key(0), "rank 0 has not published its world size");
    try {
      m.store->set(world_key(launch.rank), size_text);
    } catch (const Error&) {
      if (rank0 != size_text) throw mismatch(0, rank0);
      throw;
    }
    if (rank0 != size_text) throw mismatch(0, rank0);
  }

  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME")) m.attr.iface = iface;
  else m.attr.hostname = local_address_towards(launch.master_addr, launch.master_port);
  m.connect("gloo/");

  // Ranks on this host: those that share its name, in rank order.
  const std::vector<std::string> hosts = all_gather_bytes(host_name());
  m.local_size = 0;
  for (int r = 0; r < launch.size; ++r) {
    if (hosts[static_cast<size_t>(r)] != hosts[static_cast<size_t>(launch.rank)]) continue;
    if (r < launch.rank) ++m.local_rank;
    ++m.local_size;
  }
}

GlooCommunicator::GlooCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<GlooCommunicator> GlooCommunicator::open_channel(const std::string& name) {
  const Impl& m = *impl_;
  auto c = std::make_unique<Impl>();
  c->launch = m.launch;
  c->who = m.who;
  c->store = m.store;
  c->attr = m.attr;
  c->timeout = m.timeout;
  c->local_rank = m.local_rank;
  c->local_size = m.local_size;
  c->connect("gloo/" + name + "/");
  return std::unique_ptr<GlooCommunicator>(new GlooCommunicator(std::move(c)));
}

GlooCommunicator::~GlooCommunicator() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_one();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int GlooCommunicator::rank() const { return impl_->launch.rank; }
int GlooCommunicator::size() const { return impl_->launch.size; }
int GlooCommunicator::local_rank() const { return impl_->local_rank; }
int GlooCommunicator::local_size() const { return impl_->local_size; }

std::unique_ptr<Request> GlooCommunicator::all_reduce_async(float* data, size_t count, ReduceOp op) {
  if (count == 0) return std::make_unique<CompletedRequest>();
  return std::make_unique<GlooRequest>(
      impl_->submit("all-reduce", [this, data, count, op](uint32_t tag) { impl_->all_reduce_now(data, count, op, tag); }));
}

void GlooCommunicator::all_reduce(float* data, size_t count, ReduceOp op) { all_reduce_async(data, count, op)->wait(); }

std::unique_ptr<Request> GlooCommunicator::all_reduce_async(bf16* data, size_t count, ReduceOp op) {
  if (count == 0) return std::make_unique<CompletedRequest>();
  return std::make_unique<GlooRequest>(impl_->submit("all-reduce", [this, data, count, op](uint32_t tag) {
    gloo::AllreduceOptions o(impl_->context);
    o.setOutput(reinterpret_cast<uint16_t*>(data), count);  // gloo knows no bf16: 2-byte elements, cmha's sum
    o.setReduceFunction(static_cast<ReduceFn>([](void* c, const void* a, const void* b, size_t n) {
      sum_bf16(static_cast<const bf16*>(a), static_cast<const bf16*>(b), static_cast<bf16*>(c), n);
    }));
    o.setTag(tag);
    gloo::allreduce(o);
    if (op == ReduceOp::average) scale_bf16(data, count, 1.0f / static_cast<float>(impl_->context->size));
  }));
}

void GlooCommunicator::all_reduce(double* data, size_t count, ReduceOp op) {
  if (count == 0) return;
  impl_->submit("all-reduce", [this, data, count, op](uint32_t tag) { impl_->all_reduce_now(data, count, op, tag); })
      .get();
}

std::unique_ptr<Request> GlooCommunicator::broadcast_async(float* data, size_t count, int root) {
  if (count == 0) return std::make_unique<CompletedRequest>();
  return std::make_unique<GlooRequest>(impl_->submit("broadcast", [this, data, count, root](uint32_t tag) {
    gloo::BroadcastOptions o(impl_->context);
    o.setOutput(data, count);
    o.setRoot(root);
    o.setTag(tag);
    gloo::broadcast(o);
  }));
}

void GlooCommunicator::broadcast(float* data, size_t count, int root) { broadcast_async(data, count, root)->wait(); }

std::unique_ptr<Request> GlooCommunicator::all_gather_async(const float* send, float* recv, size_t count) {
  if (count == 0) return std::make_unique<CompletedRequest>();
  return std::make_unique<GlooRequest>(impl_->submit("all-gather", [this, send, recv, count](uint32_t tag) {
    gloo::AllgatherOptions o(impl_->context);
    o.setInput(const_cast<float*>(send), count);
    o.setOutput(recv, count * static_cast<size_t>(impl_->context->size));
    o.setTag(tag);
    gloo::allgather(o);
  }));
}

void GlooCommunicator::all_gather(const float* send, float* recv, size_t count) { all_gather_async(send, recv, count)->wait(); }

std::unique_ptr<Request> GlooCommunicator::reduce_scatter_async(const float* send, float* recv, size_t count,
                                                                ReduceOp op) {
  if (count == 0) return std::make_unique<CompletedRequest>();
  // This Gloo has no reduce-scatter collective with options: all-reduce a
  // copy and keep this rank's block (twice the bytes of a true reduce-scatter).
  return std::make_unique<GlooRequest>(impl_->submit("reduce-scatter", [this, send, recv, count, op](uint32_t tag) {
    const size_t n = count * static_cast<size_t>(impl_->context->size);
    std::vector<float> all(send, send + n);
    impl_->all_reduce_now(all.data(), n, op, tag);
    std::memcpy(recv, all.data() + count * static_cast<size_t>(impl_->context->rank), count * sizeof(float));
  }));
}

void GlooCommunicator::reduce_scatter(const float* send, float* recv, size_t count, ReduceOp op) {
  reduce_scatter_async(send, recv, count, op)->wait();
}

std::vector<std::string> GlooCommunicator::all_gather_bytes(const std::string& mine) {
  const int n = impl_->context->size;
  std::vector<std::string> out(static_cast<size_t>(n));
  impl_->submit("all-gather", [&](uint32_t tag) {
    int64_t length = static_cast<int64_t>(mine.size());
    std::vector<int64_t> lengths(static_cast<size_t>(n));
    gloo::AllgatherOptions o(impl_->context);
    o.setInput(&length, 1);
    o.setOutput(lengths.data(), lengths.size());
    o.setTag(tag);
    gloo::allgather(o);
    std::vector<size_t> counts(lengths.begin(), lengths.end());
    size_t total = 0;
    for (size_t c : counts) total += c;
    if (total == 0) return;
    std::string all(total, '\0');
    std::string send = mine;  // gloo's input pointer is not const
    gloo::AllgathervOptions v(impl_->context);
    v.setInput(send.data(), send.size());
    v.setOutput(all.data(), counts);
    v.setTag(tag);
    gloo::allgatherv(v);
    size_t at = 0;
    for (int r = 0; r < n; ++r) {
      out[static_cast<size_t>(r)] = all.substr(at, counts[static_cast<size_t>(r)]);
      at += counts[static_cast<size_t>(r)];
    }
  }).get();
  return out;
}

void GlooCommunicator::barrier() {
  impl_->submit("barrier", [this](uint32_t tag) {
    gloo::BarrierOptions o(impl_->context);
    o.setTag(tag);
    gloo::barrier(o);
  }).get();
}

void GlooCommunicator::abort(int code) {
  // The peers' collectives fail as this process's connections close, and
  // they end the same way (dist::run_or_abort).
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace cmha::distributed
