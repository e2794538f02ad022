#pragma once
// Lines of a file descriptor (standard input, a pipe, a terminal or a
// file) as they arrive, for commands that answer each line as soon as it is
// there (cmha translate): ready() says without waiting whether a line is
// already available, so a caller batches what is there and waits only when
// nothing is. A pipe or terminal gives what its writer has written so far;
// a regular file is always ready.
#include <cstddef>
#include <functional>
#include <string>

namespace cmha::data {

class LineReader {
 public:
  // Reads `fd` (not owned, not closed); `name` names it in errors
  // ("standard input", "'in.txt'").
  LineReader(int fd, std::string name);

  // Whether next() would return at once: a whole line (or the end of the
  // input) has arrived. Never waits.
  bool ready();
  // The next line without its "\n" (or "\r\n"); the last line needs no
  // "\n". False at the end of the input. Waits when no line is ready,
  // calling `while_waiting` about every 200 ms and when a signal arrives (it
  // may throw to stop). A read error is one cmha::Error naming the input.
  bool next(std::string& line, const std::function<void()>& while_waiting = {});

  size_t lines_read() const { return lines_read_; }

 private:
  // Appends what one read() gives to the buffer; false at the end of the input.
  bool fill();
  // Whether the buffer holds a whole line or the input has ended; newline_
  // is then where the line ends (npos: at the end of the input).
  bool has_line();

  int fd_;
  std::string name_;
  std::string buffer_;  // bytes read and not yet returned start at start_
  size_t start_ = 0;
  size_t scanned_ = 0;  // no '\n' in [start_, scanned_): a long line is searched once, not at every read
  size_t newline_ = std::string::npos;
  bool ended_ = false;
  size_t lines_read_ = 0;
};

}  // namespace cmha::data
