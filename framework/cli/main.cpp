// The cmha command: dispatches to subcommands. Exit codes: 0 success,
// 2 usage or input error, 1 other failure, 130 interrupted.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "tensor/error.h"

int main(int argc, char** argv) {
  try {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
      std::printf("usage: cmha <command> [options]\n");
      return argc < 2 ? 2 : 0;
    }
    std::fprintf(stderr, "cmha: unknown command '%s' (try 'cmha --help')\n", argv[1]);
    return 2;
  } catch (const cmha::Error& e) {
    std::fprintf(stderr, "cmha: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cmha: internal error: %s\n", e.what());
    return 1;
  }
}
