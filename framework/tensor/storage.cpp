#include "tensor/storage.h"

#include <cstdlib>
#include <new>

#include "tensor/error.h"

namespace cmha {

#ifdef CMHA_WITH_CUDA
void* cuda_alloc(size_t nbytes, int device);
void cuda_free(void* p, int device);
#endif

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cpu()) {
    // aligned_alloc needs a size that is a multiple of the alignment.
    size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded == 0) rounded = kAlignment;
    data_ = std::aligned_alloc(kAlignment, rounded);
    if (!data_) throw std::bad_alloc();
    return;
  }
#ifdef CMHA_WITH_CUDA
  data_ = cuda_alloc(nbytes, device.index);
#else
  throw Error("cannot allocate on " + device.str() + ": this cmha was built without CUDA (CMHA_CUDA=OFF or no nvcc)");
#endif
}

Storage::~Storage() {
  if (!data_) return;
  if (device_.is_cpu()) {
    std::free(data_);
    return;
  }
#ifdef CMHA_WITH_CUDA
  cuda_free(data_, device_.index);
#endif
}

}  // namespace cmha
