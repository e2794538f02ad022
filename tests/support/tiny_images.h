#pragma once
// Tiny synthetic image data for tests that run the built cmha.
#include <cstdint>
#include <string>

namespace cmha::test {

// A Fashion-MNIST look-alike in `dir` (train-*/t10k-* IDX files, gzip'd):
// class c images are bright in band c, so even a few steps learn something.
void write_tiny_fashion_mnist(const std::string& dir, int64_t train, int64_t test);

// key=value overrides that shrink a ViT recipe to a tiny one on that data, run in `run_dir`
// (the t10k files are both the validation and the test split: data.valid_is_test).
std::string tiny_vit_overrides(const std::string& data, const std::string& run_dir);
// `cmha train` arguments: recipes/local/fashion_mnist_vit.yaml with those overrides.
std::string tiny_run(const std::string& data, const std::string& run_dir);

}  // namespace cmha::test
