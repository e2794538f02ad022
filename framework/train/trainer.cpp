#include "train/trainer.h"

#include "run/device.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "autograd/deferred_checks.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/matmul.h"
#include "backend/profile.h"
#include "optim/clip.h"
#include "optim/ema.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "run/checkpoint.h"
#include "run/metrics_log.h"
#include "run/model_config.h"
#include "run/run_dir.h"
#include "run/tensorboard.h"
#include "tensor/atomic_file.h"
#include "tensor/clock.h"
#include "tensor/storage.h"
#include "train/gradient_buckets.h"
#include "train/progress.h"
#include "train/update_tally.h"

namespace cmha::train {

namespace fs = std::filesystem;

namespace {

// Biases, norms, position embeddings and class tokens are not decayed (DeiT, BERT).
bool decays(const std::string& name) {
  static const std::regex no_decay(R"((^|\.)bias$|norm|pos_embed|positions|cls_token|dist_token)");
  return !std::regex_search(name, no_decay);
}

std::string checkpoint_name(int64_t update) { return "checkpoint_" + std::to_string(update) + ".safetensors"; }

}  // namespace

struct Trainer::Impl {
  const run::Recipe& recipe;
  Task& task;
  distributed::Communicator& comm;
  TrainerHooks hooks;
  std::string dir;
  std::vector<std::pair<std::string, Tensor>> params;  // named, unique
  std::vector<std::string> param_names;  // params' names, in order
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::ExponentialMovingAverage> ema;
  std::unique_ptr<optim::LrSchedule> schedule;
  std::shared_ptr<Generator> dropout_gen;
  std::unique_ptr<GradientBuckets> buckets;  // the gradient exchange (world 1: scaling only)
  run::MetricsLog metrics;       // rank 0
  std::unique_ptr<run::TensorBoardWriter> tensorboard;  // train.tensorboard (rank 0)
  ProgressDisplay display;  // rank 0 draws; a bar on a terminal only
  int64_t resumed_metrics_rows = -1;  // the checkpoint's "metrics_rows" (-1: an older checkpoint without it)
  // trainer state (saved in checkpoints)
  int64_t update = 0, epoch = 0, nonfinite_in_row = 0, skipped = 0, stale_validations = 0;
  double best = NAN;
  int64_t saved_update = -1;  // the update of the last checkpoint_<update> written
  int64_t telemetry_update = -1;  // the update of the last "heads" row
  // options
  int64_t max_updates, max_epochs, update_freq, save_every, keep_last, validate_every, log_every, patience, max_nonfinite,
      telemetry_every;
  double clip_norm;
  std::string best_metric;
  bool maximize, bf16, validate_epoch_ends;

  Impl(const run::Recipe& r, Task& t, distributed::Communicator& c, TrainerHooks h)
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
    telemetry_every = r.integer("train.head_telemetry_every");
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
    optimizer = optim::make_optimizer(run::optimizer_options(r), std::move(op));
    if (r.real("train.ema_decay") > 0) {
      std::vector<Tensor> ps;
      for (auto& [n, p] : params) ps.push_back(p);
      ema = std::make_unique<optim::ExponentialMovingAverage>(ps, r.real("train.ema_decay"));
    }
    schedule = run::make_schedule(r, task.batches_per_epoch() / update_freq, comm.size());
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

  run::Checkpoint snapshot() const {
    run::Checkpoint c;
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
    resolve();  // the checks, skipped updates and counts it stores
    std::vector<Tensor> weights;
    for (auto& [n, p] : params) weights.push_back(p);
    if (ema) weights.insert(weights.end(), ema->shadow().begin(), ema->shadow().end());
    CMHA_CHECK(optim::values_finite(weights),
               "update " + std::to_string(update) + " left non-finite weights (the run diverged: a lower optim.lr?), "
               "so '" + name + "' was not saved; " + saved_state());
    const std::vector<std::string> states = comm.all_gather_bytes(rank_state().dump());
    if (name != "checkpoint_best.safetensors") saved_update = update;
    if (!comm.is_main()) return;
    run::Checkpoint c = snapshot();
    c.trainer["ranks"] = nlohmann::json::array();
    for (const std::string& st : states) c.trainer["ranks"].push_back(nlohmann::json::parse(st));
    run::save_checkpoint((fs::path(dir) / name).string(), c);
  }

