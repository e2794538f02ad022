#include "train/trainer.h"

#include "train/device.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/matmul.h"
#include "backend/profile.h"
#include "nn/attention/registry.h"
#include "optim/clip.h"
#include "optim/ema.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tensor/storage.h"
#include "train/average.h"
#include "train/checkpoint.h"
#include "train/gradient_buckets.h"
#include "train/metrics_log.h"
#include "train/model_config.h"
#include "train/progress.h"
#include "train/tensorboard.h"

namespace cmha::train {

namespace fs = std::filesystem;

namespace {

// Biases, norms, position embeddings and class tokens are not decayed (DeiT, BERT).
bool decays(const std::string& name) {
  static const std::regex no_decay(R"((^|\.)bias$|norm|pos_embed|positions|cls_token|dist_token)");
  return !std::regex_search(name, no_decay);
}

std::string checkpoint_name(int64_t update) { return "checkpoint_" + std::to_string(update) + ".safetensors"; }

// Keys that define the architecture: a resumed or fine-tuned run must agree on them.
std::string architecture_of(const Recipe& recipe) {
  YAML::Node model = YAML::Load(recipe.dump())["model"];
  model.remove("dropout");
  model.remove("activation_dropout");
  model.remove("drop_path");
  // Initialisation-only keys: the weights replace whatever they drew.
  const YAML::Node& places = model;  // const: looking a place up must not add it
  for (const nn::AttentionPlace& place : nn::attention_places())
    if (YAML::Node group = places[place.name])
      for (const nn::AttentionKey& key : nn::attention_keys())
        if (key.init_only) group.remove(key.name);
  return YAML::Dump(model);
}

}  // namespace

std::string latest_checkpoint(const std::string& dir) {
  const std::vector<std::string> all = update_checkpoints(dir);
  return all.empty() ? std::string() : all.back();
}

struct Trainer::Impl {
  const Recipe& recipe;
  Task& task;
  dist::Communicator& comm;
  TrainerHooks hooks;
  std::string dir;
  std::vector<std::pair<std::string, Tensor>> params;  // named, unique
  std::vector<std::string> param_names;  // params' names, in order
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::ExponentialMovingAverage> ema;
  std::unique_ptr<optim::LrSchedule> schedule;
  std::shared_ptr<Generator> dropout_gen;
  std::unique_ptr<GradientBuckets> buckets;  // the gradient exchange (world 1: scaling only)
  MetricsLog metrics;       // rank 0
  std::unique_ptr<TensorBoardWriter> tensorboard;  // train.tensorboard (rank 0)
  ProgressDisplay display;  // rank 0 draws; a bar on a terminal only
  int64_t resumed_metrics_rows = -1;  // the checkpoint's "metrics_rows" (-1: an older checkpoint without it)
  // trainer state (saved in checkpoints)
  int64_t update = 0, epoch = 0, nonfinite_in_row = 0, skipped = 0, stale_validations = 0;
  double best = NAN;
  int64_t saved_update = -1;  // the update of the last checkpoint_<update> written
  // options
  int64_t max_updates, max_epochs, update_freq, save_every, keep_last, validate_every, log_every, patience, max_nonfinite;
  double clip_norm;
  std::string best_metric;
  bool maximize, bf16, validate_epoch_ends;

