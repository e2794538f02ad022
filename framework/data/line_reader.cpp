#include "data/line_reader.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tensor/error.h"

namespace cmha::data {

namespace {
constexpr size_t kReadBytes = size_t{1} << 16;
constexpr int kWaitMs = 200;  // while_waiting's period: a signal that races the poll is seen this late at most

// 1: `fd` can be read without blocking (data or the end), 0: not within
// `timeout_ms`, -1: a signal interrupted the wait.
int wait_readable(int fd, int timeout_ms, const std::string& name) {
  pollfd p{fd, POLLIN, 0};
  const int r = ::poll(&p, 1, timeout_ms);
  if (r < 0 && errno == EINTR) return -1;
  CMHA_CHECK(r >= 0, "reading " + name + " failed: " + std::strerror(errno));
  // POLLHUP (writer gone) and POLLERR: the read says which.
  return r > 0 ? 1 : 0;
}
}  // namespace

LineReader::LineReader(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}

bool LineReader::fill() {
  // Drop what was returned before growing the buffer.
  if (start_ > 0) {
    buffer_.erase(0, start_);
    scanned_ -= start_;
    start_ = 0;
  }
  const size_t old = buffer_.size();
  buffer_.resize(old + kReadBytes);
  ssize_t n;
  do n = ::read(fd_, buffer_.data() + old, kReadBytes);
  while (n < 0 && errno == EINTR);
  const int error = errno;
  buffer_.resize(old + static_cast<size_t>(n > 0 ? n : 0));
  CMHA_CHECK(n >= 0, "reading " + name_ + " failed: " + std::strerror(error));
  if (n == 0) ended_ = true;
  return n > 0;
}

bool LineReader::has_line() {
  if (newline_ != std::string::npos) return true;
  newline_ = buffer_.find('\n', scanned_);
  scanned_ = newline_ == std::string::npos ? buffer_.size() : newline_;
  return newline_ != std::string::npos || ended_;
}

bool LineReader::ready() {
  while (!has_line()) {
    if (wait_readable(fd_, 0, name_) != 1) return false;
    fill();
  }
  return true;
}

bool LineReader::next(std::string& line, const std::function<void()>& while_waiting) {
  while (!has_line()) {
    const int r = wait_readable(fd_, while_waiting ? kWaitMs : -1, name_);
    if (r == 1) fill();
    else if (while_waiting) while_waiting();
  }
  if (newline_ == std::string::npos) {  // the end of the input: what is left is the last line
    if (start_ >= buffer_.size()) return false;
    line.assign(buffer_, start_, std::string::npos);
    start_ = buffer_.size();
  } else {
    line.assign(buffer_, start_, newline_ - start_);
    start_ = newline_ + 1;
    newline_ = std::string::npos;
  }
  scanned_ = start_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++lines_read_;
  return true;
}

}  // namespace cmha::data
