#pragma once
// One exception type for every user-facing error, so the CLI can map it to
// exit code 2 and print the single sentence it carries.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace cmha {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// "[2, 3, 4]" — used in every shape message.
std::string shape_str(const std::vector<int64_t>& shape);
// "[1, 2]": the multi-index of flat position `flat` in `shape`, for errors.
std::string position_str(int64_t flat, const std::vector<int64_t>& shape);
// "0.3", "1e-07", "nan": a number in a message, six significant digits (%g;
// std::to_string prints 1e-7 as 0.000000).
std::string number_str(double v);

}  // namespace cmha

// CMHA_CHECK(cond, msg-expression): throws cmha::Error with the message when
// cond is false. The message is built only on failure.
#define CMHA_CHECK(cond, ...)                         \
  do {                                                \
    if (!(cond)) throw ::cmha::Error(__VA_ARGS__);    \
  } while (0)
