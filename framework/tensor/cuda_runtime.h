#pragma once
// The CUDA runtime layer: device discovery, one compute stream per device and
// stream-ordered device memory, under the tensor layer's Storage (the kernels
// are backend/cuda/'s). cuda_runtime.cpp is compiled only when cmha is built
// with CUDA (CMHA_WITH_CUDA); without it cuda_device_count() is 0
// (device.cpp) and the rest is never called.
//
// Streams. Every kernel, copy, allocation and free of a device is ordered on
// that device's one compute stream, so the host never waits for the GPU
// except where it reads a value (a device-to-host copy: item(), to(cpu), a
// kernel entry that returns a host value) or calls cuda_synchronize.
//
// Memory. Device blocks come from the device's default memory pool through
// cudaMallocAsync/cudaFreeAsync on the compute stream, with the pool's
// release threshold raised to "never": a freed block goes back to the pool,
// not the driver, and the next allocation of a training step reuses it
// without a device-wide synchronisation. After the first steps the pool
// stops growing; cuda_memory_stats counts how often it grew.
#include <cstddef>
#include <cstdint>
#include <string>

namespace cmha {

// Devices visible to this process; 0 (never an error) when there is no
// driver, no GPU, or CUDA_VISIBLE_DEVICES hides them all.
int cuda_device_count();
// "NVIDIA H100 80GB HBM3, 79.1 GiB, compute capability 9.0"; a cmha::Error
// when `device` is not visible.
std::string cuda_device_description(int device);

struct CudaDeviceInfo {
  std::string name;
  size_t total_bytes = 0;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
};
CudaDeviceInfo cuda_device_info(int device);

// The device's compute stream (a cudaStream_t), created on first use with
// cudaStreamNonBlocking so it never waits for the legacy default stream.
void* cuda_stream(int device);

// A stream-ordered block of `nbytes` on `device`. Out of memory is a
// cmha::Error saying how much was asked, how much is free and held by cmha's
// pool, and which recipe keys shrink the need; a bad index or a driver error
// names the CUDA call.
void* cuda_alloc(size_t nbytes, int device);
// Returns the block to the pool, ordered after the work queued so far. Never
// throws (it runs in destructors): a failure is reported on stderr.
void cuda_free(void* p, int device);

// Copies nbytes between host and device memory (either way, or device to
// device), ordered on the device's stream. A copy to the host waits for it
// (the host reads the bytes next). A copy from pageable host memory returns
// once the source may be reused (the driver stages it, which for a large
// block means waiting for the stream to reach the copy). A copy from pinned
// memory (cuda_host_alloc) does not make the host wait at all, and the pinned
// block is not handed out again until the copy has read it. Inside a
// CopyAheadScope (tensor/device.h) a copy from pinned memory runs on the
// device's copy stream instead: after the compute stream's work queued so
// far, beside the work queued next, which waits for it only from
// cuda_await_copies_ahead on; freeing its destination before then waits
// for it.
void cuda_copy_to_device(void* dst, const void* src, size_t nbytes, int device);
void cuda_copy_to_host(void* dst, const void* src, size_t nbytes, int device);
// The compute stream's work queued from here on waits for every copy ahead so far.
void cuda_await_copies_ahead(int device);
// Waits until every operation queued on the device's stream has finished;
// a failed kernel's error is reported here, naming `what`.
void cuda_synchronize(int device, const std::string& what);

// Page-locked host memory for batches on their way to a GPU (the data
// loaders fill it, cuda_copy_to_device sends it without waiting). Freed
// blocks are cached by size (a block is reused for a request of at least half
// its size) once the copies that read them have finished; at most
// CMHA_PINNED_CACHE_MB (default 2048) of them stay cached. A failed
// page-locking is a cmha::Error naming the size.
void* cuda_host_alloc(size_t nbytes);
void cuda_host_free(void* p);
// True when p points into a live block of cuda_host_alloc.
bool cuda_host_pinned(const void* p);
// Waits until every copy queued so far that reads the live pinned block
// holding p has finished: an owner that refills its block itself (the image
// loader's batch buffers, data/batch_buffer_pool.h) calls it before writing.
void cuda_host_await_reads(const void* p);

struct CudaMemoryStats {
  size_t reserved_bytes = 0;       // held by the pool (used or cached)
  size_t used_bytes = 0;           // handed out to live blocks
  size_t peak_reserved_bytes = 0;  // since the process started
  uint64_t pool_growths = 0;       // allocations that made the pool ask the driver for memory
  uint64_t allocations = 0;        // cuda_alloc calls
};
CudaMemoryStats cuda_memory_stats(int device);

// Throws "<what>: <call> failed: <message> (<error name>)" when `status`
// (a cudaError_t) is not cudaSuccess; for code that cannot include the CUDA headers.
void cuda_check(int status, const char* call, const std::string& what);

}  // namespace cmha
