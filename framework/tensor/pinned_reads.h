#pragma once
// The reads of one page-locked host block by copies to GPUs (cuda_runtime.cpp):
// the block is handed out again only once each has finished. One event per
// (device, stream) that read it: a stream runs in order, so its last event
// covers its earlier copies, but two streams do not order each other (a
// block read on the copy stream, then on the compute stream, is free only
// when both are done; one event re-recorded on the later stream would free
// it while the copy stream may still read it). Header-only and free of CUDA:
// tested on every machine with stand-in events.
#include <vector>

namespace cmha {

template <typename Event>
class PinnedReads {
 public:
  struct Read {
    int device;
    const void* stream;
    Event event;
  };
  // The event to record for a copy on (device, stream): the one this stream
  // recorded before, or a new one made by make() (kept, and returned).
  template <typename Make>
  Event& for_copy(int device, const void* stream, Make&& make) {
    for (Read& r : reads_)
      if (r.device == device && r.stream == stream) return r.event;
    reads_.push_back({device, stream, make()});
    return reads_.back().event;
  }
  const std::vector<Read>& all() const { return reads_; }

 private:
  std::vector<Read> reads_;
};

}  // namespace cmha
