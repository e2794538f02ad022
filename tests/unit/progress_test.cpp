// The trainer's terminal display (train/progress.h): the bar never exceeds
// the terminal's width, fields drop in their order as it narrows, durations
// read the same everywhere, and the display writes a bar only to a terminal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/check.h"
#include "support/text.h"
#include "train/progress.h"

using namespace cmha::train;

namespace {

using cmha::test::has;

ProgressView mid_run() {
  ProgressView v;
  v.update = 1234;
  v.planned = 2000;
  v.epoch = 3;
  v.loss = 4.12346;
  v.lr = 5e-4;
  v.gnorm = 1.2345;
  v.rate = 5120.4;
  v.unit = "tokens";
  v.elapsed_s = 130;
  v.eta_s = 80;
  return v;
}

// Views that stress the layout: nothing known yet, a huge run, a finished one.
std::vector<ProgressView> views() {
  std::vector<ProgressView> out{mid_run()};
  ProgressView start;
  start.planned = 100;
  out.push_back(start);
  ProgressView huge = mid_run();
  huge.update = 123456789;
  huge.planned = 987654321;
  huge.epoch = 12345;
  huge.loss = 123456.789;
  huge.gnorm = 98765.4;
  huge.rate = 12345678;
  huge.eta_s = 9e7;
  huge.unit = "samples";
  out.push_back(huge);
  ProgressView done = mid_run();
  done.update = done.planned;
  done.eta_s = 0;
  out.push_back(done);
  return out;
}

// What a terminal shows last on the line: the text after the last '\r', escapes removed.
std::string screen_line(const std::string& written) {
  std::string line = written.substr(written.rfind('\r') + 1);
  for (size_t p; (p = line.find("\033[K")) != std::string::npos;) line.erase(p, 3);
  return line;
}

}  // namespace

TEST(Progress, DurationsReadTheSameEverywhere) {
  EXPECT_EQ(format_duration(NAN), "--");
  EXPECT_EQ(format_duration(-1), "--");
  EXPECT_EQ(format_duration(INFINITY), "--");
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(59.4), "59s");
  EXPECT_EQ(format_duration(59.6), "1m00s");
  EXPECT_EQ(format_duration(65), "1m05s");
  EXPECT_EQ(format_duration(3599), "59m59s");
  EXPECT_EQ(format_duration(3600), "1h00m");
  EXPECT_EQ(format_duration(3 * 3600 + 7 * 60 + 30), "3h07m");
  EXPECT_EQ(format_duration(86400 * 2 + 4 * 3600), "2d04h");
}

TEST(Progress, TheBarNeverExceedsTheTerminalWidth) {
  for (bool unicode : {false, true})
    for (const ProgressView& v : views())
      for (int columns : {1, 10, 20, 40, 60, 80, 100, 120, 200, 300}) {
        const std::string bar = render_progress_bar(v, columns, unicode);
        EXPECT_LE(display_width(bar), static_cast<size_t>(std::max(1, columns - 1)))
            << columns << " columns: '" << bar << "'";
        EXPECT_EQ(bar.find('\n'), std::string::npos);
        if (columns >= 40) EXPECT_TRUE(has(bar, "ETA ")) << bar;
        // The bar itself stays down to 40 columns (60 with nine-digit counts).
        if (columns >= (v.planned > 1000000 ? 60 : 40)) EXPECT_TRUE(has(bar, "[")) << columns << " columns: " << bar;
      }
}

