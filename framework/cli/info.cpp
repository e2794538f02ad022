// cmha info: what this build of cmha can use on this machine.
#include <dnnl.h>
#include <omp.h>

#include <cstdio>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "nn/attention/registry.h"
#include "tensor/device.h"
#include "tensor/error.h"
#include "train/checkpoint.h"
#include "train/model_config.h"
#ifdef CMHA_WITH_CUDA
#include "tensor/cuda_runtime.h"
#endif

#ifndef CMHA_VERSION
#define CMHA_VERSION "unknown"
#endif

namespace cmha::cli {
namespace {

const char* kInfoUsage =
    "usage: cmha info [CHECKPOINT] [--devices]\n"
    "\n"
    "With a checkpoint: what it holds (model, attention types, parameters, update,\n"
    "optimiser and EMA state, the recipe). Without: the build of cmha and the\n"
    "devices it can use here.\n"
    "\n"
    "options:\n"
    "  --devices   show only the devices: CPU threads, oneDNN, CUDA GPUs\n"
    "  -h, --help  show this help\n";

void print_devices() {
  std::printf("cpu: %d OpenMP threads (%u hardware threads; set OMP_NUM_THREADS or --threads to change)\n",
              omp_get_max_threads(), std::thread::hardware_concurrency());
  const dnnl_version_t* v = dnnl_version();
  const std::string hash = v->hash ? v->hash : "N/A";
  std::printf("oneDNN: %d.%d.%d%s\n", v->major, v->minor, v->patch, hash == "N/A" ? "" : (" (" + hash + ")").c_str());
  const int gpus = cuda_device_count();
#ifdef CMHA_WITH_CUDA
  std::printf("cuda: %d device%s%s\n", gpus, gpus == 1 ? "" : "s", gpus == 0 ? " (no CUDA driver or GPU visible)" : "");
  for (int i = 0; i < gpus; ++i) std::printf("  cuda:%d  %s\n", i, cuda_device_description(i).c_str());
#else
  std::printf("cuda: %d devices (this cmha was built without CUDA)\n", gpus);
#endif
}

void print_checkpoint(const std::string& path) {
  const train::Checkpoint c = train::load_checkpoint(path);
  const train::Recipe r = train::Recipe::parse(c.recipe, path + " (recipe)");
  int64_t params = 0;
  for (const auto& [name, t] : c.weights) params += t.numel();
  std::printf("checkpoint: %s\n", path.c_str());
  std::printf("model: %s, d_model %lld, %lld parameters in %zu tensors\n", r.string("model.kind").c_str(),
              static_cast<long long>(r.integer("model.d_model")), static_cast<long long>(params), c.weights.size());
  for (const nn::AttentionPlace& place : nn::attention_places(r.string("model.kind"))) {
    const auto a = train::attention_config(r, "model." + place.name);
    const nn::AttentionType* type = nn::find_attention_type(a.type);
    const std::string note = a.key_dim == 0 ? " (= d_model)"
                             : type && !type->key_dim_note.empty() ? " (" + type->key_dim_note + ")"
                                                                    : "";
    const std::string scale = a.scale > 0 ? ", scale " + std::to_string(a.scale) : "";
    std::printf("%s: %s, %lld heads, key_dim %lld%s%s\n", place.name.c_str(), a.type.c_str(),
                static_cast<long long>(a.heads), static_cast<long long>(a.key_dim), note.c_str(), scale.c_str());
  }
  const auto& t = c.trainer;
  std::printf("trainer: update %s, epoch %s, %zu optimiser tensors, %zu EMA tensors\n",
              t.contains("update") ? t["update"].dump().c_str() : "?", t.contains("epoch") ? t["epoch"].dump().c_str() : "?",
              c.optimizer.size(), c.ema.size());
  if (t.contains("averaged_from")) std::printf("averaged from: %s\n", t["averaged_from"].dump().c_str());
  if (t.contains("compressed_from")) std::printf("compressed from: %s\n", t["compressed_from"].dump().c_str());
  if (t.contains("imported_from")) std::printf("imported from: %s (%s)\n", t["imported_from"].dump().c_str(), t.value("import_format", "?").c_str());
  std::printf("recipe:\n%s", c.recipe.c_str());
}

}  // namespace

int info_command(const Args& args) {
  bool devices_only = false;
  std::string checkpoint;
  for (const std::string& a : args) {
    if (a == "-h" || a == "--help") {
      std::fputs(kInfoUsage, stdout);
      return 0;
    }
    if (a == "--devices") devices_only = true;
    else if (!a.empty() && a[0] != '-' && checkpoint.empty()) checkpoint = a;
    else throw Error("unknown option '" + a + "' for 'cmha info' (try 'cmha info --help')");
  }
  if (!checkpoint.empty()) {
    print_checkpoint(checkpoint);
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
