#include "train/gradient_buckets.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/kernels.h"
#include "tensor/clock.h"
#include "tensor/error.h"

namespace cmha::train {

namespace {
// The one device of the parameters (the CPU when there are none).
Device params_device(const std::vector<Tensor>& params) {
  if (params.empty()) return Device::cpu();
  for (const Tensor& p : params) common_device("GradientBuckets", {params.front(), p});
  return params.front().device();
}
}  // namespace

struct GradientBuckets::State {
  struct Bucket {
    std::vector<int64_t> params;  // parameter indices, in bucket order
    // f32 [Σ numel + params.size()] on the parameters' device: the gradients,
    // then the flags: 1 where this rank has a gradient
    Tensor data;
    Tensor wire;  // bf16 [data.numel()] when the exchange is in bf16: what travels
    int64_t pending = 0;  // parameters not packed yet in this exchange
    std::unique_ptr<distributed::Request> request;
  };

  distributed::Communicator& comm;
  BucketOptions opt;
  std::vector<Tensor> params;
  Device dev;  // the parameters' (and the buckets')
  std::vector<int64_t> bucket_of, offset_of, flag_of;  // per parameter: where it goes
  std::vector<Bucket> buckets;
  std::vector<char> packed;        // per parameter, this exchange
  std::vector<char> local_grad;    // per parameter, this exchange: this rank had a gradient
  std::vector<int64_t> observed;   // ready order seen in the first exchange
  std::vector<int64_t> order;      // the buckets' parameter order
  bool armed = false, rebuilt = false;
  size_t next_launch = 0, next_poke = 0;
  double exposed = 0;

  State(distributed::Communicator& c, BucketOptions o, std::vector<Tensor> p)
      : comm(c), opt(o), params(std::move(p)), dev(params_device(params)) {
    CMHA_CHECK(opt.bucket_bytes > 0, "train.dist_bucket_mb must be positive");
    std::vector<int64_t> reverse(params.size());
    for (size_t i = 0; i < reverse.size(); ++i) reverse[i] = static_cast<int64_t>(reverse.size() - 1 - i);
    build(reverse);
  }

  void build(const std::vector<int64_t>& new_order) {
    order = new_order;
    const size_t n = params.size();
    buckets.clear();
    bucket_of.assign(n, -1);
    offset_of.assign(n, 0);
    flag_of.assign(n, 0);
    packed.assign(n, 0);
    local_grad.assign(n, 0);
    int64_t total = 0;
    for (const Tensor& p : params) total += p.numel() * static_cast<int64_t>(sizeof(float));
    const int64_t cap = std::min<int64_t>(opt.bucket_bytes, std::max<int64_t>(int64_t{1} << 20, total / 8));
    int64_t bytes = cap;  // start a bucket with the first parameter
    std::vector<int64_t> elements;
    for (int64_t i : new_order) {
      const int64_t limit = buckets.size() == 1 ? std::min(cap, opt.first_bucket_bytes) : cap;
      if (bytes >= limit) {
        buckets.emplace_back();
        elements.push_back(0);
        bytes = 0;
      }
      const int64_t numel = params[i].numel();
      bucket_of[i] = static_cast<int64_t>(buckets.size()) - 1;
      offset_of[i] = elements.back();
      elements.back() += numel;
      bytes += numel * static_cast<int64_t>(sizeof(float));
      buckets.back().params.push_back(i);
    }
    for (size_t b = 0; b < buckets.size(); ++b) {
      Bucket& k = buckets[b];
      k.data = Tensor::zeros({elements[b] + static_cast<int64_t>(k.params.size())}, DType::f32, dev);
      if (opt.bf16) k.wire = Tensor::empty(k.data.shape(), DType::bf16, dev);
      k.pending = static_cast<int64_t>(k.params.size());
      for (size_t j = 0; j < k.params.size(); ++j) flag_of[k.params[j]] = elements[b] + static_cast<int64_t>(j);
    }
  }

  // Copies parameter i's gradient (zeros and flag 0 when it has none) into its bucket.
  void pack(int64_t i) {
    Bucket& k = buckets[bucket_of[i]];
    Tensor g = params[i].grad();
    if (g.defined()) g = g.contiguous();
    CMHA_KERNEL(dev, buckets.pack)(g, k.data, offset_of[i], params[i].numel(), flag_of[i]);
    packed[i] = 1;
    local_grad[i] = g.defined();
    --k.pending;
  }

