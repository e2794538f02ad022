// The optim family on cuda:0 against the CPU.
//
// adam_step, sgd_step and ema_update: the CUDA kernels do the CPU build's
// arithmetic operation for operation, fusing a·b + c exactly where g++
// -march=native does (support/fused_reference.h). Each GPU result must be
// the host evaluation of that arithmetic bit for bit, and the CPU's bit for
// bit where this CPU build gives the same bits (tests/unit/
// cpu_fused_arithmetic_test.cpp checks it does on x86-64 with FMA). Where a
// CPU build rounds each product on its own, every operation may differ by
// half an ulp: the normalised error stays near (4·2⁻²⁴)² ≈ 6e-14, so 1e-12.
//
// sum_squares: both devices sum chunks of 2^16 elements in double and add the
// chunk sums in list order, but inside a chunk in different orders (8 CPU
// lanes, 256 GPU threads then a tree). Summing positive terms, the
// difference is a few rounding errors of a double relative to the sum
// (typically ~√65536·1.1e-16 ≈ 3e-14): 1e-12 relative. A GPU result must be
// the same on every run.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "backend/kernels.h"
#include "cuda/parity.h"
#include "support/fused_reference.h"

using namespace cmha;
using namespace cmha::test;

namespace {

const int64_t kParameterSizes[] = {0, 1, 7, 33, 1003, 65536 * 2 + 3};

// The GPU result against the host evaluation of the kernel's arithmetic, and
// against the CPU's (see the top of the file).
void expect_step_parity(const Tensor& gpu_result, const Tensor& cpu_result, const Tensor& reference,
                        const std::string& what) {
  if (cuda_emulated()) {  // the "GPU" runs the CPU's kernel: its result is the CPU's, whatever this build fuses
    EXPECT_TRUE(same_as_cpu(gpu_result, cpu_result)) << what << " (emulated device)";
    return;
  }
  EXPECT_TRUE(same_as_cpu(gpu_result, reference)) << what << ": against the kernel's arithmetic on the host";
  if (fused::same_bits(cpu_result, reference))
    EXPECT_TRUE(same_as_cpu(gpu_result, cpu_result)) << what;
  else
    EXPECT_TRUE(close_to_cpu(gpu_result, cpu_result, 1e-12)) << what << " (this CPU build does not fuse as g++ does)";
}

// The scalars optim/adam.cpp derives at step 3 with lr 1e-3, as f32.
backend::AdamStep adam_scalars(float l2, float shrink) {
  backend::AdamStep s;
  s.l2 = l2;
  s.shrink = shrink;
  s.beta1 = 0.9f;
  s.one_minus_beta1 = static_cast<float>(1.0 - 0.9);
  s.beta2 = 0.999f;
  s.one_minus_beta2 = static_cast<float>(1.0 - 0.999);
  s.bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(0.999, 3)));
  s.neg_step_size = static_cast<float>(-1e-3 / (1.0 - std::pow(0.9, 3)));
  s.eps = 1e-8f;
  return s;
}

}  // namespace

PARITY_TEST(AdamStepIsTheCpus, "optim.adam_step") {
  struct Case {
    const char* name;
    float l2, shrink;
  };
  for (const Case c : {Case{"adam", 0.0f, 1.0f}, Case{"adam l2", 1e-2f, 1.0f}, Case{"adamw", 0.0f, 0.99999f},
                       Case{"both", 1e-2f, 0.9999f}})
    for (const int64_t n : kParameterSizes) {
      const backend::AdamStep s = adam_scalars(c.l2, c.shrink);
      const Tensor p = random_of({n}, DType::f32, 1), g = random_of({n}, DType::f32, 2);
      const Tensor m = random_of({n}, DType::f32, 3, -0.1, 0.1), v = random_of({n}, DType::f32, 4, 0.0, 0.01);
      const Tensor pc = p.clone(), mc = m.clone(), vc = v.clone(), copy_c = Tensor::empty({n}, DType::bf16);
      CMHA_KERNEL(Device::cpu(), optim.adam_step)(pc, g, mc, vc, copy_c, s, Tensor());
      const Tensor pg = on_gpu(p), mg = on_gpu(m), vg = on_gpu(v);
      const Tensor copy_g = Tensor::empty({n}, DType::bf16, gpu());
      CMHA_KERNEL(gpu(), optim.adam_step)(pg, on_gpu(g), mg, vg, copy_g, s, Tensor());
      // Without the copy: the same f32 bits as with it.
      const Tensor pg2 = on_gpu(p), mg2 = on_gpu(m), vg2 = on_gpu(v);
      CMHA_KERNEL(gpu(), optim.adam_step)(pg2, on_gpu(g), mg2, vg2, Tensor(), s, Tensor());
      const Tensor pr = p.clone(), mr = m.clone(), vr = v.clone();
      for (int64_t k = 0; k < n; ++k)
        fused::adam_element(pr.data<float>()[k], g.data<float>()[k], mr.data<float>()[k], vr.data<float>()[k], s);
      const std::string what = std::string(c.name) + ", n = " + std::to_string(n);
      expect_step_parity(pg, pc, pr, what + ": param");
      expect_step_parity(mg, mc, mr, what + ": exp_avg");
      expect_step_parity(vg, vc, vr, what + ": exp_avg_sq");
      EXPECT_TRUE(same_as_cpu(pg2, pg.to(Device::cpu())) && same_as_cpu(mg2, mg.to(Device::cpu())) &&
                  same_as_cpu(vg2, vg.to(Device::cpu())))
          << what << ": without the bf16 copy";
      // The bf16 working copy: the conversion of the new f32 values on each device.
      EXPECT_TRUE(same_as_cpu(copy_c, pc.to(DType::bf16))) << what << ": the CPU's bf16 copy";
      EXPECT_TRUE(same_as_cpu(copy_g, pg.to(Device::cpu()).to(DType::bf16))) << what << ": the GPU's bf16 copy";
    }
}

