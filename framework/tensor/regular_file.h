#pragma once
// Input files must be regular files: opening a FIFO blocks until a writer
// comes (forever, for a mistyped path), and a directory or a device reads as
// garbage or without end.
#include <string>

namespace cmha {

// Throws one cmha::Error naming `what` and `path` when `path` exists and is
// not a regular file (a symbolic link counts as what it points to). A path
// that does not exist passes: the caller's open reports it in its own words.
void refuse_special_file(const std::string& path, const std::string& what);

}  // namespace cmha
