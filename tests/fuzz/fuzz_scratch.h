#pragma once
// The readers under fuzzing take paths: each input is written to a file in a
// scratch folder of this process ($TMPDIR/cmha-fuzz-<pid>/), removed at exit.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace cmha::fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
                              ("cmha-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return dir;
}

// Writes `size` bytes to scratch_dir()/name and returns the path.
inline std::string write_scratch(const std::string& name, const void* data, size_t size) {
  const std::string path = (scratch_dir() / name).string();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

// Reads every byte of a tensor's storage, so that AddressSanitizer sees an
// allocation smaller than the tensor claims; the sum keeps the reads alive.
inline uint64_t touch(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += p[i];
  return sum;
}

}  // namespace cmha::fuzz
