#include "autograd/deferred_checks.h"

#include <utility>

#include "tensor/error.h"

namespace cmha::autograd {
namespace {
thread_local DeferredChecks* t_open = nullptr;
}  // namespace

DeferredChecks::DeferredChecks() : outer_(t_open) { t_open = this; }
DeferredChecks::~DeferredChecks() { t_open = outer_; }

void DeferredChecks::add(std::function<void()> check) {
  checks_.push_back({std::move(check), batch_});
  if (checks_.size() >= kMaxPending) run();
}

void DeferredChecks::run() {
  std::vector<Check> due;
  due.swap(checks_);
  for (const Check& c : due) {
    try {
      c.check();
    } catch (const Error& e) {
      if (c.batch.empty()) throw;
      throw Error(std::string(e.what()) + ", in " + c.batch);
    }
  }
}

void check_now_or_deferred(Device device, std::function<void()> check) {
  if (device.is_cpu() || t_open == nullptr) {
    check();
    return;
  }
  t_open->add(std::move(check));
}

}  // namespace cmha::autograd
