#include "backend/cuda/cudnn_frontend_api.h"
#include "tensor/shared_library.h"

// The frontend's handle to libcudnn under dynamic loading (cudnn_frontend_shim.h
// declares it extern; the program defines it once).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

namespace cmha::cuda {

const CudnnLibrary& cudnn_library() {
  static const CudnnLibrary lib = [] {
    // The major version cmha was compiled against first, then any.
    const std::string major = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
    const SharedLibrary so = open_shared_library({major.c_str(), "libcudnn.so"});
    CudnnLibrary l;
    l.file = so.file;
    l.reason = so.reason;
    l.loaded = so.handle != nullptr;
    if (l.loaded) cudnn_frontend::cudnn_dlhandle = so.handle;
    return l;
  }();
  return lib;
}

}  // namespace cmha::cuda
