#include "run/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <system_error>

#include "tensor/error.h"
#include "tensor/atomic_file.h"

namespace cmha::run {

namespace fs = std::filesystem;

namespace {

std::string lock_path(const std::string& dir) { return (fs::path(dir) / ".lock").string(); }

// The holder's PID as it wrote it, or "unknown" (it may not have written it yet).
std::string holder_of(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos ? "unknown" : pid;
}

// kill(pid, 0) fails with ESRCH only when no such process exists; EPERM means another user's live one.
bool process_runs(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH; }

bool is_run_output(const std::string& name) {
  static const std::regex checkpoint(R"(checkpoint_.*\.safetensors)");
  return std::regex_match(name, checkpoint) || name == "metrics.jsonl" || name == "results.json";
}

}  // namespace

void check_save_dir(const std::string& dir) {
  std::error_code ec;
  for (fs::path p(dir); !p.empty(); p = p.parent_path()) {
    if (fs::exists(p, ec)) {
      CMHA_CHECK(fs::is_directory(p, ec), p == fs::path(dir)
                                              ? "train.save_dir '" + dir + "' is a file, not a directory"
                                              : "train.save_dir '" + dir + "': '" + p.string() + "' is a file, not a directory");
      return;
    }
    if (p == p.parent_path()) return;
  }
}

RunDirLock::RunDirLock(const std::string& dir) {
  check_save_dir(dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  CMHA_CHECK(!ec, "train.save_dir: cannot create the run directory '" + dir + "': " + ec.message());
  const std::string path = lock_path(dir);
  // O_CLOEXEC: a child the run starts (a plot script) must not inherit the lock.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  CMHA_CHECK(fd_ >= 0, "cannot open the lock file '" + path + "' of the run directory: " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = holder_of(fd_);
    ::close(fd_);
    fd_ = -1;
    CMHA_CHECK(err != EWOULDBLOCK, "run directory '" + dir + "' is in use by another process (PID " + holder +
                                       " holds " + path + "): wait for it to end, or give this run another train.save_dir");
    throw Error("cannot lock the run directory '" + dir + "' (" + path + "): " + std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock holds regardless; only the PID in a refusal message would read "unknown".
  }
}

RunDirLock::RunDirLock(RunDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

// The file stays: unlinking it would let a process that opened the old file and one that creates a new one both lock.
RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> previous_run_files(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (is_run_output(e.path().filename().string())) found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  return found;
}

size_t remove_previous_run(const std::string& dir) {
  static const std::regex hypotheses(R"(test\..*\.hyp)");
  std::vector<fs::path> doomed;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_run_output(name) || name == "recipe.yaml" || name == "spm.model" || name == "cache" ||
        std::regex_match(name, hypotheses))
      doomed.push_back(e.path());
  }
  for (const fs::path& p : doomed) {
    fs::remove_all(p, ec);
    CMHA_CHECK(!ec, "--overwrite: cannot remove '" + p.string() + "': " + ec.message());
  }
  return doomed.size();
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir, unsigned long long* bytes) {
  // NAME.tmp.PID: how every file is replaced (tensor/atomic_file.h).
  std::vector<std::string> removed;
  if (bytes) *bytes = 0;
  for (const fs::path& d : {fs::path(dir), fs::path(dir) / "cache"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const long pid = temporary_owner_pid(e.path().filename().string());
      if (pid <= 0 || !e.is_regular_file(ec) || process_runs(pid)) continue;
      const unsigned long long size = e.file_size(ec);
      if (fs::remove(e.path(), ec)) {
        removed.push_back(e.path().string());
        if (bytes) *bytes += size;
      }
    }
  }
  return removed;
}

RunDirLock claim_run_directory(const std::string& dir, RunStart start) {
  RunDirLock lock(dir);  // first: nothing below may race another process on DIR
  unsigned long long bytes = 0;
  const std::vector<std::string> stale = remove_stale_temporaries(dir, &bytes);
  if (!stale.empty())
    std::fprintf(stderr, "cmha train: removed %zu stale temporar%s (%.1f MB) of saves killed mid-write in %s\n",
                 stale.size(), stale.size() == 1 ? "y" : "ies", static_cast<double>(bytes) / 1e6, dir.c_str());
  if (start == RunStart::resume) return lock;
  const std::vector<std::string> earlier = previous_run_files(dir);
  if (earlier.empty()) return lock;
  if (start == RunStart::fresh) {
    std::string names;
    for (size_t i = 0; i < earlier.size() && i < 3; ++i) names += (i ? ", " : "") + earlier[i];
    if (earlier.size() > 3) names += " and " + std::to_string(earlier.size() - 3) + " more";
    throw Error("run directory '" + dir + "' already holds a run (" + names +
                "): continue it with --resume, or start afresh with --overwrite, which deletes that run's files");
  }
  const size_t n = remove_previous_run(dir);
  std::fprintf(stderr, "cmha train: --overwrite: removed %zu files and folders of the earlier run in %s\n", n, dir.c_str());
  return lock;
}

std::vector<std::string> update_checkpoints(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::vector<std::pair<int64_t, std::string>> found;
  if (fs::is_directory(run_dir)) {
    static const std::regex pattern(R"(checkpoint_(\d+)\.safetensors)");
    for (const auto& e : fs::directory_iterator(run_dir)) {
      std::smatch m;
      const std::string name = e.path().filename().string();
      int64_t update = 0;
      // A number past int64 (checkpoint_99999999999999999999) is no checkpoint of ours: skipped, not thrown.
      if (std::regex_match(name, m, pattern) &&
          std::from_chars(&*m[1].first, &*m[1].first + m[1].length(), update).ec == std::errc())
        found.emplace_back(update, e.path().string());
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::vector<std::string> last_checkpoints(const std::string& run_dir, int n) {
  CMHA_CHECK(std::filesystem::is_directory(run_dir), "average: run directory '" + run_dir + "' does not exist");
  std::vector<std::string> all = update_checkpoints(run_dir);
  CMHA_CHECK(static_cast<int>(all.size()) >= n, "average: '" + run_dir + "' holds " + std::to_string(all.size()) +
                                                    " update checkpoints, fewer than the " + std::to_string(n) +
                                                    " asked for");
  return {all.end() - n, all.end()};
}

std::string latest_checkpoint(const std::string& dir) {
  const std::vector<std::string> all = update_checkpoints(dir);
  return all.empty() ? std::string() : all.back();
}

bool copy_spm_model_beside(const std::string& checkpoint, const std::string& dir) {
  const fs::path from = fs::path(checkpoint).parent_path() / "spm.model";
  if (!fs::is_regular_file(from)) return false;
  const fs::path to_dir = dir.empty() ? fs::path(".") : fs::path(dir);
  const fs::path to = to_dir / "spm.model";
  std::error_code ec;
  if (fs::equivalent(from, to, ec)) return true;
  const auto read = [&](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CMHA_CHECK(in.good() || in.eof(), "cannot read the SentencePiece model '" + p.string() + "'");
    return bytes;
  };
  const std::string bytes = read(from);
  if (fs::exists(to)) {
    CMHA_CHECK(read(to) == bytes, "'" + to.string() + "' is another SentencePiece model than the one beside '" +
                                      checkpoint + "' ('" + from.string() + "'): a model made from that checkpoint "
                                      "needs its pieces; write it to another directory");
    return true;
  }
  fs::create_directories(to_dir);
  write_file_atomically(to.string(), bytes);
  return true;
}

}  // namespace cmha::run
