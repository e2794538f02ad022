#include "run/options.h"

#include <algorithm>
#include <limits>

#include "nn/attention/registry.h"
#include "tensor/error.h"

namespace cmha::run {

namespace {

using T = OptionType;

OptionType option_type(nn::AttentionKeyType t) {
  switch (t) {
    case nn::AttentionKeyType::integer: return T::integer;
    case nn::AttentionKeyType::real: return T::real;
    case nn::AttentionKeyType::boolean: return T::boolean;
    case nn::AttentionKeyType::string: return T::string;
  }
  return T::string;
}

// The attention keys (nn/attention/registry.h) under each place model.<place>;
// a place that inherits has no defaults of its own: its unset keys take the
// inherited place's value.
// A place's keys are read by its model kind and by those of the places that
// inherit it (model.attention: the ViT's, and the transformer's defaults).
void add_attention_keys(std::vector<OptionSpec>& r) {
  std::vector<std::string> all_kinds;
  for (const nn::AttentionPlace& p : nn::attention_places())
    if (std::find(all_kinds.begin(), all_kinds.end(), p.model_kind) == all_kinds.end()) all_kinds.push_back(p.model_kind);
  for (const nn::AttentionPlace& place : nn::attention_places()) {
    const std::string where =
        place.inherits.empty() ? "" : " (" + place.role + "; inherits model." + place.inherits + ")";
    std::vector<std::string> kinds{place.model_kind};
    for (const nn::AttentionPlace& p : nn::attention_places())
      if (p.inherits == place.name && std::find(kinds.begin(), kinds.end(), p.model_kind) == kinds.end())
        kinds.push_back(p.model_kind);
    if (kinds.size() == all_kinds.size()) kinds.clear();
    for (const nn::AttentionKey& k : nn::attention_keys()) {
      OptionSpec s{"model." + place.name + "." + k.name, option_type(k.type),
                   place.inherits.empty() ? k.default_value : "", k.help + where,
                   k.min.value_or(-kUnbounded), k.max.value_or(kUnbounded), k.choices, "", kinds};
      if (!place.inherits.empty()) s.inherit_from = "model." + place.inherits + "." + k.name;
      r.push_back(std::move(s));
    }
    // Per-layer settings belong to one place: they do not inherit, as the places differ in depth.
    r.push_back(OptionSpec{"model." + place.name + ".layers", T::layer_map, "{}",
                           "Per-layer attention settings of this place" +
                               (place.role.empty() ? std::string() : " (" + place.role + ")") +
                               ", by layer index from 0: {0: {key_dim: 128}, 5: {type: concat}}; a layer's unset "
                               "keys take the place's",
                           -kUnbounded, kUnbounded, {}, "", {place.model_kind}});
  }
}

// Adds keys to the registry for one set of readers (empty lists = everyone).
class Keys {
 public:
  Keys(std::vector<OptionSpec>& registry, std::vector<std::string> model_kinds, std::vector<std::string> tasks)
      : registry_(registry), model_kinds_(std::move(model_kinds)), tasks_(std::move(tasks)) {}
  void add(const std::string& path, T type, const std::string& def, const std::string& help,
           double lo = -kUnbounded, double hi = kUnbounded, std::vector<std::string> choices = {}) {
    registry_.push_back(OptionSpec{path, type, def, help, lo, hi, std::move(choices), "", model_kinds_, tasks_});
  }
  // A string key that takes one of `choices`.
  void choice(const std::string& path, const std::string& def, const std::string& help,
              std::vector<std::string> choices) {
    add(path, T::string, def, help, -kUnbounded, kUnbounded, std::move(choices));
  }

