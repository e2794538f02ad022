// data::LineReader: lines of a pipe or file as they arrive, with a check
// that never waits (what lets cmha translate stream).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "data/line_reader.h"
#include "support/check.h"
#include "support/files.h"
#include "tensor/error.h"

using namespace cmha;

namespace {

struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() { EXPECT_EQ(::pipe(fds), 0); }
  ~Pipe() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  void write(const std::string& s) { ASSERT_EQ(::write(fds[1], s.data(), s.size()), static_cast<ssize_t>(s.size())); }
  void close_writer() {
    ::close(fds[1]);
    fds[1] = -1;
  }
};

}  // namespace

TEST(LineReader, APipeIsReadyOnlyWhenAWholeLineHasArrived) {
  Pipe p;
  data::LineReader r(p.fds[0], "the pipe");
  EXPECT_FALSE(r.ready());  // nothing written: a check, not a wait
  p.write("first\r\nsec");
  EXPECT_TRUE(r.ready());
  std::string line;
  ASSERT_TRUE(r.next(line));
  EXPECT_EQ(line, "first");  // without "\r\n"
  EXPECT_FALSE(r.ready());   // "sec" is not a whole line yet
  p.write("ond\n\nlast");
  ASSERT_TRUE(r.next(line));
  EXPECT_EQ(line, "second");
  ASSERT_TRUE(r.next(line));
  EXPECT_EQ(line, "");
  EXPECT_FALSE(r.ready());
  p.close_writer();
  EXPECT_TRUE(r.ready());  // the end of the input makes "last" whole
  ASSERT_TRUE(r.next(line));
  EXPECT_EQ(line, "last");
  EXPECT_TRUE(r.ready());
  EXPECT_FALSE(r.next(line));
  EXPECT_FALSE(r.next(line));
  EXPECT_EQ(r.lines_read(), 4u);
}

TEST(LineReader, AFileIsReadWholeAcrossReadsWithLongLines) {
  const std::string dir = test::temp_dir("line_reader");
  const std::string longest(300000, 'x');  // several reads of 64 KiB
  test::write_file(dir + "/in.txt", "a\n" + longest + "\nb\n");
  const int fd = ::open((dir + "/in.txt").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  data::LineReader r(fd, "'in.txt'");
  std::string line;
  EXPECT_TRUE(r.ready());
  ASSERT_TRUE(r.next(line));
  EXPECT_EQ(line, "a");
  ASSERT_TRUE(r.ready());
  ASSERT_TRUE(r.next(line));
  EXPECT_EQ(line, longest);
  ASSERT_TRUE(r.next(line));
  EXPECT_EQ(line, "b");
  EXPECT_FALSE(r.next(line));  // a final "\n" makes no empty last line
  ::close(fd);
  std::filesystem::remove_all(dir);
}

TEST(LineReader, WaitingCallsBackAndCanBeStopped) {
  Pipe p;
  data::LineReader r(p.fds[0], "the pipe");
  int calls = 0;
  std::string line;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(r.next(line,
                      [&] {
                        if (++calls == 2) throw Error("stop");
                      }),
               Error);
  EXPECT_EQ(calls, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(LineReader, AReadErrorNamesTheInput) {
  const std::string dir = test::temp_dir("line_reader_error");
  test::write_file(dir + "/out.txt", "");
  const int fd = ::open((dir + "/out.txt").c_str(), O_WRONLY);  // readable by poll, not by read
  ASSERT_GE(fd, 0);
  data::LineReader r(fd, "'out.txt'");
  std::string line;
  const std::string message = test::error_of([&] { r.next(line); });
  EXPECT_EQ(message.rfind("reading 'out.txt' failed: ", 0), 0u) << message;
  ::close(fd);
  std::filesystem::remove_all(dir);
}
