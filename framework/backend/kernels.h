#pragma once
// The kernel table: every compute kernel of cmha, one table per device type.
//
// autograd/, optim/, nn/ and train/ never loop over elements. An op checks its
// inputs, works out the output geometry, allocates the output on its inputs'
// device, calls one entry of this table and records its backward:
//
//   Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
//   const backend::SoftmaxGeometry g = softmax_geometry(x, dim);  // x as [outer, n, inner]
//   CMHA_KERNEL(x.device(), softmax.forward)(x, y, g, /*log=*/false);
//
// backend/cpu/ fills the CPU table (oneDNN + OpenMP), backend/cuda/ the CUDA
// one. An entry a device leaves empty is an error naming the kernel and the
// device, never a silent fallback to the CPU. Each family of entries is one
// header beside this one (the struct and what each entry promises).
#include "backend/activation.h"
#include "backend/attention.h"
#include "backend/copy.h"
#include "backend/dropout.h"
#include "backend/elementwise.h"
#include "backend/embedding.h"
#include "backend/image.h"
#include "backend/index.h"
#include "backend/layer_norm.h"
#include "backend/loss.h"
#include "backend/mask.h"
#include "backend/matmul.h"
#include "backend/optim.h"
#include "backend/random.h"
#include "backend/reduce.h"
#include "backend/softmax.h"
#include "backend/buckets.h"
#include "backend/profile.h"
#include <string>
#include <vector>

#include "tensor/device.h"

namespace cmha::backend {

struct KernelTable {
  const char* device_name = "";
  ActivationKernels activation;
  AttentionKernels attention;
  BucketsKernels buckets;
  CopyKernels copy;
  DropoutKernels dropout;
  ElementwiseKernels elementwise;
  EmbeddingKernels embedding;
  ImageKernels image;
  IndexKernels index;
  LayerNormKernels layer_norm;
  LossKernels loss;
  MaskKernels mask;
  MatmulKernels matmul;
  OptimKernels optim;
  RandomKernels random;
  ReduceKernels reduce;
  SoftmaxKernels softmax;
};

// The table of `device`'s type. A CUDA device in a build without CUDA is an
// error that says so.
const KernelTable& kernel_table(Device device);

// Checks at start-up that `device` can run cmha's ops in this build on this
// machine; otherwise an error starting with `what` (e.g. "train.device=cuda")
// that says why: no CUDA in the build, no GPU visible, no such index, or no
// CUDA kernels in this version.
void require_device(Device device, const std::string& what);

// Every entry of the table as "family.entry" (backend/kernel_entries.h's
// order), and those `table` leaves empty.
std::vector<std::string> kernel_entry_names();
std::vector<std::string> empty_entries(const KernelTable& table);

// Throws "<entry>: no kernel for <device> in this build" (the CUDA table fills in
// turn; an empty entry must never fall back to the CPU).
[[noreturn]] void missing_kernel(const char* entry, Device device);

template <typename Fn>
inline ProfiledKernel<Fn> checked_kernel(Fn fn, const char* entry, Device device) {
  if (fn == nullptr) missing_kernel(entry, device);
  return {fn, entry};
}

}  // namespace cmha::backend

// CMHA_KERNEL(device, family.entry) -> the entry's function (never null), timed
// when the kernel profile is on (backend/profile.h).
#define CMHA_KERNEL(device, entry)                                                               \
  ([](::cmha::Device cmha_kernel_device_) {                                                      \
    return ::cmha::backend::checked_kernel(::cmha::backend::kernel_table(cmha_kernel_device_).entry, \
                                           #entry, cmha_kernel_device_);                         \
  }(device))
