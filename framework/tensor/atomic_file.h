#pragma once
// The one way cmha replaces a file: NAME.tmp.PID is written in NAME's own
// directory, flushed to disk (fsync), renamed over NAME, and the directory is
// flushed too. After a crash, a kill or a power loss NAME is the old file or
// the new one, never empty or half written; a temporary left behind carries
// the PID of its dead writer, and `cmha train` removes such files at the next
// start (run/run_dir.h, temporary_owner_pid). Checkpoints, results.json,
// metrics.jsonl, token caches, SentencePiece models and translations written
// over their input all go through here.
#include <cstddef>
#include <string>
#include <string_view>

namespace cmha {

class AtomicFile {
 public:
  // Opens NAME.tmp.PID for writing (the folder must exist); an error names NAME and the OS's reason.
  explicit AtomicFile(std::string path);
  // Without commit() (an error, an exception): the temporary is removed and NAME left as it was.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);  // buffered
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Flush, fsync, close, rename over NAME, fsync NAME's directory.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temporary_path() const { return temporary_; }

  // For tests of a writer killed between its last write and the rename: called
  // in commit() after the file reached the disk and before the rename.
  static void (*before_rename_for_tests)();

 private:
  void flush_buffer();
  [[noreturn]] void fail(const std::string& doing, int error_number);
  std::string path_, temporary_;
  int fd_ = -1;
  std::string buffer_;
};

// NAME written whole through an AtomicFile.
void write_file_atomically(const std::string& path, std::string_view bytes);

// The temporary's name for NAME in this process: "NAME.tmp.PID".
std::string atomic_temporary_path(const std::string& path);

// The writer's PID when `file_name` (no folder) is a temporary of this scheme, else 0.
long temporary_owner_pid(const std::string& file_name);

}  // namespace cmha
