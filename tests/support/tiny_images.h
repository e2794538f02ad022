#pragma once
// Tiny synthetic image data for tests that run the built cmha.
#include <cstdint>
#include <string>

namespace cmha::test {

// A Fashion-MNIST look-alike in `dir` (train-*/t10k-* IDX files, gzip'd):
// class c images are bright in band c, so even a few steps learn something.
void write_tiny_fashion_mnist(const std::string& dir, int64_t train, int64_t test);

// `cmha train` overrides for a tiny ViT on that data, run in `run_dir`.
std::string tiny_run(const std::string& data, const std::string& run_dir);

}  // namespace cmha::test
