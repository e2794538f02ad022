#pragma once
// cuBLASLt, opened with dlopen on first use. Linking it would make every cmha
// process (a CPU-only `cmha --help`, each test) map and relocate the 540 MB
// library at start-up, about half a second; only a GPU matmul needs it.
#include <cublasLt.h>

#include <string>

namespace cmha::cuda {

struct CublasLtApi {
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtGetVersion) get_version = nullptr;
  decltype(&::cublasLtMatmulDescCreate) matmul_desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) matmul_desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) matmul_desc_set = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  decltype(&::cublasLtGetStatusString) status_string = nullptr;
  std::string library;  // the file dlopen found, for messages
};

// The loaded library (loaded once, thread-safe). A machine without it is a
// cmha::Error naming the library files tried and dlopen's reason.
const CublasLtApi& cublaslt();

// Throws "<what>: <call> failed: <status string>" unless status is CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t status, const char* call, const std::string& what);

}  // namespace cmha::cuda
