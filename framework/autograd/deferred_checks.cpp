#include "autograd/deferred_checks.h"

#include <utility>

#include "tensor/error.h"
#include "tensor/read_together.h"

namespace cmha::autograd {
namespace {
thread_local DeferredChecks* t_open = nullptr;
}  // namespace

DeferredChecks::Scope::Scope(DeferredChecks& checks) : outer_(t_open) { t_open = &checks; }
DeferredChecks::Scope::~Scope() { t_open = outer_; }

void DeferredChecks::add(Tensor answer, CheckVerdict verdict) {
  checks_.push_back({std::move(answer), std::move(verdict), batch_});
  if (checks_.size() >= kMaxPending) run();
}

void DeferredChecks::run() {
  std::vector<Check> due;
  due.swap(checks_);
  if (due.empty()) return;
  std::vector<Tensor> answers;
  answers.reserve(due.size());
  for (const Check& c : due) answers.push_back(c.answer);
  const std::vector<Tensor> read = read_together(answers);
  for (size_t i = 0; i < due.size(); ++i) {
    try {
      due[i].verdict(read[i]);
    } catch (const Error& e) {
      if (due[i].batch.empty()) throw;
      throw Error(std::string(e.what()) + ", in " + due[i].batch);
    }
  }
}

void check_now_or_deferred(const Tensor& answer, CheckVerdict verdict) {
  if (answer.device().is_cpu()) {
    verdict(answer);
    return;
  }
  if (t_open == nullptr) {
    verdict(answer.to(Device::cpu()));
    return;
  }
  t_open->add(answer, std::move(verdict));
}

}  // namespace cmha::autograd
