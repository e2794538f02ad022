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
#include "run/device.h"
#include "run/model_config.h"
#include "tensor/device.h"
#include "tensor/error.h"
#ifdef CMHA_WITH_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "tensor/cuda_runtime.h"
#include "tensor/shared_library.h"
#ifdef CMHA_WITH_CUDNN
#include <cudnn_version.h>
#endif
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

#ifdef CMHA_WITH_CUDA
// "13.1.2" from NVIDIA's version codes (major·10000 + minor·100 + patch for
// cuBLASLt, cuDNN 9 and NCCL; major·1000 + minor·10 for the runtime).
std::string version_text(long long code, int major_unit, int minor_unit) {
  return std::to_string(code / major_unit) + "." + std::to_string(code % major_unit / minor_unit) +
         (minor_unit > 1 ? "." + std::to_string(code % minor_unit) : "");
}

// One line per CUDA library cmha opens: the file it loaded and its version,
// or "not loaded" and why (tests/gpu/check.sh stops at such a line). The
// dlopen'd ones are opened as cmha opens them (tensor/shared_library.h:
// by name, then the toolkit's and pip wheels' folders).
void print_cuda_libraries() {
  const int toolkit_major = CUDART_VERSION / 1000;
  int runtime = 0;
  Dl_info where{};
  const bool runtime_ok = cudaRuntimeGetVersion(&runtime) == cudaSuccess;
  const char* runtime_file =
      dladdr(reinterpret_cast<void*>(&cudaRuntimeGetVersion), &where) && where.dli_fname ? where.dli_fname : "?";
  std::printf("  cudart: %s (%s)\n", runtime_file,
              runtime_ok ? version_text(runtime, 1000, 10).c_str() : "version unknown");
  struct Library {
    const char* name;
    std::string soname;
    const char* version_symbol;
    const char* why;  // what cmha needs it for
  };
#ifdef CMHA_WITH_CUDNN
  const std::string cudnn = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
#else
  const std::string cudnn = "libcudnn.so.9";
#endif
  const Library libraries[] = {
      {"cuBLASLt", "libcublasLt.so." + std::to_string(toolkit_major), "cublasLtGetVersion", "every matmul"},
      {"cuDNN", cudnn, "cudnnGetVersion", "fused attention (else cmha's unfused path)"},
      {"NCCL", "libnccl.so.2", "ncclGetVersion", "data-parallel training on GPUs"},
      {"nvrtc", "libnvrtc.so." + std::to_string(toolkit_major), "nvrtcVersion", "cuDNN's runtime-compiled engines"},
  };
  for (const Library& l : libraries) {
    const std::string generic = l.soname.substr(0, l.soname.find(".so.") + 3);
    const SharedLibrary so = open_shared_library({l.soname.c_str(), generic.c_str()});
    if (!so.handle) {
      std::printf("  %s: not loaded: tried %s: %s (needed for %s)\n", l.name, so.file.c_str(), so.reason.c_str(), l.why);
      continue;
    }
    std::string version = "version unknown";
    void* fn = dlsym(so.handle, l.version_symbol);
    if (fn && std::string(l.name) == "NCCL") {
      int v = 0;
      if (reinterpret_cast<int (*)(int*)>(fn)(&v) == 0) version = version_text(v, 10000, 100);
    } else if (fn && std::string(l.name) == "nvrtc") {
      int major = 0, minor = 0;
      if (reinterpret_cast<int (*)(int*, int*)>(fn)(&major, &minor) == 0)
        version = std::to_string(major) + "." + std::to_string(minor);
    } else if (fn) {
      version = version_text(static_cast<long long>(reinterpret_cast<size_t (*)()>(fn)()), 10000, 100);
    }
    std::printf("  %s: %s (%s)\n", l.name, so.file.c_str(), version.c_str());
  }
}
#endif

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
  print_cuda_libraries();
#endif
}