  void prune() {
    if (!comm.is_main() || keep_last <= 0) return;
    const std::vector<std::string> found = run::update_checkpoints(dir);  // oldest first
    for (size_t i = 0; i + static_cast<size_t>(keep_last) < found.size(); ++i) fs::remove(found[i]);
  }

  // A trainer state with a missing or mistyped field (an edited or foreign file) is the file's fault: exit 2.
  void resume_from(const std::string& path) try {
    run::Checkpoint c = run::load_checkpoint(path);
    CMHA_CHECK(run::same_architecture(c.recipe, path, recipe),
               "checkpoint '" + path + "' was trained with a different model architecture than this recipe "
               "(compare its recipe with 'cmha info " + path + "')");
    std::map<std::string, Tensor> named(params.begin(), params.end());
    run::restore_weights(path, c.weights, named);
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
    run::broadcast_from_rank0(comm, tensors);
  }

  // train.init_from: the weights only; optimiser, schedule and data start afresh.
  void init_from(const std::string& path) {
    CMHA_CHECK(!fs::is_directory(path), "train.init_from: '" + path + "' is a directory, not a checkpoint file");
    CMHA_CHECK(fs::exists(path), "train.init_from: checkpoint '" + path + "' does not exist");
    const run::Checkpoint c = run::load_checkpoint(path);
    CMHA_CHECK(run::same_architecture(c.recipe, path, recipe),
               "train.init_from: checkpoint '" + path + "' holds a different model architecture than this recipe "
               "(compare its recipe with 'cmha info " + path + "')");
    run::restore_weights(path, c.weights, std::map<std::string, Tensor>(params.begin(), params.end()));
    for (size_t i = 0; ema && i < params.size(); ++i) ema->shadow()[i].copy_(params[i].second);
  }

  void log_row(const nlohmann::json& row) {
    if (!comm.is_main()) return;
    metrics.append(row);
    if (tensorboard) tensorboard->write(row.value("update", int64_t{0}), run::scalars_of_row(row));
  }