TEST(Progress, FieldsDropInTheirOrderAsTheTerminalNarrows) {
  const ProgressView v = mid_run();
  const std::string wide = render_progress_bar(v, 300, false);
  for (const char* part : {"epoch 3", "1234/2000", " 61% [", "loss 4.1235", "lr 5.00e-04", "gnorm 1.234", "5120 tokens/s",
                           "elapsed 2m10s", "ETA  1m20s"})
    EXPECT_TRUE(has(wide, part)) << part << " in " << wide;
  const std::string at80 = render_progress_bar(v, 80, false);
  EXPECT_TRUE(has(at80, "loss 4.1235") && has(at80, "tokens/s") && has(at80, "ETA  1m20s")) << at80;
  EXPECT_FALSE(has(at80, "elapsed") || has(at80, "gnorm")) << at80;  // the least important go first
  const std::string at40 = render_progress_bar(v, 40, false);
  EXPECT_TRUE(has(at40, "1234/2000") && has(at40, "61%") && has(at40, "ETA  1m20s")) << at40;
  // 61 % of the bar is filled: ASCII '#' then '.'.
  const std::string cells = wide.substr(wide.find('[') + 1, wide.find(']') - wide.find('[') - 1);
  EXPECT_EQ(cells.find_first_not_of('#'), cells.find('.'));
  EXPECT_NEAR(static_cast<double>(cells.find('.')) / static_cast<double>(cells.size()), 0.617, 0.02) << cells;
}

TEST(Progress, TheBarKeepsItsSizeAsTheNumbersChange) {
  // Counts, rates and ETAs of different lengths: the bar stays as wide (no jitter while it fills).
  auto cells = [](const std::string& bar) { return display_width(bar.substr(bar.find('['), bar.find(']') - bar.find('[') + 1)); };
  ProgressView a = mid_run(), b = mid_run();
  a.update = 5;
  a.rate = 77;
  a.eta_s = 4000;
  b.update = 1999;
  b.rate = 20345;
  b.eta_s = 3;
  for (int columns : {80, 120}) {
    EXPECT_EQ(cells(render_progress_bar(a, columns, true)), cells(render_progress_bar(b, columns, true))) << columns;
    EXPECT_EQ(display_width(render_progress_bar(a, columns, true)), display_width(render_progress_bar(b, columns, true)));
  }
  EXPECT_TRUE(has(render_progress_bar(a, 120, false), "   5/2000")) << render_progress_bar(a, 120, false);
}

TEST(Progress, AFinishedRunFillsTheBar) {
  ProgressView v = mid_run();
  v.update = v.planned;
  const std::string ascii = render_progress_bar(v, 120, false), blocks = render_progress_bar(v, 120, true);
  EXPECT_TRUE(has(ascii, "100% [#")) << ascii;
  EXPECT_FALSE(has(ascii, ".]")) << ascii;
  EXPECT_TRUE(has(blocks, "█]")) << blocks;
  v.update = 0;
  EXPECT_TRUE(has(render_progress_bar(v, 120, false), "  0% [....")) << render_progress_bar(v, 120, false);
}

TEST(Progress, TheKeptLineHoldsEveryFieldOffATerminalAndFitsOnOne) {
  const ProgressView v = mid_run();
  EXPECT_EQ(render_log_line(v, 0),
            "epoch 3 | update 1234/2000 | loss 4.1235 | lr 5.00e-04 | gnorm 1.234 | 5120 tokens/s | elapsed 2m10s | ETA 1m20s");
  for (size_t width : {20, 40, 79, 119}) {
    const std::string line = render_log_line(v, width);
    EXPECT_LE(display_width(line), width) << line;
    if (width >= 40) EXPECT_TRUE(has(line, "update 1234/2000") && has(line, "ETA")) << line;
  }
}

TEST(Progress, FitAndWrapKeepTheirPromises) {
  EXPECT_EQ(fit_fields({{"a", 0}, {"bbbb", 2}, {"cc", 1}}, 0), "a | bbbb | cc");
  EXPECT_EQ(fit_fields({{"a", 0}, {"bbbb", 2}, {"cc", 1}}, 8), "a | cc");
  EXPECT_EQ(fit_fields({{"aaaaaaaaaa", 0}}, 4), "aaaa");
  const std::vector<std::string> fields = {"valid", "epoch 1", "update 1000", "bleu 12.34", "loss 3.9124",
                                           "nll_loss 3.5120", "perplexity 33.5198", "top1 41.23%"};
  EXPECT_EQ(wrap_fields(fields, 0).size(), 1u);
  const std::vector<std::string> lines = wrap_fields(fields, 39);
  ASSERT_GT(lines.size(), 1u);
  std::string joined;
  for (const std::string& l : lines) {
    EXPECT_LE(display_width(l), 39u) << l;
    joined += l;
  }
  for (const std::string& f : fields) EXPECT_TRUE(has(joined, f)) << f;  // nothing dropped
  EXPECT_EQ(lines[1].rfind("  ", 0), 0u);
  EXPECT_EQ(wrap_fields({"short", std::string(50, 'x')}, 20).size(), 2u);  // a long field on its own line, whole
}