// Every tensor the file stores, under its name there ("ema.<name>", "optimizer.<state>.<name>").
struct StoredTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
};
std::vector<StoredTensor> stored_tensors(const run::Checkpoint& c) {
  std::vector<StoredTensor> out;
  auto add = [&](const std::map<std::string, Tensor>& group, const std::string& prefix) {
    for (const auto& [name, t] : group) out.push_back({prefix + name, dtype_name(t.dtype()), t.shape()});
  };
  add(c.weights, "");
  add(c.optimizer, "optimizer.");
  add(c.ema, "ema.");
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// One line a tensor: name, shape, dtype, in aligned columns.
void print_tensors(const run::Checkpoint& c) {
  const std::vector<StoredTensor> tensors = stored_tensors(c);
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

int64_t parameter_count(const run::Checkpoint& c) {
  int64_t params = 0;
  for (const auto& [name, t] : c.weights) params += t.numel();
  return params;
}

// One attention layer as `cmha info` lists it: the sizes resolved (0 = d_model made explicit).
struct LayerRow {
  std::string place;
  int64_t layer = 0;
  nn::AttentionConfig a;
  int64_t key_dim = 0, value_dim = 0;
  bool own = false;  // set by model.<place>.layers
};
std::vector<LayerRow> layer_rows(const run::Recipe& r) {
  std::vector<LayerRow> rows;
  const int64_t d = r.integer("model.d_model");
  for (const nn::AttentionPlace& place : nn::attention_places(r.string("model.kind"))) {
    const std::string prefix = "model." + place.name;
    const nn::LayerAttention own = run::layer_attention_configs(r, prefix);
    for (int64_t i = 0; i < r.integer("model." + place.layers); ++i) {
      LayerRow row{place.name, i, run::attention_config(r, prefix, i)};
      row.key_dim = row.a.key_dim > 0 ? row.a.key_dim : d;
      row.value_dim = row.a.value_dim > 0 ? row.a.value_dim : d;
      row.own = own.count(i) > 0;
      rows.push_back(row);
    }
  }
  return rows;
}

// The attention of every layer, one a line, '*' marking a layer's own settings.
void print_layer_table(const run::Recipe& r) {
  std::printf("attention by layer (* = the layer's own settings, model.<place>.layers):\n");
  std::printf("  %-18s %5s  %-13s %5s %7s %9s %9s\n", "place", "layer", "type", "heads", "key_dim", "value_dim",
              "scale");
  for (const LayerRow& row : layer_rows(r)) {
    const std::string scale = row.a.scale > 0 ? std::to_string(row.a.scale) : "default";
    std::printf("  %-18s %4lld%s  %-13s %5lld %7lld %9lld %9s\n", row.place.c_str(), static_cast<long long>(row.layer),
                row.own ? "*" : " ", row.a.type.c_str(), static_cast<long long>(row.a.heads),
                static_cast<long long>(row.key_dim), static_cast<long long>(row.value_dim), scale.c_str());
  }
}

// The summary print_checkpoint shows, as JSON (in that order); the recipe typed as its keys are.
nlohmann::ordered_json checkpoint_json(const std::string& path, const run::Checkpoint& c, const run::Recipe& r,
                                       bool tensors) {
  using Json = nlohmann::ordered_json;
  const Json recipe = r.to_json();
  Json attention = Json::object();
  for (const nn::AttentionPlace& place : nn::attention_places(r.string("model.kind")))
    attention[place.name] = recipe["model"][place.name];
  Json j = Json::object();
  j["checkpoint"] = path;
  j["model"] = {{"kind", r.string("model.kind")},
                {"d_model", r.integer("model.d_model")},
                {"parameters", parameter_count(c)},
                {"weight_tensors", c.weights.size()}};
  j["attention"] = attention;
  j["budget"] = run::budget_json(run::model_budget(r));
  j["attention_layers"] = Json::array();
  for (const LayerRow& row : layer_rows(r))
    j["attention_layers"].push_back({{"place", row.place},
                                     {"layer", row.layer},
                                     {"type", row.a.type},
                                     {"heads", row.a.heads},
                                     {"key_dim", row.key_dim},
                                     {"value_dim", row.value_dim},
                                     {"own_settings", row.own}});
  j["trainer"] = Json::parse(c.trainer.dump());
  j["optimizer_tensors"] = c.optimizer.size();
  j["ema_tensors"] = c.ema.size();
  j["recipe"] = recipe;
  if (tensors) {
    j["tensors"] = Json::array();
    for (const auto& t : stored_tensors(c)) j["tensors"].push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}});
  }
  return j;
}

void print_checkpoint(const std::string& path, const run::Checkpoint& c, const run::Recipe& r) {
  std::printf("checkpoint: %s\n", path.c_str());
  std::printf("model: %s, d_model %lld, %lld parameters in %zu tensors\n", r.string("model.kind").c_str(),
              static_cast<long long>(r.integer("model.d_model")), static_cast<long long>(parameter_count(c)),
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
    if (json) std::printf("%s\n", checkpoint_json(checkpoint, c, r, tensors).dump(2).c_str());
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