  // Buckets go out in index order only: the same collectives in the same order on every rank.
  void launch_full_buckets() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      Bucket& k = buckets[next_launch++];
      // The tensor's memory on its device: the collectives act where the tensors live.
      if (opt.bf16) {
        CMHA_KERNEL(dev, copy.copy)(k.wire, k.data);  // f32 -> bf16, rounded to nearest even
        k.request = comm.all_reduce_async(static_cast<bf16*>(k.wire.raw_data()), static_cast<size_t>(k.wire.numel()),
                                          distributed::ReduceOp::sum);
      } else {
        k.request = comm.all_reduce_async(static_cast<float*>(k.data.raw_data()), static_cast<size_t>(k.data.numel()),
                                          distributed::ReduceOp::sum);
      }
    }
  }

  // MPI moves nonblocking collectives forward only inside MPI calls: each ready gradient gives it a turn.
  void poke() {
    while (next_poke < next_launch && buckets[next_poke].request->test()) ++next_poke;
  }

  void on_ready(int64_t i) {
    if (!armed || packed[i]) return;
    if (!rebuilt) observed.push_back(i);
    pack(i);
    if (opt.overlap) {
      launch_full_buckets();
      poke();
    }
  }

  void finish(float scale) {
    const auto t0 = std::chrono::steady_clock::now();
    if (comm.size() == 1) {
      for (Tensor& p : params) {
        if (scale == 1.0f) break;
        Tensor g = p.grad();
        if (!g.defined()) continue;
        CMHA_KERNEL(g.device(), buckets.scale)(g, scale);
        g.bump_version();  // in-place writes count for autograd's saved-tensor check (tensor/storage.h)
      }
      armed = false;
      exposed += seconds_since(t0);
      return;
    }
    // Whatever the last backward did not finish (unused parameters, or overlap off) goes now.
    for (size_t b = next_launch; b < buckets.size(); ++b)
      for (int64_t i : buckets[b].params)
        if (!packed[i]) pack(i);
    launch_full_buckets();
    for (Bucket& k : buckets) {
      k.request->wait();
      k.request.reset();
      if (opt.bf16) CMHA_KERNEL(dev, copy.copy)(k.data, k.wire);  // the bf16 sum, widened exactly
      const int64_t elements = k.data.numel() - static_cast<int64_t>(k.params.size());
      // The summed flags, readable on the host (the bucket itself on the CPU), are
      // needed only for a parameter this rank had no gradient of: reading them
      // would make a GPU step wait, and a local gradient makes its flag >= 1.
      bool every_local = true;
      for (int64_t i : k.params) every_local = every_local && local_grad[i];
      const Tensor flags = every_local ? Tensor() : k.data.slice(0, elements, k.data.numel()).to(Device::cpu());
      const float* flag = every_local ? nullptr : flags.data<float>("GradientBuckets");
      for (int64_t i : k.params) {
        // No rank had a gradient: keep none, as one process would.
        if (!local_grad[i] && flag[flag_of[i] - elements] == 0.0f) continue;
        Tensor g = params[i].grad();
        if (!g.defined()) {
          g = Tensor::empty(params[i].shape(), DType::f32, dev);
          params[i].set_grad(g);
        }
        CMHA_CHECK(g.is_contiguous() && offset_of[i] + g.numel() <= elements,
                   "gradient of '" + params[i].name() + "' is not a contiguous tensor of its parameter's size");
        CMHA_KERNEL(dev, buckets.unpack)(k.data, offset_of[i], g, scale);
        g.bump_version();
      }
    }
    if (!rebuilt) rebuild_in_observed_order();
    for (Bucket& k : buckets) k.pending = static_cast<int64_t>(k.params.size());
    std::fill(packed.begin(), packed.end(), 0);
    std::fill(local_grad.begin(), local_grad.end(), 0);
    next_launch = next_poke = 0;
    armed = false;
    exposed += seconds_since(t0);
  }

  // Rank 0's ready order (then the parameters it never saw) becomes every rank's bucket order.
  void rebuild_in_observed_order() {
    rebuilt = true;
    const size_t n = params.size();
    std::vector<char> seen(n, 0);
    std::vector<int64_t> ready;  // parameter indices
    for (int64_t i : observed) {
      ready.push_back(i);
      seen[i] = 1;
    }
    for (size_t i = n; i-- > 0;)
      if (!seen[i]) ready.push_back(static_cast<int64_t>(i));
    // Host bytes, not a tensor collective: the float collectives act on the tensors' device.
    const std::string mine(reinterpret_cast<const char*>(ready.data()), n * sizeof(int64_t));
    const std::string chosen = comm.all_gather_bytes(mine).at(0);
    CMHA_CHECK(chosen.size() == mine.size(), "ranks disagree on the number of parameters (" +
                                                 std::to_string(chosen.size() / sizeof(int64_t)) + " on rank 0, " +
                                                 std::to_string(n) + " here): is every rank running the same model?");
    std::memcpy(ready.data(), chosen.data(), chosen.size());
    build(ready);
    observed.clear();
  }
};

GradientBuckets::GradientBuckets(const std::vector<Tensor>& params, distributed::Communicator& comm, BucketOptions options)
    : state_(std::make_shared<State>(comm, options, params)) {
  if (comm.size() == 1) return;  // nothing to exchange: finish() only scales
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    std::weak_ptr<State> weak = state_;
    p.register_grad_ready_hook([weak, i](Tensor&) {
      if (auto s = weak.lock()) s->on_ready(static_cast<int64_t>(i));
    });
  }
}

GradientBuckets::~GradientBuckets() = default;

void GradientBuckets::arm() { state_->armed = true; }
void GradientBuckets::finish(float scale) { state_->finish(scale); }
int64_t GradientBuckets::buckets() const { return static_cast<int64_t>(state_->buckets.size()); }

std::vector<int64_t> GradientBuckets::agreed_order() const {
  return state_->rebuilt ? state_->order : std::vector<int64_t>{};
}

void GradientBuckets::use_order(const std::vector<int64_t>& order) {
  State& s = *state_;
  std::vector<char> seen(s.params.size(), 0);
  bool permutation = order.size() == s.params.size();
  for (int64_t i : order) {
    permutation = permutation && i >= 0 && i < static_cast<int64_t>(seen.size()) && !seen[i];
    if (permutation) seen[i] = 1;
  }
  CMHA_CHECK(permutation, "the checkpoint's gradient bucket order is not an order of this model's " +
                              std::to_string(s.params.size()) + " parameters");
  s.build(order);
  s.rebuilt = true;
  s.observed.clear();
}
double GradientBuckets::exposed_seconds() const { return state_->exposed; }

}  // namespace cmha::train
