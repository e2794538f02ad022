#pragma once
// Libraries opened at run time (dlopen) rather than linked: cuBLASLt (540 MB)
// and NCCL (218 MB) are needed only by GPU work, and linking them would make
// every cmha process, a CPU `cmha --help` included, map them at start-up.
#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "tensor/error.h"

namespace cmha {

struct SharedLibrary {
  void* handle = nullptr;  // kept open for the process's life; null when none opened
  std::string file;        // the name that opened, or the names tried, comma-separated
  std::string reason;      // dlerror's last message when none opened
};

// Folders where CUDA's libraries live besides the loader's path: the toolkit
// ($CUDA_HOME, /usr/local/cuda) and pip wheels (site-packages/nvidia/<lib>/lib,
// as PyTorch installs cuDNN, NCCL, cuBLAS and nvrtc) of a virtualenv, conda,
// the user's and the system's Pythons. CMHA_CUDA_LIBRARY_PATH (colon-separated)
// comes first.
inline std::vector<std::string> cuda_library_dirs() {
  std::vector<std::string> dirs;
  auto add = [&](const std::string& d) {
    if (!d.empty()) dirs.push_back(d);
  };
  if (const char* extra = std::getenv("CMHA_CUDA_LIBRARY_PATH")) {
    std::string rest = extra;
    for (size_t at; (at = rest.find(':')) != std::string::npos; rest = rest.substr(at + 1)) add(rest.substr(0, at));
    add(rest);
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* home = std::getenv(var)) add(std::string(home) + "/lib64");
  add("/usr/local/cuda/lib64");
  add("/usr/local/cuda/targets/x86_64-linux/lib");
  add("/usr/local/cuda/targets/sbsa-linux/lib");
  std::vector<std::string> patterns;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* prefix = std::getenv(var)) patterns.push_back(std::string(prefix) + "/lib/python3*/site-packages");
  if (const char* home = std::getenv("HOME")) patterns.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
  for (const char* p : {"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
                        "/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages",
                        "/opt/conda/lib/python3*/site-packages"})
    patterns.push_back(p);
  for (const std::string& site : patterns) {
    glob_t g{};
    if (glob((site + "/nvidia/*/lib").c_str(), 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) add(g.gl_pathv[i]);
    globfree(&g);
  }
  return dirs;
}

// The first of `names` that dlopen opens: by name (the loader's path,
// LD_LIBRARY_PATH), then in each of cuda_library_dirs(). `file` is the path
// that opened (dlinfo's, when the loader found it by name).
inline SharedLibrary open_shared_library(std::initializer_list<const char*> names) {
  SharedLibrary lib;
  auto try_open = [&](const std::string& path) {
    if ((lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))) {
      lib.file = path;
      struct link_map* map = nullptr;  // the file the loader picked for a bare name
      if (dlinfo(lib.handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) lib.file = map->l_name;
      return true;
    }
    const char* err = dlerror();
    lib.reason = err ? err : "not found";
    return false;
  };
  std::string tried;
  for (const char* n : names) {
    if (try_open(n)) return lib;
    tried += (tried.empty() ? "" : ", ") + std::string(n);
  }
  const std::string by_name_reason = lib.reason;
  for (const std::string& dir : cuda_library_dirs())
    for (const char* n : names)
      if (try_open(dir + "/" + n)) return lib;
  lib.file = tried + " (also in " + std::to_string(cuda_library_dirs().size()) +
             " CUDA toolkit and pip-wheel folders)";
  lib.reason = by_name_reason;
  return lib;
}

// fn = the library's symbol `name`; a missing one is "<what>: <file> has no <name> (<hint>)".
template <typename Fn>
void bind_symbol(const SharedLibrary& lib, const char* name, Fn& fn, const std::string& what, const char* hint) {
  fn = reinterpret_cast<Fn>(dlsym(lib.handle, name));
  if (!fn) throw Error(what + ": " + lib.file + " has no " + name + " (" + hint + ")");
}

}  // namespace cmha
