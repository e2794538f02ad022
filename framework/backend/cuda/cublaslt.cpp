#include "backend/cuda/cublaslt.h"

#include "tensor/error.h"
#include "tensor/shared_library.h"

namespace cmha::cuda {
namespace {

CublasLtApi load() {
  // The major version cmha was compiled against first, then any.
  const std::string major = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  const SharedLibrary lib = open_shared_library({major.c_str(), "libcublasLt.so"});
  if (!lib.handle)
    throw Error("cannot run a matmul on the GPU: cuBLASLt could not be loaded (tried " + lib.file + ": " + lib.reason +
                "); install the CUDA toolkit's cuBLAS or add its lib64 folder to LD_LIBRARY_PATH");
  CublasLtApi api;
  api.library = lib.file;
  const std::string what = "cannot use cuBLASLt";
  const char* hint = "a CUDA older than cmha was built for?";
  bind_symbol(lib, "cublasLtCreate", api.create, what, hint);
  bind_symbol(lib, "cublasLtGetVersion", api.get_version, what, hint);
  bind_symbol(lib, "cublasLtMatmulDescCreate", api.matmul_desc_create, what, hint);
  bind_symbol(lib, "cublasLtMatmulDescDestroy", api.matmul_desc_destroy, what, hint);
  bind_symbol(lib, "cublasLtMatmulDescSetAttribute", api.matmul_desc_set, what, hint);
  bind_symbol(lib, "cublasLtMatrixLayoutCreate", api.layout_create, what, hint);
  bind_symbol(lib, "cublasLtMatrixLayoutDestroy", api.layout_destroy, what, hint);
  bind_symbol(lib, "cublasLtMatrixLayoutSetAttribute", api.layout_set, what, hint);
  bind_symbol(lib, "cublasLtMatmulPreferenceCreate", api.preference_create, what, hint);
  bind_symbol(lib, "cublasLtMatmulPreferenceDestroy", api.preference_destroy, what, hint);
  bind_symbol(lib, "cublasLtMatmulPreferenceSetAttribute", api.preference_set, what, hint);
  bind_symbol(lib, "cublasLtMatmulAlgoGetHeuristic", api.algo_get_heuristic, what, hint);
  bind_symbol(lib, "cublasLtMatmul", api.matmul, what, hint);
  bind_symbol(lib, "cublasLtGetStatusString", api.status_string, what, hint);
  return api;
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
