#include "tensor/regular_file.h"

#include <sys/stat.h>

#include "tensor/error.h"

namespace cmha {

void refuse_special_file(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                     : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                   : "not a regular file";
  throw Error(what + " '" + path + "' is " + kind + ", not a regular file (cmha reads only regular files)");
}

}  // namespace cmha