  Impl(const Recipe& r, Task& t, dist::Communicator& c, TrainerHooks h)
      : recipe(r), task(t), comm(c), hooks(std::move(h)), display(c.is_main(), stderr_is_interactive()) {
    dir = r.string("train.save_dir");
    max_updates = r.integer("train.max_updates");
    max_epochs = r.integer("train.max_epochs");
    CMHA_CHECK(max_updates > 0 || max_epochs > 0, "train.max_updates and train.max_epochs are both 0: the run would never end");
    update_freq = r.integer("train.update_freq");
    save_every = r.integer("train.save_every");
    keep_last = r.integer("train.keep_last");
    validate_every = r.integer("train.validate_every");
    validate_epoch_ends = r.boolean("train.validate_epoch_ends");
    CMHA_CHECK(validate_epoch_ends || validate_every > 0,
               "train.validate_epoch_ends is false and train.validate_every is 0: the run would never validate");
    log_every = r.integer("train.log_every");
    patience = r.integer("train.patience");
    max_nonfinite = r.integer("train.max_nonfinite");
    clip_norm = r.real("train.clip_norm");
    best_metric = r.string("train.best_metric");
    maximize = r.string("train.best_mode") == "max";
    bf16 = r.boolean("train.bf16");
    backend::set_f32_matmul_tf32(r.boolean("train.tf32"));

    for (auto& [name, p] : task.model().named_parameters()) {
      p.set_name(name);
      params.emplace_back(name, p);
      param_names.push_back(name);
    }
    std::vector<optim::OptimParam> op;
    for (auto& [name, p] : params) op.push_back({p, decays(name)});
    optimizer = optim::make_optimizer(optimizer_options(r), std::move(op));
    if (r.real("train.ema_decay") > 0) {
      std::vector<Tensor> ps;
      for (auto& [n, p] : params) ps.push_back(p);
      ema = std::make_unique<optim::ExponentialMovingAverage>(ps, r.real("train.ema_decay"));
    }
    schedule = make_schedule(r, task.batches_per_epoch() / update_freq, comm.size());
    dropout_gen = std::make_shared<Generator>(static_cast<uint64_t>(r.integer("train.seed")) * 7919 + 17 + comm.rank());
    task.model().set_generator(dropout_gen);
    BucketOptions bo;
    bo.bucket_bytes = static_cast<int64_t>(r.real("train.dist_bucket_mb") * (1 << 20));
    bo.overlap = r.boolean("train.dist_overlap");
    bo.bf16 = r.string("train.dist_grad_dtype") == "bf16";
    std::vector<Tensor> ps;
    for (auto& [n, p] : params) ps.push_back(p);
    buckets = std::make_unique<GradientBuckets>(ps, comm, bo);
  }

  bool improved(double v) const { return std::isnan(best) || (maximize ? v > best : v < best); }

  Checkpoint snapshot() const {
    Checkpoint c;
    c.recipe = recipe.dump();
    for (auto& [name, p] : params) c.weights[name] = p;
    optim::OptimizerState st = optimizer->state_dict(param_names);
    c.optimizer = std::move(st.tensors);
    nlohmann::json steps = nlohmann::json::object();
    for (const auto& [name, n] : st.steps) steps[name] = n;
    if (ema)
      for (size_t i = 0; i < params.size(); ++i) c.ema[params[i].first] = ema->shadow()[i];
    c.trainer = {{"update", update},         {"epoch", epoch},
                 {"skipped_updates", skipped}, {"nonfinite_in_row", nonfinite_in_row},
                 {"stale_validations", stale_validations},
                 {"best", std::isnan(best) ? nlohmann::json() : nlohmann::json(best)},
                 {"best_metric", best_metric}, {"optimizer_steps", steps},
                 {"dropout_rng", {dropout_gen->seed(), dropout_gen->offset()}},
                 {"data", task.data_state()}, {"world_size", comm.size()}, {"metrics_rows", metrics.rows()}};
    if (!buckets->agreed_order().empty()) c.trainer["bucket_order"] = buckets->agreed_order();
    return c;
  }

  // This rank's dropout RNG and data position; rank 0's are also the top-level "dropout_rng" and "data".
  nlohmann::json rank_state() const {
    return {{"dropout_rng", {dropout_gen->seed(), dropout_gen->offset()}}, {"data", task.data_state()}};
  }

  // What a stopped run leaves to resume from, as the end of a sentence.
  std::string saved_state() const {
    if (saved_update < 0) return "no checkpoint has been saved yet (nothing to resume from)";
    return "the newest checkpoint, '" + (fs::path(dir) / checkpoint_name(saved_update)).string() + "' (update " +
           std::to_string(saved_update) + "), holds finite weights";
  }

  // Collective: every rank's state is gathered into rank 0's file, so every rank calls it.
  // Non-finite weights are never written (a diverged run's checkpoint would pass for progress);
  // every rank holds the same weights, so every rank throws.
  void save(const std::string& name) {
    std::vector<Tensor> weights;
    for (auto& [n, p] : params) weights.push_back(p);
    if (ema) weights.insert(weights.end(), ema->shadow().begin(), ema->shadow().end());
    CMHA_CHECK(optim::values_finite(weights),
               "update " + std::to_string(update) + " left non-finite weights (the run diverged: a lower optim.lr?), "
               "so '" + name + "' was not saved; " + saved_state());
    const std::vector<std::string> states = comm.all_gather_bytes(rank_state().dump());
    if (name != "checkpoint_best.safetensors") saved_update = update;
    if (!comm.is_main()) return;
    Checkpoint c = snapshot();
    c.trainer["ranks"] = nlohmann::json::array();
    for (const std::string& st : states) c.trainer["ranks"].push_back(nlohmann::json::parse(st));
    save_checkpoint((fs::path(dir) / name).string(), c);
  }

