#pragma once
// Kernel timing for the profile on a real GPU (backend/profile.cpp): the host
// returns from a launch long before the kernel ends, so a kernel is timed
// between two CUDA events recorded on its device's stream around the launch,
// and the times are read when the profile is, never inside a step.
namespace cmha::cuda {

// An event (a cudaEvent_t with timing) recorded now on the device's compute stream.
void* record_timing_event(int device);
// Milliseconds between two such events (waiting for the second); destroys
// both. Either may be null (a failed record): 0.
double elapsed_ms_and_destroy(void* start, void* end);

}  // namespace cmha::cuda
