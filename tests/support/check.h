#pragma once
// Test helpers: numerical gradient checks, tolerance comparisons and the
// PyTorch reference fixtures.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tensor/safetensors.h"
#include "tensor/tensor.h"

namespace cmha::test {

struct GradcheckOptions {
  float eps = 1e-2f;   // central-difference step (f32 needs a large one)
  float atol = 2e-3f;  // |analytic - numeric| <= atol + rtol·|numeric|
  float rtol = 2e-2f;
  uint64_t seed = 7;   // for the random projection of the output
};

// Checks the gradient of fn at `inputs` (f32 leaves; those with requires_grad
// are checked) against central differences of L = Σ fn(x)·w for a random w.
::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                     const std::vector<Tensor>& inputs, GradcheckOptions opt = {});

// Elementwise |a - b| <= atol + rtol·|b|; the message names the worst element.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, float atol = 1e-5f,
                                     float rtol = 1e-4f);

// A uniform random f32 tensor in [low, high), seeded.
Tensor random_tensor(const Shape& shape, uint64_t seed, float low = -1.0f, float high = 1.0f,
                     bool requires_grad = false);

// tests/reference/fixtures/interop_<name>.safetensors: a timm, Hugging Face
// or fairseq checkpoint (tests/reference/fixtures_interop.py).
std::string interop_fixture(const std::string& name);
// The PyTorch fixture tests/reference/fixtures/<name>.safetensors.
SafetensorsFile load_fixture(const std::string& name);
// Fixture tensor `key` (fails the test when absent); with requires_grad set when asked.
Tensor fixture_tensor(const SafetensorsFile& f, const std::string& key, bool requires_grad = false);

// Runs fn on fixture `name`'s inputs (in.<k>, floating ones requiring grad),
// backpropagates its grad_out, and compares out and every grad.<k>.
using FixtureInputs = std::map<std::string, Tensor>;
::testing::AssertionResult matches_fixture(const std::string& name,
                                           const std::function<Tensor(const FixtureInputs&)>& fn,
                                           float atol = 1e-5f, float rtol = 1e-4f);

// Runs the built `cmha <args>` through the shell (args quoted by the caller)
// and returns its exit code and stdout+stderr together.
struct CommandResult {
  int code = -1;
  std::string output;
};
CommandResult run_cmha(const std::string& args);

// The message of the cmha::Error that f throws, or "(no error)".
std::string error_of(const std::function<void()>& f);
// fn must throw a cmha::Error whose message holds every one of `parts` (a
// failure of the calling test otherwise).
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts);

// An environment of exactly these variables, as dist::launch_from_environment reads one.
std::function<const char*(const char*)> env_of(std::map<std::string, std::string> vars);

// A fresh temporary directory for a test, removed by the caller if wanted.
std::string temp_dir(const std::string& tag);
// temp_dir(tag) emptied of what an earlier run left there.
std::string fresh_dir(const std::string& tag);

// The same dtype, shape and bytes (contiguous copies compared).
bool same_bytes(const Tensor& a, const Tensor& b);
// The same shape and values, NaN where the expected value is NaN; the
// message names the first element that differs.
::testing::AssertionResult same_values(const Tensor& actual, const Tensor& expected);

}  // namespace cmha::test