  void prune() {
    if (!comm.is_main() || keep_last <= 0) return;
    const std::vector<std::string> found = update_checkpoints(dir);  // oldest first
    for (size_t i = 0; i + static_cast<size_t>(keep_last) < found.size(); ++i) fs::remove(found[i]);
  }

  // A trainer state with a missing or mistyped field (an edited or foreign file) is the file's fault: exit 2.
  void resume_from(const std::string& path) try {
    Checkpoint c = load_checkpoint(path);
    CMHA_CHECK(architecture_of(Recipe::parse_stored(c.recipe, path + " (recipe)")) == architecture_of(recipe),
               "checkpoint '" + path + "' was trained with a different model architecture than this recipe "
               "(compare its recipe with 'cmha info " + path + "')");
    std::map<std::string, Tensor> named(params.begin(), params.end());
    restore_weights(path, c.weights, named);
    const auto& t = c.trainer;
    optim::OptimizerState st;
    st.tensors = c.optimizer;
    if (t.contains("optimizer_steps"))
      for (const auto& [name, n] : t.at("optimizer_steps").items()) st.steps[name] = n.get<int64_t>();
    optimizer->load_state_dict(st, param_names, "checkpoint '" + path + "'");
    if (ema) {
      CMHA_CHECK(!c.ema.empty(), "checkpoint '" + path + "' has no EMA weights but train.ema_decay is set");
      for (size_t i = 0; i < params.size(); ++i) {
        auto e = c.ema.find(params[i].first);
        CMHA_CHECK(e != c.ema.end() && e->second.shape() == params[i].second.shape(),
                   "checkpoint '" + path + "' has no EMA weights of the shape of '" + params[i].first + "'");
        ema->shadow()[i].copy_(e->second);
      }
    }
    update = t.at("update").get<int64_t>();
    epoch = t.at("epoch").get<int64_t>();
    skipped = t.at("skipped_updates").get<int64_t>();
    nonfinite_in_row = t.at("nonfinite_in_row").get<int64_t>();
    stale_validations = t.at("stale_validations").get<int64_t>();
    best = t.at("best").is_null() ? NAN : t.at("best").get<double>();
    resumed_metrics_rows = t.value("metrics_rows", int64_t{-1});
    saved_update = update;
    // Same world size: each rank continues its own RNG and data position (bit-identical).
    // Another world size: ranks the checkpoint had continue theirs, new ranks keep their seeded
    // generator, and every task re-shards its data order from the same global position.
    const size_t r = static_cast<size_t>(comm.rank());
    const int64_t saved_world = t.value("world_size", int64_t{1});
    if (saved_world != comm.size() && comm.is_main())
      std::fprintf(stderr, "the checkpoint was written by %lld ranks, this run has %d: it continues from the same "
                   "update and epoch position with the data re-dealt to %d ranks (not bit-identical)\n",
                   static_cast<long long>(saved_world), comm.size(), comm.size());
    const bool has_ranks = t.contains("ranks") && t.at("ranks").size() > r;
    if (has_ranks || r == 0) {
      const auto rng = has_ranks ? t.at("ranks").at(r).at("dropout_rng") : t.at("dropout_rng");
      dropout_gen->set_state(rng.at(0).get<uint64_t>(), rng.at(1).get<uint64_t>());
    }
    task.restore_data_state(has_ranks ? t.at("ranks").at(r).at("data") : t.at("data"));
    // The same buckets as before the checkpoint (reductions of more than two ranks depend on them).
    if (saved_world == comm.size() && comm.size() > 1 && t.contains("bucket_order"))
      buckets->use_order(t.at("bucket_order").get<std::vector<int64_t>>());
  } catch (const nlohmann::json::exception& e) {
    throw Error("checkpoint '" + path + "': the trainer state is incomplete or corrupt (" + e.what() + ")");
  }