PARITY_TEST(AdamStepNonFiniteGradients, "optim.adam_step") {
  // NaN and ±inf gradients poison their elements on both devices (NaN bits
  // differ between x86 and CUDA, so close_to_cpu, which requires NaN and inf
  // where the CPU has them).
  Tensor g = random_of({100}, DType::f32, 5);
  g.data<float>()[3] = NAN;
  g.data<float>()[50] = std::numeric_limits<float>::infinity();
  g.data<float>()[99] = -std::numeric_limits<float>::infinity();
  const Tensor p = random_of({100}, DType::f32, 6), m = Tensor::zeros({100}), v = Tensor::zeros({100});
  const Tensor pc = p.clone(), mc = m.clone(), vc = v.clone(), pg = on_gpu(p), mg = on_gpu(m), vg = on_gpu(v);
  CMHA_KERNEL(Device::cpu(), optim.adam_step)(pc, g, mc, vc, Tensor(), adam_scalars(0.0f, 1.0f), Tensor());
  CMHA_KERNEL(gpu(), optim.adam_step)(pg, on_gpu(g), mg, vg, Tensor(), adam_scalars(0.0f, 1.0f), Tensor());
  EXPECT_TRUE(close_to_cpu(pg, pc, 1e-12));
  EXPECT_TRUE(close_to_cpu(mg, mc, 1e-12));
  EXPECT_TRUE(close_to_cpu(vg, vc, 1e-12));
}

PARITY_TEST(SgdStepIsTheCpus, "optim.sgd_step") {
  for (int config = 0; config < 16; ++config) {
    const bool decay = config & 1, momentum = config & 2, first = config & 4, nesterov = config & 8;
    if (!momentum && (first || nesterov)) continue;  // those flags need a buffer
    backend::SgdStep s;
    s.weight_decay = decay ? 1e-2f : 0.0f;
    s.momentum = momentum ? 0.9f : 0.0f;
    s.one_minus_dampening = 0.75f;
    s.neg_lr = -0.05f;
    s.nesterov = nesterov;
    s.first = first;
    for (const int64_t n : kParameterSizes) {
      const Tensor p = random_of({n}, DType::f32, 7), g = random_of({n}, DType::f32, 8);
      const Tensor b = random_of({n}, DType::f32, 9, -0.5, 0.5);
      const Tensor pc = p.clone(), bc = momentum ? b.clone() : Tensor();
      CMHA_KERNEL(Device::cpu(), optim.sgd_step)(pc, g, bc, s, Tensor());
      const Tensor pg = on_gpu(p), bg = momentum ? on_gpu(b) : Tensor();
      CMHA_KERNEL(gpu(), optim.sgd_step)(pg, on_gpu(g), bg, s, Tensor());
      const Tensor pr = p.clone(), br = b.clone();
      for (int64_t k = 0; k < n; ++k)
        fused::sgd_element(pr.data<float>()[k], g.data<float>()[k], momentum ? br.data<float>() + k : nullptr, s);
      const std::string what = "decay " + std::to_string(decay) + ", momentum " + std::to_string(momentum) +
                               ", first " + std::to_string(first) + ", nesterov " + std::to_string(nesterov) +
                               ", n = " + std::to_string(n);
      expect_step_parity(pg, pc, pr, what + ": param");
      if (momentum) expect_step_parity(bg, bc, br, what + ": momentum buffer");
    }
  }
}

