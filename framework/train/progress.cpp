#include "train/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <numeric>

#include "train/trainer.h"

namespace cmha::train {

namespace {

std::string printf_string(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

// `text` right-aligned in `width` columns (ASCII).
std::string pad_left(const std::string& text, size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

// `aligned`: numbers padded to a steady width, so the bar beside them keeps its size.
std::string format_rate(double rate, const std::string& unit, bool aligned) {
  const std::string number = rate >= 1e5 ? printf_string("%.0fk", rate / 1000)
                             : rate >= 10 ? printf_string("%.0f", rate)
                                          : printf_string("%.2f", rate);
  return pad_left(number, aligned ? 5 : 0) + " " + unit + "/s";
}

std::string format_gnorm(double g) { return "gnorm " + printf_string(g < 100 ? "%.3f" : "%.0f", g); }

// The fields both the bar and the kept line may show, with their priorities
// (see render_progress_bar); NaN values are left out.
struct Fields {
  LineField epoch, loss, lr, gnorm, rate, elapsed, eta;
};

Fields fields_of(const ProgressView& v, bool aligned) {
  Fields f;
  f.epoch = {"epoch " + std::to_string(v.epoch), 6};
  if (!std::isnan(v.loss)) f.loss = {"loss " + printf_string("%.4f", v.loss), 3};
  if (!std::isnan(v.lr)) f.lr = {"lr " + printf_string("%.2e", v.lr), 6};
  if (!std::isnan(v.gnorm)) f.gnorm = {format_gnorm(v.gnorm), 7};
  if (!std::isnan(v.rate)) f.rate = {format_rate(v.rate, v.unit, aligned), 4};
  if (!std::isnan(v.elapsed_s)) f.elapsed = {"elapsed " + format_duration(v.elapsed_s), 8};
  f.eta = {"ETA " + pad_left(format_duration(v.eta_s), aligned ? 6 : 0), 1};
  return f;
}

// "1234/2000" (aligned: "  12/2000"), or "1234" when the plan is unknown.
std::string update_count(const ProgressView& v, bool aligned) {
  std::string out = std::to_string(v.update);
  if (v.planned > 0) {
    const std::string planned = std::to_string(v.planned);
    out = pad_left(out, aligned ? planned.size() : 0).append("/").append(planned);
  }
  return out;
}

// The bar's inside, `inner` columns: the done fraction filled.
std::string bar_cells(double fraction, size_t inner, bool unicode) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  std::string out = "[";
  if (unicode) {
    static const char* partial[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
    const auto eighths = static_cast<size_t>(fraction * static_cast<double>(inner * 8));
    const size_t full = eighths / 8, rest = eighths % 8;
    for (size_t i = 0; i < full; ++i) out += "█";
    size_t used = full;
    if (rest > 0 && used < inner) {
      out += partial[rest];
      ++used;
    }
    out.append(inner - used, ' ');
  } else {
    const auto full = static_cast<size_t>(fraction * static_cast<double>(inner) + 0.5);
    out.append(full, '#');
    out.append(inner - full, '.');
  }
  return out + "]";
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%llds", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400) std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else std::snprintf(buf, sizeof buf, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
  return buf;
}

size_t display_width(const std::string& utf8) {
  return static_cast<size_t>(std::count_if(utf8.begin(), utf8.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string truncate_to_width(const std::string& utf8, size_t width) {
  size_t columns = 0, i = 0;
  for (; i < utf8.size(); ++i)
    if ((utf8[i] & 0xC0) != 0x80 && columns++ == width) break;
  return utf8.substr(0, i);
}

std::string fit_fields(const std::vector<LineField>& fields, size_t width) {
  std::vector<bool> kept(fields.size(), true);
  for (size_t i = 0; i < fields.size(); ++i) kept[i] = !fields[i].text.empty();
  auto joined = [&] {
    std::string out;
    for (size_t i = 0; i < fields.size(); ++i)
      if (kept[i]) out += (out.empty() ? "" : " | ") + fields[i].text;
    return out;
  };
  // The least important first; of equal ones, the later.
  std::vector<size_t> order(fields.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return fields[a].priority != fields[b].priority ? fields[a].priority > fields[b].priority : a > b;
  });
  std::string line = joined();
  for (size_t k = 0; width > 0 && display_width(line) > width && k < order.size(); ++k) {
    if (fields[order[k]].priority == 0) break;
    kept[order[k]] = false;
    line = joined();
  }
  return width > 0 ? truncate_to_width(line, width) : line;
}

std::vector<std::string> wrap_fields(const std::vector<std::string>& fields, size_t width) {
  std::vector<std::string> lines;
  std::string current;
  for (const std::string& f : fields) {
    if (width > 0 && !current.empty() && display_width(current) + 3 + display_width(f) > width) {
      lines.push_back(current);
      current = "  ";
    }
    current += (current.empty() || current == "  " ? "" : " | ") + f;
  }
  if (!current.empty()) lines.push_back(current);
  return lines;
}

std::string render_progress_bar(const ProgressView& v, int columns, bool unicode) {
  const size_t avail = static_cast<size_t>(std::max(columns, 2) - 1);
  const Fields f = fields_of(v, true);
  const bool known = v.planned > 0;
  const double fraction = known ? static_cast<double>(v.update) / static_cast<double>(v.planned) : 0;
  // Display order; the bar (index 3) stretches over what the others leave.
  const std::vector<LineField> pieces = {
      f.epoch,
      {update_count(v, true), 0},
      {known ? printf_string("%3.0f%%", std::floor(100 * std::clamp(fraction, 0.0, 1.0))) : "", 0},
      {known ? "[]" : "", 2},
      f.loss, f.lr, f.gnorm, f.rate, f.elapsed, f.eta};
  // The bar is at least 10 cells, and 24 while the minor fields (epoch, lr, gnorm, elapsed: priority 6 and up) are shown.
  constexpr size_t kBar = 3, kMinInner = 10, kMinInnerWithMinor = 24, kMaxInner = 60;
  std::vector<bool> kept(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) kept[i] = !pieces[i].text.empty();
  // The separator before piece i: a space before the percentage and around the bar, " | " between the rest.
  auto compose = [&](size_t inner) {
    std::string out;
    size_t prev = pieces.size();
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (!kept[i]) continue;
      if (prev != pieces.size()) out += i == kBar - 1 || i == kBar || prev == kBar ? " " : " | ";
      out += i == kBar ? bar_cells(fraction, inner, unicode) : pieces[i].text;
      prev = i;
    }
    return out;
  };
  std::vector<size_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {  // the least important first; of equal ones, the later
    return pieces[a].priority != pieces[b].priority ? pieces[a].priority > pieces[b].priority : a > b;
  });
  for (size_t k = 0;;) {
    if (kept[kBar]) {
      const size_t without_bar = display_width(compose(0)) - 2;  // compose(0) draws "[]"
      bool minor = false;
      for (size_t i = 0; i < pieces.size(); ++i) minor = minor || (kept[i] && pieces[i].priority >= 6);
      if (without_bar + 2 + (minor ? kMinInnerWithMinor : kMinInner) <= avail)
        return compose(std::min(kMaxInner, avail - without_bar - 2));
    } else if (display_width(compose(0)) <= avail) {
      return compose(0);
    }
    while (k < order.size() && (!kept[order[k]] || pieces[order[k]].priority == 0)) ++k;
    if (k >= order.size()) break;
    kept[order[k++]] = false;
  }
  return truncate_to_width(compose(0), avail);
}

std::string render_log_line(const ProgressView& v, size_t width) {
  const Fields f = fields_of(v, false);
  return fit_fields({f.epoch,
                     {"update " + update_count(v, false), 0},
                     f.loss, f.lr, f.gnorm, f.rate, f.elapsed, f.eta},
                    width);
}

bool is_percent_metric(const std::string& name) {
  const auto ends = [&](const char* tail) {
    const std::string t(tail);
    return name.size() >= t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
  };
  return ends("top1") || ends("top5");
}

std::string format_metric(const std::string& name, double value) {
  if (is_percent_metric(name)) return name + " " + printf_string("%.2f", value) + "%";
  if (name.find("bleu") != std::string::npos) return name + " " + printf_string("%.2f", value);
  return name + " " + printf_string("%.4f", value);
}

int terminal_width() {
  for (int fd : {STDERR_FILENO, STDOUT_FILENO}) {
    winsize w{};
    if (ioctl(fd, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  }
  if (const char* c = std::getenv("COLUMNS")) {
    const int n = std::atoi(c);
    if (n > 0) return n;
  }
  return 80;
}

bool stderr_is_interactive() {
  const char* term = std::getenv("TERM");
  return isatty(STDERR_FILENO) && !(term && std::string(term) == "dumb");
}

bool locale_is_utf8() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    std::string s(v);
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s.find("utf-8") != std::string::npos || s.find("utf8") != std::string::npos;
  }
  return false;
}

ProgressDisplay::ProgressDisplay(bool enabled, bool interactive, std::FILE* out)
    : enabled_(enabled), interactive_(interactive), unicode_(locale_is_utf8()), out_(out) {}

ProgressDisplay::~ProgressDisplay() { finish(); }

void ProgressDisplay::clear() {
  if (drawn_) std::fputs("\r\033[K", out_);
  drawn_ = false;
}

void ProgressDisplay::bar(const ProgressView& v, bool force) {
  if (!interactive()) return;
  last_ = v;
  have_view_ = true;
  const auto now = std::chrono::steady_clock::now();
  if (!force && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  // Text first, then clear what is left of an earlier, longer line: no flicker.
  std::fprintf(out_, "\r%s\033[K", render_progress_bar(v, terminal_width(), unicode_).c_str());
  std::fflush(out_);
  drawn_ = true;
  last_draw_ = now;
}

void ProgressDisplay::line(const std::string& text) {
  if (!enabled_) return;
  if (!interactive_) {
    std::fprintf(out_, "%s\n", text.c_str());
    std::fflush(out_);
    return;
  }
  std::fprintf(out_, "\r%s\033[K\n", text.c_str());
  drawn_ = false;
  if (have_view_) bar(last_, true);
  std::fflush(out_);
}

void ProgressDisplay::fields(const std::vector<std::string>& fields) {
  if (!enabled_) return;
  if (fields.empty()) return;
  if (!interactive_) return line(wrap_fields(fields, 0).front());
  std::vector<std::string> lines = wrap_fields(fields, static_cast<size_t>(terminal_width() - 1));
  const bool had_view = have_view_;
  have_view_ = false;  // one redraw, after the last line
  for (const std::string& l : lines) line(l);
  have_view_ = had_view;
  if (have_view_) bar(last_, true);
}

void ProgressDisplay::note(const std::string& text) {
  if (!interactive()) return;
  std::fprintf(out_, "\r%s\033[K", truncate_to_width(text, static_cast<size_t>(terminal_width() - 1)).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void ProgressDisplay::finish() {
  if (!interactive()) return;
  clear();
  have_view_ = false;
  std::fflush(out_);
}

std::vector<std::string> summary_fields(const TrainSummary& s) {
  std::string head = "cmha train: " + std::to_string(s.updates) + " updates in " + format_duration(s.seconds);
  if (s.interrupted) head += " (interrupted)";
  if (s.early_stopped) head += " (early stop: train.patience)";
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.0f %s/s", s.units_per_s, s.unit.c_str());
  std::vector<std::string> f = {head, s.mid_epoch ? "in epoch " + std::to_string(s.epochs + 1)
                                                   : std::to_string(s.epochs) + (s.epochs == 1 ? " epoch" : " epochs"),
                                 rate};
  if (!std::isnan(s.best)) f.push_back("best " + format_metric(s.best_metric, s.best));
  f.push_back(std::to_string(s.skipped_updates) + " skipped");
  if (s.peak_rss_mb > 0) {
    char rss[96];
    if (s.peak_tensor_mb > 0)  // (the rest: the block cache's free blocks, the allocator, code and data)
      std::snprintf(rss, sizeof rss, "peak memory %.0f MB (CPU tensors %.0f MB)", s.peak_rss_mb, s.peak_tensor_mb);
    else
      std::snprintf(rss, sizeof rss, "peak memory %.0f MB", s.peak_rss_mb);
    f.push_back(rss);
  }
  f.push_back("last checkpoint " + s.last_checkpoint);
  return f;
}

}  // namespace cmha::train