  // Rank 0: one metrics row of split "heads" (hooks.telemetry_row) for this update, at most one per update
  // (a validation at an epoch's end may follow the train.head_telemetry_every row of the same update).
  void log_telemetry(int64_t epoch_number) {
    if (!hooks.telemetry_row || !comm.is_main() || telemetry_update == update) return;
    telemetry_update = update;
    const auto start = std::chrono::steady_clock::now();
    nlohmann::json extra = hooks.telemetry_row(task.model());
    if (extra.empty()) return;
    nlohmann::json heads = {{"split", "heads"}, {"update", update}, {"epoch", epoch_number}};
    heads.update(extra);
    heads["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    log_row(heads);
  }

  // `epoch_number`: the 1-based epoch the current update belongs to (at an epoch's end, that epoch).
  std::map<std::string, double> validate(int64_t epoch_number) {
    resolve();
    backend::ProfilePhase phase("validate");
    display.note("validating at update " + std::to_string(update) + " ...");
    auto m = task.validate();
    // The mean over ranks: every rank then takes the same best/early-stopping decisions.
    std::vector<double> values;
    for (auto& [k, v] : m) values.push_back(v);
    comm.all_reduce(values.data(), values.size(), distributed::ReduceOp::average);
    size_t j = 0;
    for (auto& [k, v] : m) v = values[j++];
    nlohmann::json row = {{"split", "valid"}, {"update", update}, {"epoch", epoch_number}};
    for (auto& [k, v] : m) row[k] = v;
    log_row(row);
    log_telemetry(epoch_number);
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

  // ---- the run: start, then updates until done, then the summary ----

  // Throughput counts training time only: validation and checkpoints are left out.
  struct Window {
    double loss = 0, units = 0, correct = 0, seconds = 0;
  };

  TrainSummary summary;
  SteadyClock::time_point t_start;
  int64_t first_update = 0, planned = 0, per_epoch = 1;
  Window window;
  double total_units = 0, total_seconds = 0;
  bool profile = false;
  // What the updates since the last resolve() left on the device, and the
  // range checks of their ids and targets (autograd/deferred_checks.h).
  UpdateTally tally;
  autograd::DeferredChecks device_checks;
  double last_loss = NAN, last_gnorm = NAN;  // of the last window read (the progress bar between log lines)

  TrainSummary run() {
    start();
    while (!done()) {
      if (!task.has_next_batch()) {  // epoch end: validate, checkpoint, next shuffle
        if (end_epoch()) break;
        continue;
      }
      const auto t_update = SteadyClock::now();
      UpdateTallyEntry entry;
      forward_backward(entry);                             // update_freq micro-batches on this rank
      const bool stop = exchange(entry);                   // units over ranks; gradients all-reduced and scaled
      entry.norm = clip_gradients();                       // on the device: the gate of the step
      const double lr = step_optimizer(entry.norm);        // schedule, optimiser, EMA; ++update
      entry.update = update;
      entry.seconds = std::chrono::duration<double>(SteadyClock::now() - t_update).count();
      tally.add(std::move(entry));
      log_progress(lr);
      validate_and_save_on_cadence();
      if (stop) {
        save(checkpoint_name(update));
        summary.interrupted = true;
        break;
      }
    }
    return finish();
  }

  bool done() const {
    return (max_updates > 0 && update >= max_updates) || (max_epochs > 0 && epoch >= max_epochs);
  }

  // recipe.yaml, resume or train.init_from, the same parameters on every rank, metrics.jsonl, the profile.
  void start() {
    if (comm.is_main()) {
      fs::create_directories(dir);
      write_file_atomically((fs::path(dir) / "recipe.yaml").string(), recipe.dump());
    }
    // Rank 0 picks the checkpoint (the run directory must be shared by all ranks).
    const std::string resume_path = comm.all_gather_bytes(hooks.resume ? run::latest_checkpoint(dir) : "").at(0);
    if (!resume_path.empty()) {
      resume_from(resume_path);
      display.line("resumed from " + resume_path + " at update " + std::to_string(update));
    } else {
      if (!recipe.string("train.init_from").empty()) init_from(recipe.string("train.init_from"));
      task.start_epoch(epoch);
    }
    broadcast_parameters();
    if (comm.is_main()) {
      const std::string path = (fs::path(dir) / "metrics.jsonl").string();
      // A resumed run redoes the updates after its checkpoint: their rows go (a resume
      // without a checkpoint starts from update 0, so every row goes).
      if (hooks.resume) metrics.open_resumed(path, resume_path.empty() ? 0 : resumed_metrics_rows, update);
      else metrics.open(path);
      if (recipe.boolean("train.tensorboard")) tensorboard = std::make_unique<run::TensorBoardWriter>(dir);
    }
    if (comm.size() > 1) {
      char line[256];
      std::snprintf(line, sizeof line, "data parallel: %d ranks (%s), %s gradients in %lld buckets of %g MB, %s",
                    comm.size(), comm.backend(), recipe.string("train.dist_grad_dtype").c_str(),
                    (long long)buckets->buckets(), recipe.real("train.dist_bucket_mb"),
                    recipe.boolean("train.dist_overlap") ? "overlapping the backward pass" : "after the backward pass");
      display.line(line);
    }
    // CMHA_PROFILE=1: time every kernel of this run and print the table at its end.
    profile = std::getenv("CMHA_PROFILE") && std::string(std::getenv("CMHA_PROFILE")) != "0";
    if (profile) {
      backend::reset_profile();
      backend::set_profiling(true);
    }
    t_start = SteadyClock::now();
    per_epoch = std::max<int64_t>(1, task.batches_per_epoch() / update_freq);
    // The updates of the whole run (an epoch's last update may take fewer than update_freq batches).
    const int64_t epoch_updates = std::max<int64_t>(1, (task.batches_per_epoch() + update_freq - 1) / update_freq);
    planned = max_updates > 0 && max_epochs > 0 ? std::min(max_updates, max_epochs * epoch_updates)
              : max_updates > 0                 ? max_updates
                                                : max_epochs * epoch_updates;
    first_update = update;
  }

  // True when the run stops here (early stopping, or the last epoch ended).
  bool end_epoch() {
    ++epoch;
    summary.mid_epoch = false;
    if (validate_epoch_ends) summary.last_validation = validate(epoch);
    // The next epoch's order is drawn before saving, so the checkpoint's
    // data position is "start of epoch N" and a resume never ends an epoch twice.
    task.start_epoch(epoch);
    save(checkpoint_name(update));
    prune();
    if (patience > 0 && stale_validations >= patience) {
      summary.early_stopped = true;
      return true;
    }
    return done();
  }

  // Forward and backward passes of update_freq micro-batches; gradients
  // accumulate in the parameters, losses and counts stay on the device.
  void forward_backward(UpdateTallyEntry& entry) {
    for (auto& [n, p] : params) p.zero_grad();
    // Range checks of device ids and targets run at the log cadence (resolve), not before the forward pass.
    const autograd::DeferredChecks::Scope deferred(device_checks);
    for (int64_t k = 0; k < update_freq && task.has_next_batch(); ++k) {
      device_checks.set_batch("update " + std::to_string(update + 1) + "'s batch " + std::to_string(k + 1));
      autograd::AutocastGuard autocast(bf16);
      BatchLoss b = task.next_batch_loss();
      // Gradients leave the rank only in the update's last backward pass.
      if (k + 1 == update_freq || !task.has_next_batch()) buckets->arm();
      b.loss_sum.backward();
      entry.batches.push_back({b.loss_sum.detach(), b.correct, b.correct_count});
      entry.units += static_cast<double>(b.units);  // this rank's, until exchange()
    }
  }

  // Sums the unit counts (host numbers) over ranks, then averages the
  // gradients by the global count, so the update equals one process with the
  // whole batch. True when any rank was asked to stop (it stops every rank
  // after this update).
  bool exchange(UpdateTallyEntry& entry) {
    const bool stop = hooks.stop_requested && hooks.stop_requested();
    double totals[2] = {entry.units, stop ? 1.0 : 0.0};
    comm.all_reduce(totals, 2, distributed::ReduceOp::sum);
    backend::ProfilePhase phase("exchange");  // the gradient all-reduce left after backward, and the scaling
    buckets->finish(static_cast<float>(1.0 / std::max(1.0, totals[0])));
    entry.units = totals[0];
    return totals[1] > 0;
  }

  // The gradients' global norm (the bits of a double, on their device), after
  // clipping them to train.clip_norm when set; nothing is read on the host.
  Tensor clip_gradients() {
    backend::ProfilePhase phase("optimizer");
    std::vector<Tensor> ps;
    for (auto& [n, p] : params) ps.push_back(p);
    return optim::clip_grad_norm_on_device(ps, clip_norm > 0 ? clip_norm : 0.0);
  }

  // Reads what the updates since the last call left on the device (one host
  // wait per dtype) and runs the deferred range checks: at the log cadence,
  // before a validation or a checkpoint, at the end. An update whose
  // gradient norm was not finite was skipped by the optimiser's gate (it
  // changed no weight): it is counted, and after train.max_nonfinite of them
  // in a row the run stops with an error.
  void resolve() {
    device_checks.run();
    if (tally.empty()) return;
    for (const ResolvedUpdate& r : tally.resolve(comm)) {
      last_gnorm = r.gnorm;
      if (!r.applied()) {
        ++skipped;
        ++nonfinite_in_row;
        display.line("update " + std::to_string(r.update) + ": non-finite loss or gradient, skipped (" +
                     std::to_string(nonfinite_in_row) + " in a row)");
        CMHA_CHECK(nonfinite_in_row < max_nonfinite,
                   std::to_string(nonfinite_in_row) + " non-finite updates in a row (train.max_nonfinite): stopping; " +
                       saved_state());
        continue;
      }
      nonfinite_in_row = 0;
      window.loss += r.loss;
      window.units += r.units;
      window.correct += r.correct;
      window.seconds += r.seconds;
      total_units += r.units;
      total_seconds += r.seconds;
    }
    last_loss = window.loss / std::max(window.units, 1.0);
  }

  // The schedule's rate for this update, the optimiser's step and the EMA; the rate used.
  // `gate`: the gradients' norm; the kernels skip the step when it is not finite.
  double step_optimizer(const Tensor& gate) {
    const double lr = schedule->lr_at(update, static_cast<double>(update) / static_cast<double>(per_epoch));
    optimizer->set_lr(lr);
    {
      backend::ProfilePhase phase("optimizer");
      optimizer->step(gate);
      if (ema) ema->update(gate);
    }
    ++update;
    summary.mid_epoch = true;
    return lr;
  }

  // The progress bar on a terminal (between log lines, with the loss and
  // norm of the last window read: reading them each update would make a GPU
  // step wait); every train.log_every updates a metrics row and a kept line.
  void log_progress(double lr) {
    const bool log_now = update % log_every == 0;
    if (!log_now && !display.interactive()) return;
    if (log_now) resolve();
    ProgressView v;
    v.update = update;
    v.planned = planned;
    v.epoch = epoch + 1;
    v.loss = last_loss;
    v.lr = lr;
    v.gnorm = last_gnorm;
    v.rate = window.units / std::max(window.seconds, 1e-9);
    v.unit = task.unit_name();
    // ETA from the mean wall time of this session's updates (validations included: they recur).
    v.elapsed_s = seconds_since(t_start);
    v.eta_s = v.elapsed_s / static_cast<double>(std::max<int64_t>(1, update - first_update)) *
              static_cast<double>(std::max<int64_t>(0, planned - update));
    display.bar(v);
    if (!log_now) return;
    log_row({{"split", "train"}, {"update", update}, {"epoch", v.epoch}, {"loss", v.loss},
             {"top1", 100.0 * window.correct / std::max(window.units, 1.0)}, {"lr", lr}, {"gnorm", v.gnorm},
             {v.unit + "_per_s", v.rate}, {"skipped_updates", skipped}});
    display.line(render_log_line(v, display.interactive() ? static_cast<size_t>(terminal_width() - 1) : 0));
    window = {};
  }

  void validate_and_save_on_cadence() {
    if (validate_every > 0 && update % validate_every == 0) summary.last_validation = validate(epoch + 1);
    if (telemetry_every > 0 && update % telemetry_every == 0) log_telemetry(epoch + 1);
    if (save_every > 0 && update % save_every == 0) {
      save(checkpoint_name(update));
      prune();
    }
  }

  TrainSummary finish() {
    resolve();
    display.finish();
    if (!summary.interrupted && !summary.early_stopped && saved_update != update)
      save(checkpoint_name(update));  // the final state, when the run stopped between epochs
    if (profile && comm.is_main()) {
      backend::set_profiling(false);
      std::fprintf(stderr, "kernel profile (CMHA_PROFILE), per update:\n%s",
                   backend::profile_table(backend::profile_rows(), seconds_since(t_start), update - first_update).c_str());
    }
    summary.updates = update;
    summary.epochs = epoch;
    summary.skipped_updates = skipped;
    summary.last_checkpoint = (fs::path(dir) / checkpoint_name(update)).string();
    summary.seconds = seconds_since(t_start);
    summary.units_per_s = total_units / std::max(total_seconds, 1e-9);
    summary.unit = task.unit_name();
    summary.best = best;
    summary.best_metric = best_metric;
    summary.peak_rss_mb = process_peak_rss_mb();
    summary.peak_tensor_mb = peak_cpu_tensor_mb();
    display.fields(summary_fields(summary));
    return summary;
  }
};

Trainer::Trainer(const run::Recipe& recipe, Task& task, distributed::Communicator& comm, TrainerHooks hooks)
    : impl_(std::make_unique<Impl>(recipe, task, comm, std::move(hooks))) {}
Trainer::~Trainer() = default;

TrainSummary Trainer::run() { return impl_->run(); }

}  // namespace cmha::train
