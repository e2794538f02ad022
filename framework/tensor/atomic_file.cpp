#include "tensor/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>

#include "tensor/error.h"

namespace cmha {

namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;  // small writes (a token cache's sentences) batched to 1 MiB

// The directory entry of a rename reaches the disk only when the directory is flushed.
int fsync_directory_of(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int rc = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return rc;
}

}  // namespace

void (*AtomicFile::before_rename_for_tests)() = nullptr;

std::string atomic_temporary_path(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

long temporary_owner_pid(const std::string& file_name) {
  static const std::regex temporary(R"(.+\.tmp\.([0-9]{1,9}))");
  std::smatch m;
  if (!std::regex_match(file_name, m, temporary)) return 0;
  return std::stol(m[1]);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), temporary_(atomic_temporary_path(path_)) {
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create its temporary '" + temporary_ + "'", errno);
  buffer_.reserve(kBufferBytes);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temporary_.c_str());
  }
}

void AtomicFile::fail(const std::string& doing, int error_number) {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(temporary_.c_str());
  }
  throw Error("cannot write '" + path_ + "': could not " + doing + ": " + std::strerror(error_number) +
              " (the previous file, if any, is untouched)");
}

void AtomicFile::flush_buffer() {
  const char* p = buffer_.data();
  size_t left = buffer_.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write it", n < 0 ? errno : EIO);
    p += n;
    left -= static_cast<size_t>(n);
  }
  buffer_.clear();
}

void AtomicFile::write(const void* data, size_t bytes) {
  CMHA_CHECK(fd_ >= 0, "cannot write '" + path_ + "': it was committed already");
  const char* p = static_cast<const char*>(data);
  if (buffer_.size() + bytes > kBufferBytes) flush_buffer();
  if (bytes >= kBufferBytes) {  // large blocks (tensors) go straight to the file
    buffer_.assign(p, bytes);
    flush_buffer();
    buffer_.shrink_to_fit();
    buffer_.reserve(kBufferBytes);
    return;
  }
  buffer_.append(p, bytes);
}

void AtomicFile::commit() {
  CMHA_CHECK(fd_ >= 0, "cannot write '" + path_ + "': it was committed already");
  flush_buffer();
  if (::fsync(fd_) != 0) fail("flush it to disk", errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) {
    const int e = errno;
    ::unlink(temporary_.c_str());
    throw Error("cannot write '" + path_ + "': could not close its temporary: " + std::strerror(e) +
                " (the previous file, if any, is untouched)");
  }
  if (before_rename_for_tests) before_rename_for_tests();
  if (std::rename(temporary_.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    ::unlink(temporary_.c_str());
    throw Error("cannot write '" + path_ + "': could not rename '" + temporary_ + "' over it: " + std::strerror(e) +
                " (the previous file, if any, is untouched)");
  }
  if (const int e = fsync_directory_of(path_); e != 0)
    throw Error("cannot write '" + path_ + "': could not flush its folder to disk: " + std::strerror(e));
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

}  // namespace cmha
