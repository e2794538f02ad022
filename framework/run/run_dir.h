#pragma once
// The run directory (train.save_dir) as one training process's property:
// a fresh run never silently replaces or mixes with an earlier one, two
// processes never write the same directory, and temporaries of killed saves
// do not pile up. `cmha train` claims it on rank 0 before anything is
// written there (the translation task writes spm.model and cache/ early).
#include <string>
#include <vector>

namespace cmha::run {

// An exclusive flock on DIR/.lock, held while the object lives. The kernel
// drops it when the process ends in any way (kill -9 included), so a lock is
// never stale; the file holds the holder's PID for the refusal message.
// A file where the run directory, or a folder above it, belongs: one sentence
// naming it, before anything is written (the lock below checks it too).
void check_save_dir(const std::string& dir);

class RunDirLock {
 public:
  // Creates DIR if needed; another holder is an Error naming DIR and its PID.
  explicit RunDirLock(const std::string& dir);
  ~RunDirLock();
  RunDirLock(RunDirLock&& other) noexcept;
  RunDirLock& operator=(RunDirLock&&) = delete;
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

// The files of an earlier run in DIR that a fresh start would destroy or mix
// with: checkpoint_*.safetensors, metrics.jsonl, results.json (sorted).
std::vector<std::string> previous_run_files(const std::string& dir);

// Deletes what a run writes into DIR (the files above, recipe.yaml, spm.model,
// cache/, the test hypotheses test.*.hyp); anything else is left. Returns
// how many entries it removed.
size_t remove_previous_run(const std::string& dir);

// Removes the `NAME.tmp.PID` files in DIR and DIR/cache whose process PID no
// longer runs (a save killed mid-write); a live process's are never touched.
// Returns the removed paths; *bytes (when given) gets their total size.
std::vector<std::string> remove_stale_temporaries(const std::string& dir, unsigned long long* bytes = nullptr);

enum class RunStart { fresh, resume, overwrite };

// Locks DIR, removes stale temporaries, and for a fresh start refuses a
// directory that holds a run (naming --resume and --overwrite); --overwrite
// deletes the earlier run first. Each thing it does is one line on stderr.
RunDirLock claim_run_directory(const std::string& dir, RunStart start);

// Every update checkpoint (checkpoint_<update>.safetensors) of a run
// directory, oldest first; none when the directory does not exist.
std::vector<std::string> update_checkpoints(const std::string& run_dir);

// The last n update checkpoints (checkpoint_<update>.safetensors) of a run
// directory, oldest first.
std::vector<std::string> last_checkpoints(const std::string& run_dir, int n);

// The checkpoint of the highest update in `dir` (checkpoint_<update>.safetensors), or "".
std::string latest_checkpoint(const std::string& dir);

// A translation run's SentencePiece model lives beside its checkpoints
// (DIR/spm.model). A model made from a checkpoint (compressed, fine-tuned)
// must tokenise with the same pieces, so its directory gets a copy: the
// spm.model beside `checkpoint` is copied into `dir` (atomically) unless
// `dir` has one already. False when there is none beside the checkpoint.
bool copy_spm_model_beside(const std::string& checkpoint, const std::string& dir);

}  // namespace cmha::run
