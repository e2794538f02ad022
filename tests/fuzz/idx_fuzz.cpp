// The IDX reader (MNIST / Fashion-MNIST files) on arbitrary bytes, as a plain
// file and gzip'd (so that mutations of the IDX header get past zlib), as
// images (rank 3) and as labels (rank 1). Seeds that are gzip files exercise
// zlib's handling of corrupt streams.
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "data/idx.h"
#include "fuzz_scratch.h"
#include "tensor/error.h"

namespace {

std::vector<uint8_t> gzip(const uint8_t* data, size_t size) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::vector<uint8_t> out(deflateBound(&z, size) + 32);
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Labels (rank 1) and images (rank 3): every element of the tensor is read.
void read_all(const std::string& path) {
  for (auto read : {&cmha::data::read_idx_labels, &cmha::data::read_idx_images}) {
    try {
      const cmha::Tensor t = read(path);
      (void)cmha::fuzz::touch(t.raw_data(), t.nbytes());
    } catch (const cmha::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  read_all(cmha::fuzz::write_scratch("input.idx", data, size));
  const std::vector<uint8_t> gz = gzip(data, size);
  read_all(cmha::fuzz::write_scratch("input.idx.gz", gz.data(), gz.size()));
  return 0;
}
