#pragma once
// Libraries opened at run time (dlopen) rather than linked: cuBLASLt (540 MB)
// and NCCL (218 MB) are needed only by GPU work, and linking them would make
// every cmha process, a CPU `cmha --help` included, map them at start-up.
#include <dlfcn.h>

#include <initializer_list>
#include <string>

#include "tensor/error.h"

namespace cmha {

struct SharedLibrary {
  void* handle = nullptr;  // kept open for the process's life; null when none opened
  std::string file;        // the name that opened, or the names tried, comma-separated
  std::string reason;      // dlerror's last message when none opened
};

// The first of `names` that dlopen opens.
inline SharedLibrary open_shared_library(std::initializer_list<const char*> names) {
  SharedLibrary lib;
  for (const char* n : names) {
    if ((lib.handle = dlopen(n, RTLD_NOW | RTLD_LOCAL))) {
      lib.file = n;
      return lib;
    }
    lib.file += (lib.file.empty() ? "" : ", ") + std::string(n);
    const char* err = dlerror();
    lib.reason = err ? err : "not found";
  }
  return lib;
}

// fn = the library's symbol `name`; a missing one is "<what>: <file> has no <name> (<hint>)".
template <typename Fn>
void bind_symbol(const SharedLibrary& lib, const char* name, Fn& fn, const std::string& what, const char* hint) {
  fn = reinterpret_cast<Fn>(dlsym(lib.handle, name));
  if (!fn) throw Error(what + ": " + lib.file + " has no " + name + " (" + hint + ")");
}

}  // namespace cmha
