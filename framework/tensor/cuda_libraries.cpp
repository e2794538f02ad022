#include "tensor/cuda_libraries.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "tensor/shared_library.h"
#ifdef CMHA_WITH_CUDNN
#include <cudnn_version.h>
#endif

namespace cmha {
namespace {

// "13.1.2" from NVIDIA's version codes (major·10000 + minor·100 + patch for
// cuBLASLt, cuDNN 9 and NCCL; major·1000 + minor·10 for the runtime).
std::string version_text(long long code, int major_unit, int minor_unit) {
  return std::to_string(code / major_unit) + "." + std::to_string(code % major_unit / minor_unit) +
         (minor_unit > 1 ? "." + std::to_string(code % minor_unit) : "");
}

}  // namespace

std::vector<CudaLibrary> probe_cuda_libraries() {
  std::vector<CudaLibrary> out;
  const int toolkit_major = CUDART_VERSION / 1000;
  int runtime = 0;
  Dl_info where{};
  const bool runtime_ok = cudaRuntimeGetVersion(&runtime) == cudaSuccess;
  const char* runtime_file =
      dladdr(reinterpret_cast<void*>(&cudaRuntimeGetVersion), &where) && where.dli_fname ? where.dli_fname : "?";
  out.push_back({"cudart", true, runtime_file, runtime_ok ? version_text(runtime, 1000, 10) : "version unknown", "",
                 "everything on a GPU"});
  struct Wanted {
    const char* name;
    std::string soname;
    const char* version_symbol;
    const char* why;  // what cmha needs it for
  };
#ifdef CMHA_WITH_CUDNN
  const std::string cudnn = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
#else
  const std::string cudnn = "libcudnn.so.9";
#endif
  const Wanted wanted[] = {
      {"cuBLASLt", "libcublasLt.so." + std::to_string(toolkit_major), "cublasLtGetVersion", "every matmul"},
      {"cuDNN", cudnn, "cudnnGetVersion", "fused attention (else cmha's unfused path)"},
      {"NCCL", "libnccl.so.2", "ncclGetVersion", "data-parallel training on GPUs"},
      {"nvrtc", "libnvrtc.so." + std::to_string(toolkit_major), "nvrtcVersion", "cuDNN's runtime-compiled engines"},
  };
  for (const Wanted& l : wanted) {
    const std::string generic = l.soname.substr(0, l.soname.find(".so.") + 3);
    const SharedLibrary so = open_shared_library({l.soname.c_str(), generic.c_str()});
    CudaLibrary lib{l.name, so.handle != nullptr, so.file, "version unknown", so.reason, l.why};
    if (so.handle) {
      void* fn = dlsym(so.handle, l.version_symbol);
      const std::string name = l.name;
      if (fn && name == "NCCL") {
        int v = 0;
        if (reinterpret_cast<int (*)(int*)>(fn)(&v) == 0) lib.version = version_text(v, 10000, 100);
      } else if (fn && name == "nvrtc") {
        int major = 0, minor = 0;
        if (reinterpret_cast<int (*)(int*, int*)>(fn)(&major, &minor) == 0)
          lib.version = std::to_string(major) + "." + std::to_string(minor);
      } else if (fn) {
        lib.version = version_text(static_cast<long long>(reinterpret_cast<size_t (*)()>(fn)()), 10000, 100);
      }
    }
    out.push_back(std::move(lib));
  }
  return out;
}

}  // namespace cmha
