#include "dist/nccl_api.h"

#include <dlfcn.h>

#include <cstring>

#include "dist/communicator.h"
#include "tensor/error.h"

namespace cmha::dist {
namespace {

template <typename Fn>
void bind(void* lib, const char* name, Fn& fn, const std::string& file) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn) throw Error("cannot use NCCL: " + file + " has no " + name + " (an NCCL older than 2.10?)");
}

NcclApi load() {
  std::string tried, why;
  for (const char* n : {"libnccl.so.2", "libnccl.so"}) {
    void* lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      tried += (tried.empty() ? "" : ", ") + std::string(n);
      const char* err = dlerror();
      why = err ? err : "not found";
      continue;
    }
    NcclApi api;
    api.library = n;
    bind(lib, "ncclGetVersion", api.get_version, n);
    bind(lib, "ncclGetUniqueId", api.get_unique_id, n);
    bind(lib, "ncclCommInitRank", api.comm_init_rank, n);
    bind(lib, "ncclCommAbort", api.comm_abort, n);
    bind(lib, "ncclCommDestroy", api.comm_destroy, n);
    bind(lib, "ncclCommGetAsyncError", api.comm_get_async_error, n);
    bind(lib, "ncclGetErrorString", api.error_string, n);
    bind(lib, "ncclAllReduce", api.all_reduce, n);
    bind(lib, "ncclBroadcast", api.broadcast, n);
    bind(lib, "ncclAllGather", api.all_gather, n);
    bind(lib, "ncclReduceScatter", api.reduce_scatter, n);
    return api;  // stays loaded for the process's life
  }
  throw Error("train.dist_backend=nccl: NCCL could not be loaded (tried " + tried + ": " + why +
              "); install NCCL (libnccl2) or add its folder to LD_LIBRARY_PATH");
}

}  // namespace

const NcclApi& nccl() {
  static const NcclApi api = load();
  return api;
}

void check_nccl(ncclResult_t r, const char* call, const std::string& what) {
  if (r == ncclSuccess) return;
  throw Error(what + ": " + call + " failed: " + nccl().error_string(r) + " (NCCL error " + std::to_string(r) + ")");
}

std::string exchange_nccl_unique_id(Communicator& host) {
  std::string mine;
  if (host.rank() == 0) {
    ncclUniqueId id;
    check_nccl(nccl().get_unique_id(&id), "ncclGetUniqueId", "cannot start NCCL on rank 0");
    mine.assign(id.internal, sizeof id.internal);
  }
  const std::vector<std::string> all = host.all_gather_bytes(mine);
  CMHA_CHECK(all.size() == static_cast<size_t>(host.size()) && all.front().size() == NCCL_UNIQUE_ID_BYTES,
             "NCCL bootstrap: rank 0 sent a unique id of " + std::to_string(all.front().size()) + " bytes, not " +
                 std::to_string(NCCL_UNIQUE_ID_BYTES));
  return all.front();
}

}  // namespace cmha::dist
