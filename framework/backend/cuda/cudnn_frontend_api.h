#pragma once
// The one way cmha includes NVIDIA's cudnn-frontend (third_party/cudnn-frontend,
// header-only, MIT): every file that uses it includes this header, so all see
// the same configuration (the frontend's functions are inline; two
// configurations in one program would break the one-definition rule).
//   NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING  the frontend calls libcudnn (and the
//       CUDA runtime) through dlsym, so cmha links neither: libcudnn (~1 GB with
//       its engines) is opened on first use by cudnn_library() below, and a
//       process that never plans attention never maps it.
//   CUDNN_FRONTEND_SKIP_JSON_LIB  no graph (de)serialisation, no 1 MB json.hpp
//       in the build.
#ifndef NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
#endif
#ifndef CUDNN_FRONTEND_SKIP_JSON_LIB
#define CUDNN_FRONTEND_SKIP_JSON_LIB 1
#endif
#include <cudnn_frontend.h>

#include <string>

namespace cmha::cuda {

struct CudnnLibrary {
  bool loaded = false;
  std::string file;    // the name that opened, or the names tried
  std::string reason;  // dlerror's message when none opened
};

// Opens libcudnn once (libcudnn.so.<major cmha was compiled against>, then
// libcudnn.so) and hands it to the frontend (cudnn_frontend::cudnn_dlhandle).
const CudnnLibrary& cudnn_library();

}  // namespace cmha::cuda