  // Rank 0's parameters on every rank (they start equal from the seed; this makes it a guarantee).
  void broadcast_parameters() {
    std::vector<Tensor> tensors;
    for (auto& [name, p] : params) tensors.push_back(p);
    broadcast_from_rank0(comm, tensors);
  }

  // train.init_from: the weights only; optimiser, schedule and data start afresh.
  void init_from(const std::string& path) {
    CMHA_CHECK(!fs::is_directory(path), "train.init_from: '" + path + "' is a directory, not a checkpoint file");
    CMHA_CHECK(fs::exists(path), "train.init_from: checkpoint '" + path + "' does not exist");
    const Checkpoint c = load_checkpoint(path);
    CMHA_CHECK(architecture_of(Recipe::parse_stored(c.recipe, path + " (recipe)")) == architecture_of(recipe),
               "train.init_from: checkpoint '" + path + "' holds a different model architecture than this recipe "
               "(compare its recipe with 'cmha info " + path + "')");
    restore_weights(path, c.weights, std::map<std::string, Tensor>(params.begin(), params.end()));
    for (size_t i = 0; ema && i < params.size(); ++i) ema->shadow()[i].copy_(params[i].second);
  }

  void log_row(const nlohmann::json& row) {
    if (!comm.is_main()) return;
    metrics.append(row);
    if (tensorboard) tensorboard->write(row.value("update", int64_t{0}), scalars_of_row(row));
  }

