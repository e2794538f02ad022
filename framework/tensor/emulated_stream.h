#pragma once
// The asynchronous emulated CUDA device (CMHA_EMULATE_CUDA=async, the mode CI
// runs): what a GPU does to the order of things, on the CPU. Each stream is a
// worker thread that runs what the host queued on it -- kernels, copies,
// memsets, allocations' poisoning and frees -- in order and later than the
// host queued them. Three streams, as cmha uses on a GPU: compute (every
// kernel, allocation and free), copy (copies ahead of the next batch) and
// comm (the collectives of data-parallel ranks, as NCCL's stream:
// distributed/emulated_nccl_communicator.h). The copy and comm streams sleep
// a seeded random while (CMHA_EMULATE_CUDA_SEED) before each operation, so a
// consumer that forgets to wait for a copy reads the poison of a fresh block
// (every allocated and every freed block is filled with 0xFF bytes: NaN in
// f32, bf16 and f16, -1 in the integers) and one that forgets to wait for a
// collective reads this rank's own, unreduced values. Events and
// stream-waits-event are real. The host thread that queues work may not read
// or write device memory at all (tensor.cpp's check_host names the op);
// values come back only through a finished copy to the host, and each time
// the host waits for a stream is counted (emulated_host_syncs), so a test can
// hold a training step -- on one rank or several -- to zero waits. An
// operation that throws on a stream is reported to the host at its next
// wait, as a GPU reports a failed kernel at the next synchronising call.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace cmha {

// Which emulator runs (tensor/device.h's cuda_emulated() is true for both).
bool cuda_emulated_async();  // CMHA_EMULATE_CUDA=async
// Switches the asynchronous emulator on or off (set_cuda_emulated switches
// the synchronous one); either switch first waits for the streams.
void set_cuda_emulated_async(bool on);
// Whether this thread may read or write the emulated device's memory now:
// inside a kernel-table call (synchronous mode), or on a stream thread or
// its OpenMP team (asynchronous mode), never on a thread that queues work.
bool emulated_memory_readable();

// compute: kernels, allocations, frees; copy: copies ahead; comm: collectives.
enum class EmulatedStreamId { compute, copy, comm };

// Queues `op` on the stream (never throws); on a stream's own thread (a
// kernel that calls another one) it runs at once, in the order it already runs in.
void emulated_enqueue(EmulatedStreamId stream, std::function<void()> op);
// The host waits until everything queued on the stream so far has run (one
// host sync, counted under `what`); rethrows a failed operation's error.
void emulated_synchronize(EmulatedStreamId stream, const char* what);
// Runs `op` on the compute stream after the work queued so far and waits
// for it (a kernel that returns a value to the host: one host sync, `what`).
// Its exception, if any, is rethrown here.
void emulated_run_and_wait(const std::function<void()>& op, const char* what);
// Waits for every stream without counting a sync (emulation switched off, tests).
void emulated_drain();

// A CUDA event: record() marks the point of `stream` the host has queued so
// far; wait_on() makes later work of another stream wait for that point.
class EmulatedEvent {
 public:
  EmulatedEvent();
  void record(EmulatedStreamId stream);
  void wait_on(EmulatedStreamId stream) const;
  bool query() const;  // reached (never waits)

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Copies ahead (tensor/device.h, CopyAheadScope), as cuda_runtime.cpp runs
// them on a GPU: `copy` (writing the block at dst) on the copy stream, after
// the compute stream's work queued so far and beside what it queues next,
// which waits for it only from emulated_await_copies_ahead on. A block freed
// before then is freed after the copy (emulated_free_after_copy_ahead).
void emulated_copy_ahead(const void* dst, std::function<void()> copy);
void emulated_await_copies_ahead();
void emulated_free_after_copy_ahead(const void* dst);

// True on a stream's worker thread (and its OpenMP team: see device.cpp).
bool on_emulated_stream();
// Marks the calling thread as a host thread that queues work: device memory
// is never readable from it, whatever other threads run.
void mark_emulated_host_thread();
bool is_emulated_host_thread();

// Host waits so far, in all and by what waited ("copy to host",
// "loss.count_targets", ...).
uint64_t emulated_host_syncs();
std::map<std::string, uint64_t> emulated_host_syncs_by_cause();

// Fills [p, p + nbytes) with the poison of fresh and freed blocks (0xFF).
void emulated_poison(void* p, size_t nbytes);

}  // namespace cmha
