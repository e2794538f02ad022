#pragma once
// The token caches of one split of a parallel corpus (<dir>/<name>.src.bin and
// <name>.tgt.bin, data/token_cache.h), made so that a start or a resume does
// not read the corpus:
//  - a cache stores its corpus file's size, mtime and digest (a hash of its
//    bytes) from when it was built; while the size and mtime are unchanged the
//    stored digest stands for the file and nothing of the corpus is read;
//  - when either changed, the file is hashed again, streamed: the same bytes
//    (a touched or copied file) keep the cache and record the new mtime, other
//    bytes rebuild it;
//  - a build streams the corpus (a pass to count lines and hash, a pass to
//    encode 64 Ki lines at a time), so memory stays bounded at any size;
//  - a file modified within 2 s of its hash records mtime 0 ("hash again next
//    time"): file times are coarser than the writes that could follow a hash.
// Like make and rsync, it trusts size and mtime: a corpus rewritten in place
// with its mtime set back and the same size is not noticed.
#include <cstdint>
#include <functional>
#include <string>

#include "data/sentencepiece_vocab.h"
#include "data/token_cache.h"

namespace cmha::data {

struct ParallelTokenCaches {
  TokenCache src, tgt;
  bool encoded = false;   // a side was (re)encoded by this call
  bool rehashed = false;  // a side's corpus was hashed again (its size or mtime had changed)
};

// The caches of the corpus `source_path` / `target_path` (line-aligned) under
// `vocab`; `recipe_key` stands for everything else that shapes the ids. The
// main rank checks them and rebuilds what is stale; the other ranks wait (up
// to an hour) until both are fresh and never encode. Errors name the file:
// sides with different line counts, a line that is not UTF-8, a corpus that
// changes while it is read, a truncated or corrupt cache.
ParallelTokenCaches load_or_encode_parallel(const std::string& source_path, const std::string& target_path,
                                            const SentencePieceVocab& vocab, uint64_t recipe_key,
                                            const std::string& cache_dir, const std::string& name, bool main);

// Waits (checking every 200 ms, at most an hour) until `ready`: ranks other
// than 0 wait so for what rank 0 writes (renamed into place, so whole when seen).
void wait_for_rank0(const std::function<bool()>& ready, const std::string& what);

}  // namespace cmha::data