PARITY_TEST(EmaUpdateIsTheCpus, "optim.ema_update") {
  const float decay = 0.9998f, one_minus_decay = static_cast<float>(1.0 - 0.9998);
  for (const int64_t n : kParameterSizes) {
    const Tensor shadow = random_of({n}, DType::f32, 10), param = random_of({n}, DType::f32, 11);
    const Tensor sc = shadow.clone(), sg = on_gpu(shadow), sr = shadow.clone();
    CMHA_KERNEL(Device::cpu(), optim.ema_update)(sc, param, decay, one_minus_decay, Tensor());
    CMHA_KERNEL(gpu(), optim.ema_update)(sg, on_gpu(param), decay, one_minus_decay, Tensor());
    for (int64_t k = 0; k < n; ++k)
      sr.data<float>()[k] = fused::ema_element(sr.data<float>()[k], param.data<float>()[k], decay, one_minus_decay);
    expect_step_parity(sg, sc, sr, "n = " + std::to_string(n));
  }
}

PARITY_TEST(SwapExchangesLikeTheCpu, "optim.swap") {
  for (const int64_t n : kParameterSizes) {
    const Tensor a = random_of({n}, DType::f32, 12), b = random_of({n}, DType::f32, 13);
    const Tensor ac = a.clone(), bc = b.clone(), ag = on_gpu(a), bg = on_gpu(b);
    CMHA_KERNEL(Device::cpu(), optim.swap)(ac, bc);
    CMHA_KERNEL(gpu(), optim.swap)(ag, bg);
    EXPECT_TRUE(same_as_cpu(ag, ac)) << "n = " << n;
    EXPECT_TRUE(same_as_cpu(bg, bc)) << "n = " << n;
  }
}

namespace {

// A model's gradients: odd sizes, an empty tensor, and tensors of several
// chunks (2^16 elements each), one ending exactly on a chunk.
std::vector<Tensor> gradient_list(uint64_t seed) {
  std::vector<Tensor> xs;
  for (const int64_t n : {int64_t{1003}, int64_t{0}, int64_t{7}, int64_t{65536 * 3 + 5}, int64_t{1}, int64_t{65536}})
    xs.push_back(random_of({n}, DType::f32, seed++, -3.0, 3.0));
  return xs;
}

std::vector<Tensor> on_gpu_all(const std::vector<Tensor>& xs) {
  std::vector<Tensor> out;
  for (const Tensor& x : xs) out.push_back(x.to(Device::cuda(0)));
  return out;
}

}  // namespace

PARITY_TEST(SumSquaresMatchesTheCpuAndRepeats, "optim.sum_squares") {
  const auto sum_squares_on = [](Device d, const std::vector<Tensor>& xs) {
    return CMHA_KERNEL(d, optim.sum_squares)(xs);
  };
  // Empty lists and lists of empty tensors sum to 0 without a launch.
  EXPECT_EQ(sum_squares_on(gpu(), {}), 0.0);
  EXPECT_EQ(sum_squares_on(gpu(), {Tensor::empty({0}, DType::f32, gpu())}), 0.0);
  for (uint64_t seed : {100, 200}) {
    std::vector<Tensor> xs = gradient_list(seed);
    // A wide dynamic range: tiny and large elements.
    xs.push_back(random_of({5000}, DType::f32, seed + 50, -1e-20, 1e-20));
    xs.push_back(random_of({33}, DType::f32, seed + 51, -1e15, 1e15));
    const std::vector<Tensor> gs = on_gpu_all(xs);
    const double cpu = sum_squares_on(Device::cpu(), xs), gpu_sum = sum_squares_on(gpu(), gs);
    EXPECT_NEAR(gpu_sum, cpu, 1e-12 * cpu) << "seed " << seed;
    for (int run = 0; run < 3; ++run) EXPECT_EQ(sum_squares_on(gpu(), gs), gpu_sum) << "run " << run;
  }
  // One element: exact on both.
  const Tensor one = Tensor::from_vector({3.0f}, {1});
  EXPECT_EQ(sum_squares_on(gpu(), {on_gpu(one)}), 9.0);
}