TEST(Progress, WidthsCountCodePointsNotBytes) {
  EXPECT_EQ(display_width("█▏ab"), 4u);
  EXPECT_EQ(truncate_to_width("██ab", 3), "██a");
  EXPECT_EQ(truncate_to_width("ab", 5), "ab");
}

TEST(Progress, MetricsShowTheirUnits) {
  EXPECT_EQ(format_metric("top1", 41.234), "top1 41.23%");
  EXPECT_EQ(format_metric("ema_top5", 90), "ema_top5 90.00%");
  EXPECT_EQ(format_metric("bleu", 12.346), "bleu 12.35");
  EXPECT_EQ(format_metric("loss", 3.91245), "loss 3.9125");
}

TEST(Progress, TerminalWidthFallsBackToColumnsThen80) {
  if (isatty(STDERR_FILENO) || isatty(STDOUT_FILENO)) GTEST_SKIP() << "run on a terminal: its width wins";
  setenv("COLUMNS", "123", 1);
  EXPECT_EQ(terminal_width(), 123);
  setenv("COLUMNS", "junk", 1);
  EXPECT_EQ(terminal_width(), 80);
  unsetenv("COLUMNS");
  EXPECT_EQ(terminal_width(), 80);
}

TEST(Progress, OnATerminalLinesGoAboveTheBarAndTheEndLeavesNoBar) {
  if (isatty(STDERR_FILENO) || isatty(STDOUT_FILENO)) GTEST_SKIP() << "run on a terminal: its width wins";
  setenv("COLUMNS", "60", 1);
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressDisplay d(true, true, f);
    d.bar(mid_run(), true);
    d.line("valid | epoch 3 | update 1234 | loss 3.9");
    d.fields({"cmha train: 2000 updates in 25m40s", "3 epochs", "5400 tokens/s", "best bleu 20.74", "0 skipped"});
    d.finish();
  }
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out += static_cast<char>(c);
  std::fclose(f);
  unsetenv("COLUMNS");
  // Every permanent line starts at column 0 with the bar's line cleared, and fits 59 columns.
  size_t start = 0;
  int permanent = 0;
  for (size_t nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1, ++permanent) {
    const std::string shown = screen_line(out.substr(start, nl - start));
    EXPECT_LE(display_width(shown), 59u) << shown;
  }
  EXPECT_EQ(permanent, 3);  // the valid line and the summary wrapped in two
  EXPECT_TRUE(has(out, "\rvalid | epoch 3 | update 1234 | loss 3.9\033[K\n")) << out;
  // After the last permanent line: the bar was drawn again, then cleared by finish().
  const std::string tail = out.substr(start);
  EXPECT_TRUE(has(tail, "1234/2000")) << tail;
  EXPECT_EQ(tail.substr(tail.size() - 4), "\r\033[K");
}

TEST(Progress, OffATerminalThereIsNoBarOnlyTheLines) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressDisplay d(true, false, f);
    d.bar(mid_run(), true);
    d.note("validating ...");
    d.line("kept line");
    d.fields({"a", "b"});
  }
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out += static_cast<char>(c);
  std::fclose(f);
  EXPECT_EQ(out, "kept line\na | b\n");
  // A rank other than 0 writes nothing at all.
  std::FILE* g = std::tmpfile();
  {
    ProgressDisplay d(false, true, g);
    d.bar(mid_run(), true);
    d.line("x");
  }
  EXPECT_EQ(std::ftell(g), 0);
  std::fclose(g);
}
