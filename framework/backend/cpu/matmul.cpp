// CPU kernels: matmul (entries of backend/matmul.h), oneDNN's matmul with its
// primitives cached by geometry and thread count (backend/cpu/onednn.cpp).
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/onednn.h"

namespace cmha::cpu {

backend::MatmulKernels matmul_kernels() {
  backend::MatmulKernels k;
  k.matmul = matmul_into;
  return k;
}

}  // namespace cmha::cpu
