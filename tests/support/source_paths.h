#pragma once
// Where the tests find the repository, the build folder and the reference
// fixtures. Only tests/support/source_paths.cpp is compiled with these
// absolute paths (tests/CMakeLists.txt): with them on every test file's
// command line, a clone at another path (CI's) missed ccache for every test
// object; now it misses for that one file.
namespace cmha::test {
extern const char* const kSourceDir;   // the repository's root
extern const char* const kBinaryDir;   // the build folder
extern const char* const kFixtureDir;  // tests/reference/fixtures
}  // namespace cmha::test

#define CMHA_SOURCE_DIR (::cmha::test::kSourceDir)
#define CMHA_BINARY_DIR (::cmha::test::kBinaryDir)
#define CMHA_FIXTURE_DIR (::cmha::test::kFixtureDir)