  // `epoch_number`: the 1-based epoch the current update belongs to (at an epoch's end, that epoch).
  std::map<std::string, double> validate(int64_t epoch_number) {
    backend::ProfilePhase phase("validate");
    display.note("validating at update " + std::to_string(update) + " ...");
    auto m = task.validate();
    // The mean over ranks: every rank then takes the same best/early-stopping decisions.
    std::vector<double> values;
    for (auto& [k, v] : m) values.push_back(v);
    comm.all_reduce(values.data(), values.size(), dist::ReduceOp::average);
    size_t j = 0;
    for (auto& [k, v] : m) v = values[j++];
    nlohmann::json row = {{"split", "valid"}, {"update", update}, {"epoch", epoch_number}};
    for (auto& [k, v] : m) row[k] = v;
    log_row(row);
    std::vector<std::string> fields = {"valid", "epoch " + std::to_string(epoch_number), "update " + std::to_string(update)};
    for (auto& [k, v] : m) fields.push_back(format_metric(k, v));
    display.fields(fields);
    if (!m.count(best_metric)) {
      std::string names;
      for (auto& [k, v] : m) names += (names.empty() ? "" : ", ") + k;
      throw Error("train.best_metric '" + best_metric + "' is not a validation metric of this task (it has " + names +
                  (best_metric == "accuracy" ? "; accuracy is now named top1" : "") + ")");
    }
    const double v = m.at(best_metric);
    if (improved(v)) {
      best = v;
      stale_validations = 0;
      save("checkpoint_best.safetensors");
    } else {
      ++stale_validations;
    }
    return m;
  }
};

Trainer::Trainer(const Recipe& recipe, Task& task, dist::Communicator& comm, TrainerHooks hooks)
    : impl_(std::make_unique<Impl>(recipe, task, comm, std::move(hooks))) {}
Trainer::~Trainer() = default;

TrainSummary Trainer::run() {
  Impl& s = *impl_;
  TrainSummary summary;
  if (s.comm.is_main()) {
    fs::create_directories(s.dir);
    std::ofstream(fs::path(s.dir) / "recipe.yaml") << s.recipe.dump();
  }
  // Rank 0 picks the checkpoint (the run directory must be shared by all ranks).
  const std::string resume_path = s.comm.all_gather_bytes(s.hooks.resume ? latest_checkpoint(s.dir) : "").at(0);
  if (!resume_path.empty()) {
    s.resume_from(resume_path);
    s.display.line("resumed from " + resume_path + " at update " + std::to_string(s.update));
  } else {
    if (!s.recipe.string("train.init_from").empty()) s.init_from(s.recipe.string("train.init_from"));
    s.task.start_epoch(s.epoch);
  }
  s.broadcast_parameters();
  if (s.comm.is_main()) {
    const std::string path = (fs::path(s.dir) / "metrics.jsonl").string();
    // A resumed run redoes the updates after its checkpoint: their rows go (a resume
    // without a checkpoint starts from update 0, so every row goes).
    if (s.hooks.resume) s.metrics.open_resumed(path, resume_path.empty() ? 0 : s.resumed_metrics_rows, s.update);
    else s.metrics.open(path);
    if (s.recipe.boolean("train.tensorboard")) s.tensorboard = std::make_unique<TensorBoardWriter>(s.dir);
  }
  if (s.comm.size() > 1) {
    char line[256];
    std::snprintf(line, sizeof line, "data parallel: %d ranks (%s), %s gradients in %lld buckets of %g MB, %s",
                  s.comm.size(), s.comm.backend(), s.recipe.string("train.dist_grad_dtype").c_str(),
                  (long long)s.buckets->buckets(), s.recipe.real("train.dist_bucket_mb"),
                  s.recipe.boolean("train.dist_overlap") ? "overlapping the backward pass" : "after the backward pass");
    s.display.line(line);
  }
  // CMHA_PROFILE=1: time every kernel of this run and print the table at its end.
  const bool profile = std::getenv("CMHA_PROFILE") && std::string(std::getenv("CMHA_PROFILE")) != "0";
  if (profile) {
    backend::reset_profile();
    backend::set_profiling(true);
  }
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  // Throughput counts training time only: validation and checkpoints are left out.
  double window_loss = 0, window_units = 0, window_correct = 0, window_seconds = 0, gnorm = 0;
  double total_units = 0, total_seconds = 0;
  const int64_t per_epoch = std::max<int64_t>(1, s.task.batches_per_epoch() / s.update_freq);
  // The updates of the whole run (an epoch's last update may take fewer than update_freq batches).
  const int64_t epoch_updates = std::max<int64_t>(1, (s.task.batches_per_epoch() + s.update_freq - 1) / s.update_freq);
  const int64_t planned = s.max_updates > 0 && s.max_epochs > 0 ? std::min(s.max_updates, s.max_epochs * epoch_updates)
                          : s.max_updates > 0                    ? s.max_updates
                                                                 : s.max_epochs * epoch_updates;
  const int64_t first_update = s.update;
  const std::string unit = s.task.unit_name();

  auto done = [&] {
    return (s.max_updates > 0 && s.update >= s.max_updates) || (s.max_epochs > 0 && s.epoch >= s.max_epochs);
  };
  while (!done()) {
    if (!s.task.has_next_batch()) {  // epoch end: validate, checkpoint, next shuffle
      ++s.epoch;
      summary.mid_epoch = false;
      if (s.validate_epoch_ends) summary.last_validation = s.validate(s.epoch);
      // The next epoch's order is drawn before saving, so the checkpoint's
      // data position is "start of epoch N" and a resume never ends an epoch twice.
      s.task.start_epoch(s.epoch);
      s.save(checkpoint_name(s.update));
      s.prune();
      if (s.patience > 0 && s.stale_validations >= s.patience) {
        summary.early_stopped = true;
        break;
      }
      if (done()) break;
      continue;
    }
    // ---- one update: update_freq micro-batches ----
    const auto t_update = clock::now();
    for (auto& [n, p] : s.params) p.zero_grad();
    double loss = 0, units = 0, correct = 0;
    for (int64_t k = 0; k < s.update_freq && s.task.has_next_batch(); ++k) {
      autograd::AutocastGuard autocast(s.bf16);
      BatchLoss b = s.task.next_batch_loss();
      // Gradients leave the rank only in the update's last backward pass.
      if (k + 1 == s.update_freq || !s.task.has_next_batch()) s.buckets->arm();
      b.loss_sum.backward();
      loss += b.loss_sum.item();
      units += static_cast<double>(b.units);
      correct += b.correct + (b.count_correct ? b.count_correct() : 0.0);
    }
    // Sum gradients and counts over ranks, then average by the global unit count,
    // so the update equals one process with the whole batch. A stop request on
    // any rank stops every rank after this update.
    const bool stop_here = s.hooks.stop_requested && s.hooks.stop_requested();
    double totals[4] = {loss, units, correct, stop_here ? 1.0 : 0.0};
    s.comm.all_reduce(totals, 4, dist::ReduceOp::sum);
    {
      backend::ProfilePhase phase("exchange");  // the gradient all-reduce left after backward, and the scaling
      s.buckets->finish(static_cast<float>(1.0 / std::max(1.0, totals[1])));
    }
    const bool stop = totals[3] > 0;
    std::vector<Tensor> ps;
    for (auto& [n, p] : s.params) ps.push_back(p);
    {
      backend::ProfilePhase phase("optimizer");
      gnorm = s.clip_norm > 0 ? optim::clip_grad_norm(ps, s.clip_norm) : optim::grad_norm(ps);
    }
    if (!std::isfinite(totals[0]) || !std::isfinite(gnorm)) {
      ++s.skipped;
      ++s.nonfinite_in_row;
      s.display.line("update " + std::to_string(s.update + 1) + ": non-finite loss or gradient, skipped (" +
                     std::to_string(s.nonfinite_in_row) + " in a row)");
      CMHA_CHECK(s.nonfinite_in_row < s.max_nonfinite,
                 std::to_string(s.nonfinite_in_row) + " non-finite updates in a row (train.max_nonfinite): stopping; " +
                     s.saved_state());
      continue;
    }
    s.nonfinite_in_row = 0;
    const double lr = s.schedule->lr_at(s.update, static_cast<double>(s.update) / static_cast<double>(per_epoch));
    s.optimizer->set_lr(lr);
    {
      backend::ProfilePhase phase("optimizer");
      s.optimizer->step();
      if (s.ema) s.ema->update();
    }
    ++s.update;
    summary.mid_epoch = true;
    const double update_seconds = seconds_since(t_update);
    window_loss += totals[0];
    window_units += totals[1];
    window_correct += totals[2];
    window_seconds += update_seconds;
    total_units += totals[1];
    total_seconds += update_seconds;

    const bool log_now = s.update % s.log_every == 0;
    if (log_now || s.display.interactive()) {
      ProgressView v;
      v.update = s.update;
      v.planned = planned;
      v.epoch = s.epoch + 1;
      v.loss = window_loss / std::max(window_units, 1.0);
      v.lr = lr;
      v.gnorm = gnorm;
      v.rate = window_units / std::max(window_seconds, 1e-9);
      v.unit = unit;
      // ETA from the mean wall time of this session's updates (validations included: they recur).
      v.elapsed_s = seconds_since(t_start);
      v.eta_s = v.elapsed_s / static_cast<double>(std::max<int64_t>(1, s.update - first_update)) *
                static_cast<double>(std::max<int64_t>(0, planned - s.update));
      s.display.bar(v);
      if (log_now) {
        s.log_row({{"split", "train"}, {"update", s.update}, {"epoch", v.epoch}, {"loss", v.loss},
                   {"top1", 100.0 * window_correct / std::max(window_units, 1.0)}, {"lr", lr}, {"gnorm", gnorm},
                   {unit + "_per_s", v.rate}, {"skipped_updates", s.skipped}});
        s.display.line(render_log_line(v, s.display.interactive() ? static_cast<size_t>(terminal_width() - 1) : 0));
        window_loss = window_units = window_correct = window_seconds = 0;
      }
    }
    if (s.validate_every > 0 && s.update % s.validate_every == 0) summary.last_validation = s.validate(s.epoch + 1);
    if (s.save_every > 0 && s.update % s.save_every == 0) {
      s.save(checkpoint_name(s.update));
      s.prune();
    }
    if (stop) {
      s.save(checkpoint_name(s.update));
      summary.interrupted = true;
      break;
    }
  }
  s.display.finish();
  if (!summary.interrupted && !summary.early_stopped && s.saved_update != s.update)
    s.save(checkpoint_name(s.update));  // the final state, when the run stopped between epochs
  if (profile && s.comm.is_main()) {
    backend::set_profiling(false);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    std::fprintf(stderr, "kernel profile (CMHA_PROFILE), per update:\n%s",
                 backend::profile_table(backend::profile_rows(), wall, s.update - first_update).c_str());
  }
  summary.updates = s.update;
  summary.epochs = s.epoch;
  summary.skipped_updates = s.skipped;
  summary.last_checkpoint = (fs::path(s.dir) / checkpoint_name(s.update)).string();
  summary.seconds = seconds_since(t_start);
  summary.units_per_s = total_units / std::max(total_seconds, 1e-9);
  summary.unit = unit;
  summary.best = s.best;
  summary.best_metric = s.best_metric;
  summary.peak_rss_mb = process_peak_rss_mb();
  summary.peak_tensor_mb = peak_cpu_tensor_mb();
  s.display.fields(summary_fields(summary));
  return summary;
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
