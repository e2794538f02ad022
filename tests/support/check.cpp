#include "support/check.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tensor/rng.h"
#include "support/source_paths.h"

namespace cmha::test {

namespace {
double weighted_sum(const Tensor& out, const std::vector<float>& w) {
  std::vector<float> v = out.to_float_vector();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += static_cast<double>(v[i]) * w[i];
  return s;
}
}  // namespace

::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                     const std::vector<Tensor>& inputs, GradcheckOptions opt) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) t.impl().grad.reset();
  Tensor out = fn(inputs);
  Tensor w = random_tensor(out.shape(), opt.seed, -1.0f, 1.0f);
  out.backward(w);
  const std::vector<float> wv = w.to_float_vector();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    if (!x.grad().defined()) return ::testing::AssertionFailure() << "input " << k << " received no gradient";
    const std::vector<float> analytic = x.grad().to_float_vector();
    autograd::NoGradGuard no_grad;
    float* px = x.data<float>();  // inputs are contiguous leaves
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float saved = px[i];
      px[i] = saved + opt.eps;
      const double up = weighted_sum(fn(inputs), wv);
      px[i] = saved - opt.eps;
      const double down = weighted_sum(fn(inputs), wv);
      px[i] = saved;
      const double numeric = (up - down) / (2.0 * opt.eps);
      const double err = std::fabs(analytic[i] - numeric);
      if (err > opt.atol + opt.rtol * std::fabs(numeric))
        return ::testing::AssertionFailure() << "input " << k << " element " << i << ": analytic " << analytic[i]
                                             << " vs numeric " << numeric << " (|diff| " << err << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, float atol, float rtol) {
  if (!actual.defined() || !expected.defined())
    return ::testing::AssertionFailure() << "undefined tensor in comparison";
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape()) << " vs expected "
                                         << shape_str(expected.shape());
  const std::vector<float> a = actual.to_float_vector(), e = expected.to_float_vector();
  double worst = -1;
  size_t at = 0;
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - e[i]);
    const bool nan_mismatch = std::isnan(a[i]) != std::isnan(e[i]);
    if (nan_mismatch || d > atol + rtol * std::fabs(e[i])) {
      ++bad;
      if (nan_mismatch || d > worst) {
        worst = nan_mismatch ? INFINITY : d;
        at = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.size() << " elements differ; worst at flat index " << at
                                       << ": " << a[at] << " vs expected " << e[at] << " (atol " << atol
                                       << ", rtol " << rtol << ")";
}

Tensor random_tensor(const Shape& shape, uint64_t seed, float low, float high, bool requires_grad) {
  Generator gen(seed);
  Tensor t = Tensor::empty(shape);
  uniform_(t, gen, low, high);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

SafetensorsFile load_fixture(const std::string& name) {
  return load_safetensors(std::string(CMHA_FIXTURE_DIR) + "/" + name + ".safetensors");
}

std::string interop_fixture(const std::string& name) {
  return std::string(CMHA_FIXTURE_DIR) + "/interop_" + name + ".safetensors";
}

Tensor fixture_tensor(const SafetensorsFile& f, const std::string& key, bool requires_grad) {
  auto it = f.tensors.find(key);
  if (it == f.tensors.end()) {
    ADD_FAILURE() << "fixture has no tensor '" << key << "'";
    return Tensor::zeros({1});
  }
  Tensor t = it->second.detach().clone();
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

::testing::AssertionResult matches_fixture(const std::string& name,
                                           const std::function<Tensor(const FixtureInputs&)>& fn, float atol,
                                           float rtol) {
  SafetensorsFile f = load_fixture(name);
  FixtureInputs in;
  for (const auto& [key, t] : f.tensors)
    if (key.rfind("in.", 0) == 0) in[key.substr(3)] = fixture_tensor(f, key, is_floating(t.dtype()));
  Tensor out = fn(in);
  auto r = all_close(out, f.tensors.at("out"), atol, rtol);
  if (!r) return ::testing::AssertionFailure() << name << " output: " << r.message();
  if (!out.requires_grad()) return ::testing::AssertionSuccess();
  out.backward(f.tensors.at("grad_out"));
  for (const auto& [key, t] : f.tensors) {
    if (key.rfind("grad.", 0) != 0) continue;
    const std::string input = key.substr(5);
    if (!in.at(input).grad().defined())
      return ::testing::AssertionFailure() << name << ": no gradient reached input '" << input << "'";
    auto g = all_close(in.at(input).grad(), t, atol, rtol);
    if (!g) return ::testing::AssertionFailure() << name << " gradient of '" << input << "': " << g.message();
  }
  return ::testing::AssertionSuccess();
}

CommandResult run_cmha(const std::string& args) {
  const std::string cmd = std::string(CMHA_BINARY_DIR) + "/cmha " + args + " 2>&1";
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error was raised; expected one mentioning '" << (parts.empty() ? "" : parts[0]) << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

std::function<const char*(const char*)> env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

std::string temp_dir(const std::string& tag) {
  auto base = std::filesystem::temp_directory_path() / ("cmha_test_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(base);
  return base.string();
}

std::string fresh_dir(const std::string& tag) {
  const std::string dir = temp_dir(tag);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         (x.nbytes() == 0 || std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0);
}

::testing::AssertionResult same_values(const Tensor& actual, const Tensor& expected) {
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << actual.describe() << " vs " << expected.describe();
  const std::vector<float> a = actual.to_float_vector(), e = expected.to_float_vector();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != e[i] && !(std::isnan(a[i]) && std::isnan(e[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << e[i];
  return ::testing::AssertionSuccess();
}

}  // namespace cmha::test
