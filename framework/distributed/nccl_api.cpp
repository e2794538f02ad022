#include "distributed/nccl_api.h"

#include <cstring>

#include "distributed/communicator.h"
#include "tensor/error.h"
#include "tensor/shared_library.h"

namespace cmha::distributed {
namespace {

NcclApi load() {
  const SharedLibrary lib = open_shared_library({"libnccl.so.2", "libnccl.so"});
  if (!lib.handle)
    throw Error("train.dist_backend=nccl: NCCL could not be loaded (tried " + lib.file + ": " + lib.reason +
                "); install NCCL (libnccl2) or add its folder to LD_LIBRARY_PATH");
  NcclApi api;
  api.library = lib.file;
  const std::string what = "cannot use NCCL";
  const char* hint = "an NCCL older than 2.10?";
  bind_symbol(lib, "ncclGetVersion", api.get_version, what, hint);
  bind_symbol(lib, "ncclGetUniqueId", api.get_unique_id, what, hint);
  bind_symbol(lib, "ncclCommInitRank", api.comm_init_rank, what, hint);
  bind_symbol(lib, "ncclCommAbort", api.comm_abort, what, hint);
  bind_symbol(lib, "ncclCommDestroy", api.comm_destroy, what, hint);
  bind_symbol(lib, "ncclCommGetAsyncError", api.comm_get_async_error, what, hint);
  bind_symbol(lib, "ncclGetErrorString", api.error_string, what, hint);
  bind_symbol(lib, "ncclAllReduce", api.all_reduce, what, hint);
  bind_symbol(lib, "ncclBroadcast", api.broadcast, what, hint);
  bind_symbol(lib, "ncclAllGather", api.all_gather, what, hint);
  bind_symbol(lib, "ncclReduceScatter", api.reduce_scatter, what, hint);
  return api;
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

}  // namespace cmha::distributed
