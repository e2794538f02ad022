// CPU kernels: index (entries of backend/index.h): masked_fill, gather and its
// scatter-add backward, and the index range check.
#include <array>
#include <cstdint>

#include "backend/cpu/convert.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/strided.h"
#include "backend/element_types.h"

namespace cmha::cpu {

namespace {

void find_out_of_range(const Tensor& idx, int64_t limit, const Tensor& found) {
  const int64_t* pi = idx.data<int64_t>("index check");
  int64_t* pf = found.data<int64_t>("index check");
  const int64_t n = idx.numel();
  pf[0] = -1;
  pf[1] = 0;
  for (int64_t i = 0; i < n; ++i)
    if (pi[i] < 0 || pi[i] >= limit) {
      pf[0] = i;
      pf[1] = pi[i];
      return;
    }
}

// out[i] = mask[i] ? value : x[i], any dtype, mask broadcast to x's shape.
void masked_fill(const Tensor& x, const Tensor& mask, const Tensor& out, double value) {
  const Shape so = out.strides(), sx = x.strides(), sm = broadcast_strides(mask, x.shape());
  const bool* pm = mask.data<bool>("masked_fill");
  x.check_host("masked_fill");
  backend::with_any_element_type(x.dtype(), "masked_fill", [&](auto element) {
    using T = decltype(element);
    const T fill = store_from_double<T>(value);
    const T* px = static_cast<const T*>(x.raw_data());
    T* po = out.data<T>("masked_fill");
    for_each_row<3>(x.shape(), {&so, &sx, &sm},
                    [&](const std::array<int64_t, 3>& base, int64_t n, const std::array<int64_t, 3>& step) {
                      T* o = po + base[0];
                      const T* xr = px + base[1];
                      const bool* mr = pm + base[2];
                      if (step[1] == 1 && step[2] == 1) {
#pragma omp simd
                        for (int64_t i = 0; i < n; ++i) o[i] = mr[i] ? fill : xr[i];
                      } else {
                        for (int64_t i = 0; i < n; ++i) o[i] = mr[i * step[2]] ? fill : xr[i * step[1]];
                      }
                    });
  });
}

// Lines along `dim` are the unit of work for gather and its backward: moving
// dim last in every operand turns each line into one row of for_each_row.
// A row of index reads (and, backward, writes) only the x line with the same
// other coordinates, so rows never collide: the scatter-add is race-free, and
// each row is summed serially in order, so it is deterministic too.
struct GatherGeometry {
  Tensor out_t, index_t, x_t;  // views with dim moved last
};

GatherGeometry dim_last(const Tensor& out, const Tensor& index, const Tensor& x, int64_t d) {
  return {make_view(out, out.shape(), out.strides(), out.offset()).transpose(d, -1),
          make_view(index, index.shape(), index.strides(), index.offset()).transpose(d, -1),
          make_view(x, x.shape(), x.strides(), x.offset()).transpose(d, -1)};
}

void gather(const Tensor& x, const Tensor& index, const Tensor& out, int64_t d) {
  const GatherGeometry t = dim_last(out, index, x, d);
  const Shape so = t.out_t.strides(), si = t.index_t.strides(), sx = t.x_t.strides();
  const int64_t* pi = index.data<int64_t>("gather");
  x.check_host("gather");
  backend::with_any_element_type(x.dtype(), "gather", [&](auto element) {
    using T = decltype(element);
    T* po = out.data<T>("gather");
    const T* px = static_cast<const T*>(x.raw_data());
    for_each_row<3>(t.index_t.shape(), {&so, &si, &sx},
                    [&](const std::array<int64_t, 3>& base, int64_t n, const std::array<int64_t, 3>& step) {
                      T* o = po + base[0];
                      const int64_t* ir = pi + base[1];
                      const T* xr = px + base[2];
                      for (int64_t i = 0; i < n; ++i) o[i * step[0]] = xr[ir[i * step[1]] * step[2]];
                    });
  });
}

void gather_backward(const Tensor& g, const Tensor& index, const Tensor& grad_x, int64_t d) {
  const GatherGeometry t = dim_last(g, index, grad_x, d);
  const Shape sg = t.out_t.strides(), si = t.index_t.strides(), sx = t.x_t.strides();
  const float* pg = g.data<float>("gather backward");
  const int64_t* pi = index.data<int64_t>("gather backward");
  float* px = grad_x.data<float>("gather backward");
  for_each_row<3>(t.index_t.shape(), {&sg, &si, &sx},
                  [&](const std::array<int64_t, 3>& base, int64_t n, const std::array<int64_t, 3>& step) {
                    const float* gr = pg + base[0];
                    const int64_t* ir = pi + base[1];
                    float* xr = px + base[2];
                    for (int64_t i = 0; i < n; ++i) xr[ir[i * step[1]] * step[2]] += gr[i * step[0]];
                  });
}

}  // namespace

backend::IndexKernels index_kernels() {
  backend::IndexKernels k;
  k.find_out_of_range = find_out_of_range;
  k.masked_fill = masked_fill;
  k.gather = gather;
  k.gather_backward = gather_backward;
  return k;
}

}  // namespace cmha::cpu
