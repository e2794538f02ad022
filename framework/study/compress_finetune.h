#pragma once
// Compression in the loop: `cmha compress CKPT --key-dim D1,D2,... --finetune U
// -o DIR`, the paper's post-hoc workflow (Cordonnier et al. 2020, Tables 4 and 5)
// as one resumable command. For each D̃k, in DIR/key_dim-D/:
//   compressed.safetensors   every concat layer of the chosen places by CP-ALS (compress/convert_attention.h)
//   results.json             its score before fine-tuning (ModelKind::score_checkpoint, task_factory.h)
//   finetune/                U updates of the checkpoint's own recipe (and the overrides) from it
//                            (train/training_run.h), with its final evaluation in finetune/results.json
// and once, DIR/original/results.json: the uncompressed model's score. Then
// DIR/compress.csv (a row per score, as sweep.csv) and DIR/compress.md (a row
// per D̃k: the metric compressed, fine-tuned, and the difference).
// A rerun skips what is done and resumes an unfinished fine-tune from its
// latest checkpoint; DIR/compress.json records what DIR compresses (the
// checkpoint, the places, the CP-ALS settings), and a rerun with others is
// refused rather than mixed in.
#include <functional>
#include <string>
#include <vector>

#include "compress/convert_attention.h"

namespace cmha::study {

struct CompressFinetuneOptions {
  std::string checkpoint;               // the model with concat attention
  std::vector<int64_t> key_dims;        // one point per D̃k, every compressed layer to it
  compress::CompressOptions compress;   // the places and CP-ALS settings (shared_dim and layers: unused)
  int64_t finetune_updates = 0;         // train.max_updates of each fine-tune
  std::vector<std::string> overrides;   // key.path=value on the checkpoint's recipe, for the fine-tunes
  std::string out_dir;
  std::string metric;                   // the results key the table leads with; "" = the model kind's (bleu, top1)
  long long threads = 0;                // of everything; 0: all cores for CP-ALS and scoring, train.threads for training
  std::function<bool()> stop_requested = [] { return false; };  // polled once per update and between steps (Ctrl-C)
};

struct CompressFinetuneOutcome {
  bool interrupted = false;             // a fine-tune was stopped: nothing tabulated
  std::string metric;                   // the metric the table leads with
  std::string csv_path, md_path;
  std::string table;                    // compress.md's text
};

// "256,128,64": the D̃k of each point, in the order given; an empty list, or an
// item that is empty, zero, negative, not a whole number or repeated, is an
// error naming it.
std::vector<int64_t> parse_key_dim_list(const std::string& text);

// Checks everything it can before the first CP-ALS (the checkpoint, the key
// widths against the model's, DIR, the overrides), then runs each point as
// above, then writes the tables.
CompressFinetuneOutcome run_compress_finetune(const CompressFinetuneOptions& options);

}  // namespace cmha::study
