#pragma once
// The trainer's terminal display. On a terminal: one progress bar redrawn in
// place (\r and clear-to-end-of-line) that always fits the terminal's width,
// permanent lines (the kept line every train.log_every, validation, warnings)
// printed above it, and the bar cleared at the end. Off a terminal (a log
// file, a pipe, TERM=dumb): no bar, only the permanent lines, unshortened.
//
// The rendering is pure (a view, a width → a string), so its width guarantee
// is unit-tested; ProgressDisplay only decides when to draw and where.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace cmha::train {

// What the bar and the kept line show.
struct ProgressView {
  int64_t update = 0, planned = 0;  // updates done / planned in the whole run
  int64_t epoch = 1;                // 1-based: the epoch this update belongs to
  double loss = NAN;                // nats per unit (token or sample) over the window
  double lr = NAN, gnorm = NAN;
  double rate = NAN;                // units per second of training (validation excluded)
  std::string unit = "tokens";      // "tokens" or "samples"
  double elapsed_s = NAN;           // wall time of this session
  double eta_s = NAN;               // estimated wall time left; NaN = not known yet
};

// "--" (unknown or negative), "45s", "12m05s", "3h07m", "2d04h".
std::string format_duration(double seconds);

// Display columns of a UTF-8 string (one per code point: the display uses no wide characters).
size_t display_width(const std::string& utf8);
// The longest prefix of `utf8` at most `width` columns wide, whole code points only.
std::string truncate_to_width(const std::string& utf8, size_t width);

// One field of a line: its text, and how important it is (0: never dropped;
// larger numbers are dropped first when the line does not fit).
struct LineField {
  std::string text;
  int priority = 0;
};

// The fields joined by " | ", dropping the least important ones until the
// line fits in `width` columns (width 0: no limit, nothing dropped), and cut
// to `width` as a last resort.
std::string fit_fields(const std::vector<LineField>& fields, size_t width);

// The fields joined by " | " into as many lines as needed, each at most
// `width` columns; width 0: one line. Continuation lines start with two
// spaces. Nothing is dropped or cut: a field wider than a line (a long path)
// gets a line of its own.
std::vector<std::string> wrap_fields(const std::vector<std::string>& fields, size_t width);

// The bar line for a terminal `columns` wide: at most columns - 1 columns (a
// character in the last column makes some terminals wrap), e.g.
//   epoch 1 | 1234/2000  62% [█████████▋      ] loss 4.1234 | lr 5.00e-04 |  5120 tokens/s | ETA  1m20s
// Fields drop as it narrows: elapsed time, gnorm, lr, epoch (while the bar
// would be under 24 cells), rate, loss, then the bar itself (under 10
// cells); the count, the percentage and the ETA stay longest. Numbers are
// padded to steady widths, so the bar does not change size as they change.
// `unicode`: block characters for the bar (a UTF-8 terminal), else '#' and '.'.
std::string render_progress_bar(const ProgressView& v, int columns, bool unicode);

// The kept line every train.log_every, e.g.
//   epoch 1 | update 50/2000 | loss 4.1234 | lr 5.00e-04 | gnorm 1.234 | 5120 tokens/s | elapsed 1m05s | ETA 20m05s
// fitted to `width` columns like the bar (width 0: everything, for log files).
std::string render_log_line(const ProgressView& v, size_t width);

// Whether a metric is a percentage (top1, top5, ema_top1, ...).
bool is_percent_metric(const std::string& name);
// "top1 41.23%", "bleu 12.34", "loss 3.9124": how the display shows a metric.
std::string format_metric(const std::string& name, double value);

// The width of the terminal on stderr, else stdout (ioctl TIOCGWINSZ), else
// $COLUMNS, else 80.
int terminal_width();

// Whether stderr is a terminal that understands \r and ESC[K (not TERM=dumb).
bool stderr_is_interactive();
// Whether the locale says UTF-8 (LC_ALL, LC_CTYPE, LANG): the bar may use block characters.
bool locale_is_utf8();

class ProgressDisplay {
 public:
  // `enabled`: this process draws (rank 0). `interactive`: a terminal (bar
  // and fitted lines) or not (plain lines, no bar).
  ProgressDisplay(bool enabled, bool interactive, std::FILE* out = stderr);
  ~ProgressDisplay();
  bool interactive() const { return enabled_ && interactive_; }

  // Redraws the bar (terminal only), at most every 0.1 s unless `force`.
  void bar(const ProgressView& v, bool force = false);
  // A permanent line above the bar: the bar's line is cleared first, then the
  // bar is drawn again below it.
  void line(const std::string& text);
  // A permanent line of fields, wrapped at field boundaries to the terminal's width.
  void fields(const std::vector<std::string>& fields);
  // Replaces the bar with a transient note (e.g. "validating ..."), until the next bar or line.
  void note(const std::string& text);
  // Clears the bar: the terminal is left with the permanent lines only.
  void finish();

 private:
  void clear();
  bool enabled_, interactive_, unicode_;
  std::FILE* out_;
  bool drawn_ = false;  // something transient is on the current line
  bool have_view_ = false;
  ProgressView last_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace cmha::train