 private:
  std::vector<OptionSpec>& registry_;
  std::vector<std::string> model_kinds_, tasks_;
};

std::vector<OptionSpec> build() {
  std::vector<OptionSpec> r;
  // Who reads each key (OptionSpec::model_kinds, tasks): the code of those
  // model kinds and tasks reads it, no other.
  Keys everyone(r, {}, {});
  Keys transformer_models(r, {"transformer"}, {}), vit_models(r, {"vit"}, {});
  Keys translation_tasks(r, {}, {"translation"}), image_tasks(r, {}, {"image_classification"});
  everyone.choice("model.kind", "transformer", "Model family", {"transformer", "vit"});
  everyone.add("model.d_model", T::integer, "512", "Model width", 1, 1 << 20);
  everyone.add("model.ffn_dim", T::integer, "2048", "Hidden width of the feed-forward blocks", 1, 1 << 22);
  everyone.add("model.dropout", T::real, "0.1", "Dropout on embeddings and residual branches", 0, 0.999);
  everyone.add("model.layer_norm_eps", T::real, "1e-5", "Epsilon of every LayerNorm", 0);
  // Transformer (run/model_config.cpp transformer_config; the ViT's feed-forward blocks are always GELU)
  transformer_models.choice("model.activation", "relu", "Feed-forward activation", {"relu", "gelu"});
  transformer_models.add("model.activation_dropout", T::real, "0.0", "Dropout after the feed-forward activation", 0, 0.999);
  transformer_models.add("model.vocab_size", T::integer, "8000", "Shared vocabulary size (source, target and output)", 1, 1 << 24);
  transformer_models.add("model.encoder_layers", T::integer, "6", "Encoder layers", 0, 1024);
  transformer_models.add("model.decoder_layers", T::integer, "6", "Decoder layers", 0, 1024);
  transformer_models.add("model.pre_norm", T::boolean, "false", "Pre-norm residual blocks instead of Vaswani's post-norm");
  transformer_models.add("model.encoder_final_norm", T::boolean, "false", "LayerNorm after the last encoder layer");
  transformer_models.add("model.decoder_final_norm", T::boolean, "false", "LayerNorm after the last decoder layer");
  transformer_models.add("model.share_all_embeddings", T::boolean, "true", "One embedding matrix for source, target and output");
  transformer_models.add("model.scale_embedding", T::boolean, "true", "Multiply embeddings by sqrt(d_model)");
  transformer_models.choice("model.positions", "sinusoidal", "Position embeddings", {"sinusoidal", "learned"});
  transformer_models.add("model.max_positions", T::integer, "1024", "Longest sequence for learned positions", 1, 1 << 20);
  transformer_models.add("model.position_offset", T::integer, "0", "Position of the first token: sinusoidal angles start here and learned tables hold this many rows before it (fairseq checkpoints: padding_idx + 1 = 2)", 0, 1 << 20);
  // Vision transformer (vit_config)
  vit_models.add("model.image_size", T::integer, "224", "Input image side in pixels", 1, 1 << 16);
  vit_models.add("model.patch_size", T::integer, "16", "Patch side in pixels", 1, 1 << 16);
  vit_models.add("model.channels", T::integer, "3", "Image channels", 1, 64);
  vit_models.add("model.num_classes", T::integer, "1000", "Classes of the classification head", 1, 1 << 24);
  vit_models.add("model.depth", T::integer, "12", "Vision transformer blocks", 1, 1024);
  vit_models.add("model.drop_path", T::real, "0.1", "Stochastic depth rate at the last block", 0, 0.999);
  vit_models.add("model.distillation_token", T::boolean, "false", "DeiT distillation token and head");
  add_attention_keys(r);
  // Optimiser and loss
  everyone.choice("optim.name", "adam", "Optimiser", {"adam", "adamw", "sgd"});
  everyone.add("optim.lr", T::real, "5e-4", "Peak learning rate", 0);
  everyone.add("optim.betas", T::real_list, "[0.9, 0.98]", "Adam betas");
  everyone.add("optim.eps", T::real, "1e-9", "Adam epsilon", 0);
  everyone.add("optim.momentum", T::real, "0.9", "SGD momentum", 0, 1);
  everyone.add("optim.nesterov", T::boolean, "false", "SGD with Nesterov momentum");
  everyone.add("optim.weight_decay", T::real, "0.0", "Weight decay (decoupled for adamw)", 0);
  image_tasks.add("optim.lr_scale_batch", T::integer, "0", "Scale optim.lr by the global batch (data.batch_size × train.update_freq × processes) over this, as DeiT's lr × batch/512; 0 = no scaling", 0);  // a translation batch is counted in tokens
  everyone.choice("lr.schedule", "inverse_sqrt", "Learning-rate schedule (peak optim.lr)",
      {"constant", "inverse_sqrt", "noam", "cosine"});
  everyone.add("lr.warmup", T::integer, "4000", "Linear warmup length, in updates (epochs when lr.per_epoch)", 0);
  everyone.add("lr.warmup_epochs", T::real, "0.0", "Warmup length in epochs, converted to updates unless lr.per_epoch; replaces lr.warmup when > 0", 0);
  everyone.add("lr.warmup_init_lr", T::real, "1e-7", "Learning rate at the start of the warmup", 0);
  everyone.add("lr.min_lr", T::real, "0.0", "Cosine: the final learning rate", 0);
  everyone.add("lr.total", T::integer, "0", "Cosine: length in updates (epochs when lr.per_epoch); 0 = the whole run", 0);
  everyone.add("lr.per_epoch", T::boolean, "false", "Constant and cosine: change the rate at epoch boundaries only (timm, DeiT)");
  everyone.add("lr.noam_factor", T::real, "2.0", "Noam: the factor before d_model^-0.5", 0);
  everyone.add("train.label_smoothing", T::real, "0.1", "Label smoothing of the cross-entropy", 0, 0.999);
  everyone.add("train.seed", T::integer, "1", "Seed of every random draw (initialisation, dropout, data order)", 0);
  everyone.add("train.threads", T::integer, "0", "CPU threads; 0 = all cores", 0, 4096);
  everyone.add("train.device", T::string, "cpu", "Device to train on: cpu, cuda (= cuda:0) or cuda:N (checked at start-up)");
  everyone.choice("train.task", "translation", "What to train",
      {"translation", "image_classification"});
  everyone.add("train.save_dir", T::string, "runs/default", "Run directory: checkpoints, metrics.jsonl, the resolved recipe");
  everyone.add("train.init_from", T::string, "''", "Start from this checkpoint's weights (fine-tuning: fresh optimiser, schedule and data order); its model must be this recipe's; '' = random initialisation");
  everyone.add("train.max_updates", T::integer, "0", "Stop after this many updates; 0 = no limit", 0);
  everyone.add("train.max_epochs", T::integer, "1", "Stop after this many epochs; 0 = no limit", 0);
  everyone.add("train.update_freq", T::integer, "1", "Micro-batches accumulated into one update", 1, 1 << 20);
  everyone.add("train.clip_norm", T::real, "0.0", "Clip the gradient's global L2 norm to this; 0 = off", 0);
  everyone.add("train.tf32", T::boolean, "false", "On a GPU, f32 GEMMs round their inputs to TF32 for the tensor cores: faster, ~1e-3 relative error; no effect on the CPU");
  everyone.add("train.bf16", T::boolean, "false", "bf16 autocast: GEMMs read bf16 and write bf16 activations (f32 accumulation); attention scores, softmax/layer-norm/loss sums, the residual stream, weights, gradients and optimizer state stay f32");
  everyone.add("train.ema_decay", T::real, "0.0", "Keep an exponential moving average of the weights; 0 = off", 0, 1);
  everyone.add("train.save_every", T::integer, "0", "Save a checkpoint every N updates (and always at epoch ends); 0 = epoch ends only", 0);
  everyone.add("train.keep_last", T::integer, "3", "Update checkpoints to keep besides the best and the last", 0, 1 << 20);
  everyone.add("train.validate_every", T::integer, "0", "Validate every N updates (and at epoch ends, see validate_epoch_ends); 0 = epoch ends only", 0);
  everyone.add("train.validate_epoch_ends", T::boolean, "true", "Validate at each epoch end too (false with validate_every > 0: only every N updates, which saves a short run's near-duplicate validations)");
  everyone.add("train.best_metric", T::string, "loss", "Validation metric that picks checkpoint_best");
  everyone.choice("train.best_mode", "min", "Whether a smaller or larger best_metric is better", {"min", "max"});
  everyone.add("train.patience", T::integer, "0", "Stop after this many validations without improvement; 0 = never", 0);
  everyone.add("train.max_nonfinite", T::integer, "5", "Stop after this many non-finite updates in a row", 1);
  everyone.add("train.log_every", T::integer, "50", "Write a metrics.jsonl row and a kept progress line every N updates", 1);
  everyone.add("train.head_telemetry", T::boolean, "true", "At each validation, log per attention layer the principal directions holding 90/99 % of the query/key energy and, for collaborative layers, the mixing matrix's column norms and effective rank (metrics.jsonl split 'heads'; cmha plot RUN --heads)");
  everyone.add("train.head_telemetry_every", T::integer, "0", "With train.head_telemetry, also log it every N updates between validations (its cost: a few SVDs of the attention weights, see README); 0 = at validations only", 0);
  everyone.add("train.tensorboard", T::boolean, "false", "Also write every metrics row as TensorBoard scalars (events.out.tfevents.* in the run directory; tensorboard --logdir RUN_DIR)");
  // Data parallelism (distributed/launch.h, train/gradient_buckets.h)
  everyone.choice("train.dist_backend", "auto", "Communicator: auto = single for one process, else nccl on GPUs, and on CPUs mpi under mpirun/srun and gloo under torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); nccl bootstraps over MPI or Gloo's rendezvous the same way", {"auto", "single", "mpi", "gloo", "nccl"});
  everyone.add("train.dist_timeout_s", T::real, "600", "A GPU collective unfinished after this many seconds ends the job, naming the rank (a dead or hung peer)", 1, 1e7);
  everyone.add("train.dist_bucket_mb", T::real, "25", "Gradient bucket size in MB: each full bucket is all-reduced during the backward pass (the first holds 1 MiB, as in PyTorch DDP; a model smaller than 8 buckets gets eighths of itself, at least 1 MiB)", 1e-6, 1 << 20);
  everyone.add("train.dist_overlap", T::boolean, "true", "All-reduce buckets as they fill (false: all after the backward pass)");
  everyone.choice("train.dist_grad_dtype", "f32", "Gradient all-reduce precision: f32, or bf16 (half the bytes; every partial sum rounded to bf16, ~3 significant digits)", {"f32", "bf16"});
  // Honest model selection: checkpoint_best is chosen on the validation split, the test split is scored once.
  Keys selecting_tasks(r, {}, {"translation", "image_classification"});
  selecting_tasks.add("data.valid_is_test", T::boolean, "false", "Accept a validation split that is the test split (the same file): checkpoint_best and the validation scores are then chosen on the data the final score reports; refused unless true");
  // ---- translation data (translation_task) ----
  translation_tasks.add("data.train_prefix", T::string, "work/local_en_de/train", "Training corpus: <prefix>.<source_lang> and <prefix>.<target_lang>, line-aligned UTF-8");
  translation_tasks.add("data.valid_prefix", T::string, "work/local_en_de/dev", "Validation corpus prefix (as data.train_prefix)");
  translation_tasks.add("data.source_lang", T::string, "en", "Source-side file suffix");
  translation_tasks.add("data.target_lang", T::string, "de", "Target-side file suffix");
  translation_tasks.choice("data.spm_model_type", "unigram", "Joint SentencePiece model trained once per run dir (<save_dir>/spm.model; size model.vocab_size)", {"unigram", "bpe"});
  translation_tasks.add("data.spm_sample_sentences", T::integer, "100000", "Sentences (of both sides) sampled to train the SentencePiece model; 0 = all", 0);
  translation_tasks.add("data.max_len", T::integer, "128", "Drop pairs with more tokens than this on either side (eos/bos included)", 1, 1 << 20);
  translation_tasks.add("data.max_tokens", T::integer, "4096", "Tokens per micro-batch: sentences × max(padded source, padded target)", 1, 1 << 24);
  translation_tasks.add("data.shuffle_window", T::integer, "100", "Batches' worth of shuffled pairs sorted by length together; 0 = the whole epoch", 0);
  translation_tasks.add("data.test_prefix", T::string, "\"\"", "Test corpus prefix: after training, the averaged model translates it and BLEU is written to results.json; '' = no final evaluation");
  // Translation evaluation: validation BLEU and the final test evaluation
  translation_tasks.add("eval.valid_bleu", T::boolean, "false", "Translate the validation source at each validation and report sacreBLEU as the metric 'bleu'");
  translation_tasks.add("eval.valid_sentences", T::integer, "500", "Validation sentences translated for 'bleu' (the first N); 0 = all", 0);
  translation_tasks.add("eval.valid_beam", T::integer, "1", "Beam of the validation translations; 1 = greedy", 1, 1024);
  translation_tasks.add("eval.average_last", T::integer, "5", "Final evaluation: average the last N update checkpoints (fewer when fewer exist); 1 = the last alone", 1, 1 << 20);
  translation_tasks.add("eval.beam", T::integer, "4", "Final evaluation: beam size", 1, 1024);
  translation_tasks.add("eval.lenpen", T::real, "0.6", "Final evaluation: length penalty exponent (score = log p / length^lenpen)", -100, 100);
  translation_tasks.add("eval.max_len_a", T::real, "1.0", "Final evaluation: at most a × source length + b output tokens", 0);
  translation_tasks.add("eval.max_len_b", T::integer, "50", "Final evaluation: the b of the maximum output length", 0);
  translation_tasks.add("eval.max_tokens", T::integer, "4096", "Decoding batches: max(source, output) tokens per batch, padding included", 1, 1 << 24);
  translation_tasks.add("eval.max_source_tokens", T::integer, "0", "Longest source line translated, in pieces with the end of sentence: a longer one is cut to it with a warning naming the line (cmha score refuses it); the output is as bounded. 0 = 4 × data.max_len; at most model.max_positions with learned positions", 0, 1 << 20);
  // ---- end translation data ----
  // Image data (IDX files: MNIST, Fashion-MNIST)
  image_tasks.add("data.train_images", T::string, "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", "Training images (IDX, gzip'd or plain)");
  image_tasks.add("data.train_labels", T::string, "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz", "Training labels (IDX)");
  image_tasks.add("data.valid_images", T::string, "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", "Validation images (IDX)");
  image_tasks.add("data.valid_labels", T::string, "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", "Validation labels (IDX)");
  image_tasks.add("data.test_images", T::string, "''", "Test images (IDX), scored once by the final evaluation (results.json); '' = the final evaluation scores the validation split");
  image_tasks.add("data.test_labels", T::string, "''", "Test labels (IDX)");
  image_tasks.add("data.holdout", T::integer, "0", "Training images held out as the validation split (checkpoint_best is chosen on them), drawn by data.holdout_seed; 0 = validate on data.valid_images or data.valid_dir", 0);
  image_tasks.add("data.holdout_seed", T::integer, "0", "Seed of the draw of the held-out training images (the same seed and training files hold out the same images)", 0);
  image_tasks.add("data.batch_size", T::integer, "128", "Samples per micro-batch (images)", 1, 1 << 20);
  image_tasks.add("data.mean", T::real, "0.2860", "Pixel mean subtracted before the model (Fashion-MNIST's)");
  image_tasks.add("data.std", T::real, "0.3530", "Pixel std divided out before the model (Fashion-MNIST's)", 1e-6);
  // Image loader (data/image_loader.h; read by train/image_pipeline.cpp)
  image_tasks.choice("data.format", "idx", "Image data: IDX files (data.train_images, ...), an ImageFolder tree under data.root, or folders of shards that `cmha pack` wrote under data.root", {"idx", "image_folder", "shards"});
  image_tasks.add("data.root", T::string, "''", "ImageFolder root holding <train_dir>/<class>/<image> and <valid_dir>/<class>/<image> (.jpg, .jpeg, .png); for shards, <train_dir> and <valid_dir> are folders of shards");
  image_tasks.add("data.train_dir", T::string, "train", "Training split folder under data.root");
  image_tasks.add("data.valid_dir", T::string, "val", "Validation split folder under data.root (the same class folders as training)");
  image_tasks.add("data.shuffle_buffer", T::integer, "10000", "Shards: samples each rank's shuffle buffer holds (the epoch's shuffle is the shard order × this buffer)", 1, 1 << 24);
  image_tasks.add("data.shard_max_side", T::integer, "0", "Shards: the shorter-side cap they were packed with (cmha pack --max-side; 0 = original images); checked against their shards.json", 0, 1 << 16);
  image_tasks.add("data.test_dir", T::string, "''", "Test split folder under data.root, scored once by the final evaluation; '' = the final evaluation scores the validation split");
  image_tasks.add("data.max_image_pixels", T::integer, "89478485", "Largest image decoded, in pixels (width × height; Pillow's MAX_IMAGE_PIXELS): a larger one is an error naming it", 1, int64_t{1} << 40);
  image_tasks.add("data.channel_mean", T::real_list, "[]", "Per-channel pixel mean (ImageNet: [0.485, 0.456, 0.406]); [] = data.mean for every channel");
  image_tasks.add("data.channel_std", T::real_list, "[]", "Per-channel pixel std (ImageNet: [0.229, 0.224, 0.225]); [] = data.std for every channel");
  image_tasks.add("data.random_resized_crop", T::boolean, "false", "Training: RandomResizedCrop to model.image_size (bicubic; DeiT: true); false = resize the shorter side to model.image_size and centre-crop");
  image_tasks.add("data.train_crop_scale", T::real_list, "[0.08, 1.0]", "RandomResizedCrop: range of the crop's area fraction");
  image_tasks.add("data.train_crop_ratio", T::real_list, "[0.75, 1.3333333333]", "RandomResizedCrop: range of the crop's aspect ratio (width / height)");
  image_tasks.add("data.hflip", T::boolean, "false", "Training: flip images horizontally with probability 0.5 (DeiT: true)");
  image_tasks.add("data.rand_augment", T::string, "''", "Training: timm RandAugment spec, e.g. rand-m9-mstd0.5-inc1 (DeiT); empty = off");
  image_tasks.add("data.mixup", T::real, "0.0", "Mixup Beta(α, α) per batch (DeiT: 0.8); 0 = off", 0);
  image_tasks.add("data.cutmix", T::real, "0.0", "CutMix Beta(α, α) per batch (DeiT: 1.0); 0 = off", 0);
  image_tasks.add("data.mixup_prob", T::real, "1.0", "Probability that a batch is mixed when mixup or CutMix is on", 0, 1);
  image_tasks.add("data.mixup_switch_prob", T::real, "0.5", "Probability of CutMix rather than mixup when both are on", 0, 1);
  image_tasks.add("data.random_erasing", T::real, "0.0", "Training: probability of erasing a random box with per-pixel normal values (DeiT: 0.25)", 0, 1);
  image_tasks.add("data.repeated_aug", T::integer, "1", "Repeated augmentation: copies of each image per epoch across ranks (DeiT: 3); 1 = off", 1, 64);
  image_tasks.add("data.drop_last", T::boolean, "false", "Training: drop each epoch's final partial batch");
  image_tasks.add("data.eval_resize", T::integer, "0", "Evaluation: resize the shorter side to this before the centre crop; 0 = model.image_size / 0.875 for image_folder and shards (256 for 224), model.image_size for idx", 0, 1 << 16);
  image_tasks.add("data.workers", T::integer, "2", "Image decoding and augmentation threads; 0 = in the training thread", 0, 256);
  image_tasks.add("data.prefetch", T::integer, "0", "Batches decoded ahead of the trainer; 0 = 2 × data.workers", 0, 1024);
  image_tasks.add("data.skip_bad_images", T::boolean, "false", "Leave unreadable images out of their batch and count them instead of stopping");
  // Benchmark geometry (cmha bench: the transformer's sentences, the ViT's images)
  everyone.add("bench.batch_size", T::integer, "128", "Sentences (transformer) or images (vit) per benchmark step", 1, 1 << 20);
  transformer_models.add("bench.src_len", T::integer, "32", "Source tokens per sentence in the benchmark", 1, 1 << 20);
  transformer_models.add("bench.tgt_len", T::integer, "33", "Target tokens per sentence in the benchmark", 1, 1 << 20);
  return r;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

const std::vector<OptionSpec>& option_registry() {
  static const std::vector<OptionSpec> registry = build();
  return registry;
}

const OptionSpec* find_option(const std::string& path) {
  for (const auto& s : option_registry())
    if (s.path == path) return &s;
  return nullptr;
}

std::string nearest_option(const std::string& path) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& s : option_registry()) {
    const size_t d = edit_distance(path, s.path);
    if (d < best_d) best_d = d, best = s.path;
  }
  return best;
}

std::string option_applies_to(const OptionSpec& spec) {
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : "/") + s;
    return out;
  };
  std::string out;
  if (!spec.model_kinds.empty()) out = join(spec.model_kinds) + " models";
  if (!spec.tasks.empty()) out += (out.empty() ? "" : ", ") + join(spec.tasks);
  return out;
}

const char* option_type_name(OptionType t) {
  switch (t) {
    case OptionType::integer: return "an integer";
    case OptionType::real: return "a number";
    case OptionType::boolean: return "true or false";
    case OptionType::string: return "a string";
    case OptionType::real_list: return "a list of numbers";
    case OptionType::layer_map: return "a mapping of layer indices to attention keys";
  }
  return "?";
}

}  // namespace cmha::run

namespace cmha::run {

OptionSpec layer_key_option(const std::string& layers_path, int64_t layer, const std::string& key) {
  const std::string at = layers_path + "." + std::to_string(layer);
  const nn::AttentionKey* k = nn::find_attention_key(key);
  if (!k) {
    std::string best;
    size_t best_d = std::numeric_limits<size_t>::max();
    for (const nn::AttentionKey& a : nn::attention_keys())
      if (const size_t d = edit_distance(key, a.name); d < best_d) best_d = d, best = a.name;
    throw Error(at + ": unknown attention key '" + key + "'; did you mean '" + best + "'?");
  }
  return OptionSpec{at + "." + k->name, option_type(k->type), k->default_value, k->help,
                    k->min.value_or(-kUnbounded), k->max.value_or(kUnbounded), k->choices, "", {}, {}};
}

}  // namespace cmha::run
