#include "backend/cpu/strided.h"

#include <algorithm>

namespace cmha::cpu {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    CMHA_CHECK(da == db || da == 1 || db == 1, std::string(op) + ": shapes " + shape_str(a) + " and " +
                                                   shape_str(b) + " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Tensor& t, const Shape& out_shape) {
  const size_t n = out_shape.size(), m = t.shape().size();
  Shape s(n, 0);
  for (size_t i = 0; i < m; ++i) {
    const size_t o = n - m + i;
    s[o] = t.shape()[i] == 1 && out_shape[o] != 1 ? 0 : t.strides()[i];
  }
  return s;
}

}  // namespace cmha::cpu
