#include "backend/cuda/cublaslt.h"

#include <dlfcn.h>

#include "tensor/error.h"

namespace cmha::cuda {
namespace {

template <typename Fn>
void bind(void* lib, const char* name, Fn& fn, const std::string& file) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn) throw Error("cannot use cuBLASLt: " + file + " has no " + name + " (a CUDA older than cmha was built for?)");
}

CublasLtApi load() {
  // The major version cmha was compiled against first, then any.
  const std::string names[] = {"libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR), "libcublasLt.so"};
  void* lib = nullptr;
  std::string tried, why;
  for (const std::string& n : names) {
    lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      CublasLtApi api;
      api.library = n;
      bind(lib, "cublasLtCreate", api.create, n);
      bind(lib, "cublasLtGetVersion", api.get_version, n);
      bind(lib, "cublasLtMatmulDescCreate", api.matmul_desc_create, n);
      bind(lib, "cublasLtMatmulDescDestroy", api.matmul_desc_destroy, n);
      bind(lib, "cublasLtMatmulDescSetAttribute", api.matmul_desc_set, n);
      bind(lib, "cublasLtMatrixLayoutCreate", api.layout_create, n);
      bind(lib, "cublasLtMatrixLayoutDestroy", api.layout_destroy, n);
      bind(lib, "cublasLtMatrixLayoutSetAttribute", api.layout_set, n);
      bind(lib, "cublasLtMatmulPreferenceCreate", api.preference_create, n);
      bind(lib, "cublasLtMatmulPreferenceDestroy", api.preference_destroy, n);
      bind(lib, "cublasLtMatmulPreferenceSetAttribute", api.preference_set, n);
      bind(lib, "cublasLtMatmulAlgoGetHeuristic", api.algo_get_heuristic, n);
      bind(lib, "cublasLtMatmul", api.matmul, n);
      bind(lib, "cublasLtGetStatusString", api.status_string, n);
      return api;  // the handle stays open for the process's life
    }
    tried += (tried.empty() ? "" : ", ") + n;
    const char* err = dlerror();
    why = err ? err : "not found";
  }
  throw Error("cannot run a matmul on the GPU: cuBLASLt could not be loaded (tried " + tried + ": " + why +
              "); install the CUDA toolkit's cuBLAS or add its lib64 folder to LD_LIBRARY_PATH");
}

}  // namespace

const CublasLtApi& cublaslt() {
  static const CublasLtApi api = load();
  return api;
}

void check_cublas(cublasStatus_t status, const char* call, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const char* text = cublaslt().status_string ? cublaslt().status_string(status) : "unknown status";
  throw Error(what + ": " + call + " failed: " + text + " (status " + std::to_string(static_cast<int>(status)) + ")");
}

}  // namespace cmha::cuda
