#pragma once
// The CUDA libraries cmha opens (cudart linked; cuBLASLt, cuDNN, NCCL and
// nvrtc opened at run time as tensor/shared_library.h opens them: by name,
// then the toolkit's and pip wheels' folders), each with the file it loaded
// and its version, or why it did not load. `cmha info --devices` prints them;
// tests/gpu/check.sh stops at a library that did not load.
#include <string>
#include <vector>

namespace cmha {

struct CudaLibrary {
  std::string name;     // "cudart", "cuBLASLt", "cuDNN", "NCCL", "nvrtc"
  bool loaded = false;
  std::string file;     // the file loaded, or the names tried
  std::string version;  // "13.0.2", or "version unknown"
  std::string reason;   // dlerror's message when not loaded
  std::string needed_for;
};

std::vector<CudaLibrary> probe_cuda_libraries();

}  // namespace cmha
