// CPU kernels: buckets (entries of backend/buckets.h).
#include "backend/cpu/kernel_table.h"

namespace cmha::cpu {

backend::BucketsKernels buckets_kernels() { return {}; }

}  // namespace cmha::cpu
