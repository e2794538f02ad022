#pragma once
// NCCL, opened with dlopen on first use (distributed/nccl_communicator.cpp). Linking
// it would make every cmha process map the 218 MB library at start-up; only a
// multi-GPU job needs it. Built only with CUDA (CMHA_WITH_CUDA).
#include <nccl.h>

#include <string>

namespace cmha::distributed {

struct NcclApi {
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclBroadcast) broadcast = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclReduceScatter) reduce_scatter = nullptr;
  std::string library;  // the file dlopen found
};

// The loaded library, or a cmha::Error naming the files tried and why.
const NcclApi& nccl();

// Throws "<what>: <call> failed: <NCCL's message>" unless r is ncclSuccess.
void check_nccl(ncclResult_t r, const char* call, const std::string& what);

// The NCCL unique id of a new communicator, made on rank 0 and sent to every
// rank of `host` (identical bytes everywhere): the bootstrap of NCCL over an
// existing MPI job. Needs no GPU.
std::string exchange_nccl_unique_id(class Communicator& host);

}  // namespace cmha::distributed