PARITY_TEST(AllFiniteMatchesTheCpu, "optim.all_finite") {
  const auto all_finite_on = [](Device d, const std::vector<Tensor>& xs) {
    return CMHA_KERNEL(d, optim.all_finite)(xs);
  };
  EXPECT_TRUE(all_finite_on(gpu(), {}));
  EXPECT_TRUE(all_finite_on(gpu(), {Tensor::empty({0}, DType::f32, gpu())}));
  const std::vector<Tensor> finite = gradient_list(300);
  EXPECT_TRUE(all_finite_on(gpu(), on_gpu_all(finite)));
  EXPECT_EQ(all_finite_on(gpu(), on_gpu_all(finite)), all_finite_on(Device::cpu(), finite));
  // One bad element anywhere: the first element of the first tensor, the last
  // of a several-chunk tensor, the middle of a chunk; NaN, +inf and -inf.
  struct Bad {
    size_t tensor;
    int64_t element;
    float value;
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (const Bad bad : {Bad{0, 0, NAN}, Bad{3, 65536 * 3 + 4, inf}, Bad{5, 30000, -inf}, Bad{4, 0, NAN}}) {
    std::vector<Tensor> xs = gradient_list(300);
    xs[bad.tensor].data<float>()[bad.element] = bad.value;
    EXPECT_FALSE(all_finite_on(Device::cpu(), xs));
    EXPECT_FALSE(all_finite_on(gpu(), on_gpu_all(xs))) << "tensor " << bad.tensor << ", element " << bad.element;
  }
  // The largest finite values are finite.
  Tensor big = Tensor::full({70000}, std::numeric_limits<float>::max());
  EXPECT_TRUE(all_finite_on(gpu(), {on_gpu(big)}));
}

PARITY_TEST(ScaleListIsTheCpus, "optim.scale") {
  CMHA_KERNEL(gpu(), optim.scale)({}, 0.5f);  // nothing to do
  const std::vector<Tensor> xs = gradient_list(400);
  std::vector<Tensor> cpu, gpu_xs = on_gpu_all(xs);
  for (const Tensor& x : xs) cpu.push_back(x.clone());
  CMHA_KERNEL(Device::cpu(), optim.scale)(cpu, 0.37f);
  CMHA_KERNEL(gpu(), optim.scale)(gpu_xs, 0.37f);
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_TRUE(same_as_cpu(gpu_xs[i], cpu[i])) << "tensor " << i;
}

// clip_grad_norm on the device: the norm's bits stay there, the scaling is
// the host's arithmetic; a non-finite norm leaves the gradients as they are
// and closes the gate of the steps (they change nothing).
PARITY_TEST(ClipGradNormOnTheDevice, "optim.clip_grad_norm") {
  const auto clip_on = [](Device d, const std::vector<Tensor>& xs, double max_norm) {
    Tensor norm = Tensor::full({1}, 7.0, DType::i64, d);
    CMHA_KERNEL(d, optim.clip_grad_norm)(xs, max_norm, norm);
    return norm;
  };
  const auto norm_value = [](const Tensor& bits) {
    double v = 0;
    std::memcpy(&v, bits.to(Device::cpu()).data<int64_t>(), sizeof v);
    return v;
  };
  EXPECT_EQ(norm_value(clip_on(gpu(), {}, 1.0)), 0.0);
  const std::vector<Tensor> xs = gradient_list(500);
  for (const double max_norm : {0.0, 1e-3, 1e9}) {
    std::vector<Tensor> cpu, gpu_xs = on_gpu_all(xs);
    for (const Tensor& x : xs) cpu.push_back(x.clone());
    const double nc = norm_value(clip_on(Device::cpu(), cpu, max_norm));
    const double ng = norm_value(clip_on(gpu(), gpu_xs, max_norm));
    EXPECT_NEAR(ng, nc, 1e-12 * nc) << "max_norm " << max_norm;
    EXPECT_EQ(nc, std::sqrt(CMHA_KERNEL(Device::cpu(), optim.sum_squares)(xs)));
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_TRUE(close_to_cpu(gpu_xs[i], cpu[i], 1e-6)) << "tensor " << i;
  }
  // A NaN gradient: the norm is NaN, nothing is scaled, and a gated Adam step changes nothing.
  std::vector<Tensor> bad = gradient_list(600);
  bad[2].data<float>()[5] = NAN;  // bad[2] has 7 elements (bad[1] none)
  std::vector<Tensor> bad_gpu = on_gpu_all(bad);
  const Tensor gate = clip_on(gpu(), bad_gpu, 1e-3);
  EXPECT_TRUE(std::isnan(norm_value(gate)));
  EXPECT_TRUE(same_as_cpu(bad_gpu[0], bad[0]));
  const Tensor p = random_of({64}, DType::f32, 7), g = random_of({64}, DType::f32, 8);
  const Tensor pg = on_gpu(p), mg = on_gpu(Tensor::zeros({64})), vg = on_gpu(Tensor::zeros({64}));
  CMHA_KERNEL(gpu(), optim.adam_step)(pg, on_gpu(g), mg, vg, Tensor(), adam_scalars(0.0f, 1.0f), gate);
  EXPECT_TRUE(same_as_cpu(pg, p));
  EXPECT_TRUE(same_as_cpu(mg, Tensor::zeros({64})));
}
