// cmha info: what this build of cmha can use on this machine.
#include <dnnl.h>
#include <omp.h>

#include <cstdio>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "tensor/device.h"
#include "tensor/error.h"
#ifdef CMHA_WITH_CUDA
#include "backend/cuda/runtime.h"
#endif

#ifndef CMHA_VERSION
#define CMHA_VERSION "unknown"
#endif

namespace cmha::cli {
namespace {

const char* kInfoUsage =
    "usage: cmha info [--devices]\n"
    "\n"
    "Shows the build of cmha and the devices it can use here.\n"
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

}  // namespace

int info_command(const Args& args) {
  bool devices_only = false;
  for (const std::string& a : args) {
    if (a == "-h" || a == "--help") {
      std::fputs(kInfoUsage, stdout);
      return 0;
    }
    if (a == "--devices") devices_only = true;
    else throw Error("unknown option '" + a + "' for 'cmha info' (try 'cmha info --help')");
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
