#include "support/source_paths.h"

namespace cmha::test {
const char* const kSourceDir = CMHA_SOURCE_DIR_PATH;
const char* const kBinaryDir = CMHA_BINARY_DIR_PATH;
const char* const kFixtureDir = CMHA_FIXTURE_DIR_PATH;
}  // namespace cmha::test
