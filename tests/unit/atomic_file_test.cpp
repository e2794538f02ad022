// One atomic write for every file cmha replaces (tensor/atomic_file.h): a
// writer killed between its last write and the rename leaves the old file
// whole and a temporary that names its dead writer, which the next run start
// removes; a failure names the file and the OS's reason and leaves the old
// file as it was.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <functional>
#include <string>

#include "run/run_dir.h"
#include "support/check.h"
#include "support/files.h"
#include "tensor/atomic_file.h"
#include "tensor/error.h"
#include "tensor/safetensors.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::fresh_dir;

void kill_self() { ::raise(SIGKILL); }

// Runs `write` in a child that SIGKILLs itself between the write and the rename; its PID.
pid_t killed_between_write_and_rename(const std::function<void()>& write) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    AtomicFile::before_rename_for_tests = &kill_self;
    try {
      write();
    } catch (...) {
    }
    ::_exit(3);  // the hook never ran: the test sees exit 3, not SIGKILL
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  return pid;
}

TEST(AtomicFile, AWriterKilledBeforeTheRenameLeavesTheOldFileWhole) {
  const std::string dir = fresh_dir("atomic_kill"), path = dir + "/results.json";
  test::write_file(path, "{\"bleu\": 20.79}\n");
  const pid_t pid = killed_between_write_and_rename([&] { write_file_atomically(path, std::string(1 << 20, 'n')); });
  EXPECT_EQ(test::read_file(path), "{\"bleu\": 20.79}\n");
  // The new bytes reached the disk in the temporary, which names the dead writer.
  const std::string temporary = path + ".tmp." + std::to_string(pid);
  ASSERT_TRUE(fs::exists(temporary));
  EXPECT_EQ(fs::file_size(temporary), size_t{1} << 20);
  EXPECT_EQ(temporary_owner_pid(fs::path(temporary).filename().string()), pid);
  // The next run start removes it (its writer is dead) and nothing else.
  const std::vector<std::string> removed = run::remove_stale_temporaries(dir);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], temporary);
  EXPECT_TRUE(fs::exists(path));
}

TEST(AtomicFile, ACheckpointKilledBeforeTheRenameLeavesTheOldCheckpoint) {
  const std::string dir = fresh_dir("atomic_checkpoint"), path = dir + "/checkpoint_3.safetensors";
  save_safetensors(path, {{"w", Tensor::full({4}, 1.0f)}});
  const std::string before = test::read_file(path);
  killed_between_write_and_rename([&] { save_safetensors(path, {{"w", Tensor::full({4}, 2.0f)}}); });
  EXPECT_EQ(test::read_file(path), before);
  EXPECT_EQ(load_safetensors(path).tensors.at("w").to_float_vector(), std::vector<float>(4, 1.0f));
}

TEST(AtomicFile, ACommittedFileReplacesTheOldOneAndLeavesNoTemporary) {
  const std::string dir = fresh_dir("atomic_commit"), path = dir + "/metrics.jsonl";
  test::write_file(path, "old\n");
  {
    AtomicFile f(path);
    f.write("line 1\n");
    f.write(std::string(3 << 20, 'x'));  // past the buffer: written straight through
    f.write("\nline 3\n");
    EXPECT_EQ(test::read_file(path), "old\n");  // nothing visible before the commit
    f.commit();
  }
  EXPECT_EQ(test::read_file(path), "line 1\n" + std::string(3 << 20, 'x') + "\nline 3\n");
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(AtomicFile, AWriterLeftUncommittedRemovesItsTemporary) {
  const std::string dir = fresh_dir("atomic_abandon"), path = dir + "/spm.model";
  test::write_file(path, "old");
  {
    AtomicFile f(path);
    f.write("half of a new model");
  }  // an exception unwinding through the writer
  EXPECT_EQ(test::read_file(path), "old");
  EXPECT_FALSE(fs::exists(atomic_temporary_path(path)));
}

TEST(AtomicFile, ErrorsNameTheFileAndTheOsReason) {
  const std::string dir = fresh_dir("atomic_errors");
  // A folder that does not exist.
  const std::string missing = test::error_of([&] { write_file_atomically(dir + "/no/such/folder/results.json", "{}"); });
  EXPECT_NE(missing.find("cannot write '" + dir + "/no/such/folder/results.json'"), std::string::npos) << missing;
  EXPECT_NE(missing.find("No such file or directory"), std::string::npos) << missing;
  // A directory where the file belongs: the rename fails, the directory stays.
  fs::create_directories(dir + "/results.json");
  const std::string is_dir = test::error_of([&] { write_file_atomically(dir + "/results.json", "{}"); });
  EXPECT_NE(is_dir.find("cannot write '" + dir + "/results.json'"), std::string::npos) << is_dir;
  EXPECT_NE(is_dir.find("Is a directory"), std::string::npos) << is_dir;
  EXPECT_TRUE(fs::is_directory(dir + "/results.json"));
  EXPECT_FALSE(fs::exists(atomic_temporary_path(dir + "/results.json")));
  // A folder that may not be written (root may write anywhere: only as another user).
  if (::geteuid() != 0) {
    fs::create_directories(dir + "/read_only");
    ::chmod((dir + "/read_only").c_str(), 0555);
    const std::string denied = test::error_of([&] { write_file_atomically(dir + "/read_only/x", "{}"); });
    EXPECT_NE(denied.find("Permission denied"), std::string::npos) << denied;
  }
}

TEST(AtomicFile, TemporaryNamesAreRecognised) {
  EXPECT_EQ(temporary_owner_pid("checkpoint_3.safetensors.tmp.4242"), 4242);
  EXPECT_EQ(temporary_owner_pid("train.src.tmp.7"), 7);
  EXPECT_EQ(temporary_owner_pid("checkpoint_3.safetensors"), 0);
  EXPECT_EQ(temporary_owner_pid("notes.tmp.txt"), 0);
  EXPECT_EQ(temporary_owner_pid(".tmp.12"), 0);  // no name before it
  EXPECT_EQ(fs::path(atomic_temporary_path("/a/b/c.json")).filename().string(),
            "c.json.tmp." + std::to_string(::getpid()));
}

}  // namespace
