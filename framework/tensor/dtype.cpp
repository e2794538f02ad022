#include "tensor/dtype.h"

#include <cstdio>
#include <sstream>

#include "tensor/error.h"

namespace cmha {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::b8: return 1;
    case DType::u8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::b8: return "b8";
    case DType::u8: return "u8";
  }
  return "?";
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

std::string position_str(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> pos(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    pos[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(pos);
}

std::string number_str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace cmha
