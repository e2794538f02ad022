// cmha info: what a checkpoint holds, or what this build of cmha can use on this machine.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/command_line.h"
#include "nn/attention/registry.h"
#include "run/budget.h"
#include "run/checkpoint.h"
#include "run/checkpoint_summary.h"
#include "run/device.h"
#include "run/model_config.h"
#include "tensor/device.h"
#include "tensor/error.h"
#ifdef CMHA_WITH_CUDA
#include "tensor/cuda_libraries.h"
#endif

#ifndef CMHA_VERSION
#define CMHA_VERSION "unknown"
#endif

namespace cmha::cli {
namespace {

const char* kInfoDescription =
    "With a checkpoint: what it holds (model, attention types, parameters, update,\n"
    "optimiser and EMA state, the recipe), or with --tensors its tensors, or with\n"
    "--json all of it as one JSON object. Without: the build of cmha and the\n"
    "devices it can use here.\n";

void print_devices() {
  std::printf("cpu: %d OpenMP threads (%u hardware threads; set OMP_NUM_THREADS or --threads to change)\n",
              omp_get_max_threads(), std::thread::hardware_concurrency());
  const dnnl_version_t* v = dnnl_version();
  const std::string hash = v->hash ? v->hash : "N/A";
  std::printf("oneDNN: %d.%d.%d%s\n", v->major, v->minor, v->patch, hash == "N/A" ? "" : (" (" + hash + ")").c_str());
  const int gpus = cuda_device_count();
#ifdef CMHA_WITH_CUDA
  const char* none = " (no CUDA driver or GPU visible)";
#else
  const char* none = " (this cmha was built without CUDA)";
#endif
  std::printf("cuda: %d device%s%s\n", gpus, gpus == 1 ? "" : "s", gpus == 0 ? none : "");
  for (int i = 0; i < gpus; ++i) std::printf("  %s\n", run::describe_device(Device::cuda(i)).c_str());
#ifdef CMHA_WITH_CUDA
  std::printf("cuda libraries:\n");
  for (const CudaLibrary& l : probe_cuda_libraries()) {
    if (l.loaded)
      std::printf("  %s: %s (%s)\n", l.name.c_str(), l.file.c_str(), l.version.c_str());
    else
      std::printf("  %s: not loaded: tried %s: %s (needed for %s)\n", l.name.c_str(), l.file.c_str(), l.reason.c_str(),
                  l.needed_for.c_str());
  }
#endif
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// One line a tensor: name, shape, dtype, in aligned columns.
void print_tensors(const run::Checkpoint& c) {
  const std::vector<run::StoredTensor> tensors = run::stored_tensors(c);
  size_t name_width = 4, shape_width = 5;
  for (const auto& t : tensors) {
    name_width = std::max(name_width, t.name.size());
    shape_width = std::max(shape_width, shape_text(t.shape).size());
  }
  std::printf("%-*s  %-*s  %s\n", static_cast<int>(name_width), "name", static_cast<int>(shape_width), "shape", "dtype");
  for (const auto& t : tensors)
    std::printf("%-*s  %-*s  %s\n", static_cast<int>(name_width), t.name.c_str(), static_cast<int>(shape_width),
                shape_text(t.shape).c_str(), t.dtype.c_str());
}

// The attention of every layer, one a line, '*' marking a layer's own settings.
void print_layer_table(const run::Recipe& r) {
  std::printf("attention by layer (* = the layer's own settings, model.<place>.layers):\n");
  std::printf("  %-18s %5s  %-13s %5s %7s %9s %9s\n", "place", "layer", "type", "heads", "key_dim", "value_dim",
              "scale");
  for (const run::AttentionLayerRow& row : run::attention_layer_rows(r)) {
    const std::string scale = row.attention.scale > 0 ? std::to_string(row.attention.scale) : "default";
    std::printf("  %-18s %4lld%s  %-13s %5lld %7lld %9lld %9s\n", row.place.c_str(), static_cast<long long>(row.layer),
                row.own ? "*" : " ", row.attention.type.c_str(), static_cast<long long>(row.attention.heads),
                static_cast<long long>(row.key_dim), static_cast<long long>(row.value_dim), scale.c_str());
  }
}

void print_checkpoint(const std::string& path, const run::Checkpoint& c, const run::Recipe& r) {
  std::printf("checkpoint: %s\n", path.c_str());
  std::printf("model: %s, d_model %lld, %lld parameters in %zu tensors\n", r.string("model.kind").c_str(),
              static_cast<long long>(r.integer("model.d_model")), static_cast<long long>(run::parameter_count(c)),
              c.weights.size());
  for (const nn::AttentionPlace& place : nn::attention_places(r.string("model.kind"))) {
    const auto a = run::attention_config(r, "model." + place.name);
    const nn::AttentionType* type = nn::find_attention_type(a.type);
    const std::string note = a.key_dim == 0 ? " (= d_model)"
                             : type && !type->key_dim_note.empty() ? " (" + type->key_dim_note + ")"
                                                                    : "";
    const std::string scale = a.scale > 0 ? ", scale " + std::to_string(a.scale) : "";
    const bool per_layer = !run::layer_attention_configs(r, "model." + place.name).empty();
    std::printf("%s: %s, %lld heads, key_dim %lld%s%s%s\n", place.name.c_str(), a.type.c_str(),
                static_cast<long long>(a.heads), static_cast<long long>(a.key_dim), note.c_str(), scale.c_str(),
                per_layer ? "; some layers differ (below)" : "");
  }
  print_layer_table(r);
  std::printf("%s", run::budget_text(run::model_budget(r)).c_str());
  const auto& t = c.trainer;
  std::printf("trainer: update %s, epoch %s, %zu optimiser tensors, %zu EMA tensors\n",
              t.contains("update") ? t["update"].dump().c_str() : "?", t.contains("epoch") ? t["epoch"].dump().c_str() : "?",
              c.optimizer.size(), c.ema.size());
  if (t.contains("averaged_from")) std::printf("averaged from: %s\n", t["averaged_from"].dump().c_str());
  if (t.contains("compressed_from")) std::printf("compressed from: %s\n", t["compressed_from"].dump().c_str());
  if (t.contains("imported_from")) std::printf("imported from: %s (%s)\n", t["imported_from"].dump().c_str(), t.value("import_format", "?").c_str());
  std::printf("recipe:\n%s", r.dump().c_str());
}

}  // namespace

int info_command(const Args& args) {
  bool devices_only = false, tensors = false, json = false;
  std::string checkpoint;
  CommandLine cl("info", kInfoDescription);
  cl.app().add_option("checkpoint", checkpoint, "the checkpoint to describe")->type_name("[CKPT]");
  cl.app().add_flag("--devices", devices_only, "show only the devices: CPU threads, oneDNN, CUDA GPUs");
  cl.app().add_flag("--tensors", tensors,
                    "list the checkpoint's tensors instead, one a line: name (as stored: ema.*, optimizer.* for "
                    "the EMA and optimiser state), shape, dtype");
  cl.app().add_flag("--json", json,
                    "print the checkpoint's summary as one JSON object: model, attention places, parameters, "
                    "trainer state, recipe, and with --tensors the tensors");
  if (!cl.parse(args)) return 0;
  CMHA_CHECK(checkpoint.empty() || !devices_only, "cmha info --devices shows this machine, not a checkpoint: drop '" +
                                                      checkpoint + "' or --devices");
  CMHA_CHECK(!checkpoint.empty() || !(tensors || json),
             std::string("cmha info ") + (json ? "--json" : "--tensors") + " describes a checkpoint: give one");
  if (!checkpoint.empty()) {
    const run::Checkpoint c = run::load_checkpoint(checkpoint);
    const run::Recipe r = run::Recipe::parse_stored(c.recipe, checkpoint + " (recipe)");
    if (json) std::printf("%s\n", run::checkpoint_summary_json(checkpoint, c, r, tensors).dump(2).c_str());
    else if (tensors) print_tensors(c);
    else print_checkpoint(checkpoint, c, r);
    return 0;
  }
  if (!devices_only) {
    std::printf("cmha %s\n", CMHA_VERSION);
#ifdef CMHA_WITH_CUDA
    const char* cuda = "on";
#else
    const char* cuda = "off";
#endif
#ifdef CMHA_WITH_MPI
    const char* mpi = "on";
#else
    const char* mpi = "off";
#endif
    std::printf("built with: CUDA %s, MPI %s\n", cuda, mpi);
  }
  print_devices();
  return 0;
}

}  // namespace cmha::cli
