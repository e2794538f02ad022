// Views: the result shares the input's storage; each backward maps the
// gradient back to the input's geometry.
#include <algorithm>
#include <numeric>
#include <optional>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace cmha {

namespace {

Shape infer_shape(const Shape& requested, int64_t numel, const Tensor& t, const char* op) {
  Shape out = requested;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      CMHA_CHECK(infer_at < 0, std::string(op) + ": only one dim may be -1 in " + shape_str(requested));
      infer_at = static_cast<int64_t>(i);
    } else {
      CMHA_CHECK(out[i] >= 0, std::string(op) + ": negative size in " + shape_str(requested));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    CMHA_CHECK(known != 0 && numel % known == 0,
               std::string(op) + ": cannot reshape " + t.describe() + " to " + shape_str(requested));
    out[infer_at] = numel / known;
  }
  CMHA_CHECK(shape_numel(out) == numel, std::string(op) + ": cannot reshape " + t.describe() + " (" +
                                            std::to_string(numel) + " elements) to " + shape_str(requested));
  return out;
}

void record_reshape_backward(Tensor& out, const char* name, const Tensor& in) {
  if (!autograd::needs_grad({in})) return;
  Shape in_shape = in.shape();
  autograd::record(out, name, {in}, [in_shape](const Tensor& g) { return std::vector<Tensor>{g.reshape(in_shape)}; });
}

// The strides that give `shape` the elements of a tensor of `old_shape` and
// `old_strides` in the same row-major order without moving them, if any
// (PyTorch's computeStride): each run of old dims that are contiguous with
// one another may be split or merged freely, never merged with its
// neighbour. So a slice of the last dim, [B, T, 3D] -> [B, T, D] of stride
// 3D, views as [B, T, H, D/H]; a transpose cannot merge its swapped dims.
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& shape) {
  Shape out(shape.size(), 1);
  if (shape_numel(old_shape) == 0 || old_shape.empty()) return contiguous_strides(shape);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_stride = old_strides.back(), old_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    old_numel *= old_shape[d];
    // A run of old dims ends where the next one out is not laid out right after it.
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != old_numel * chunk_stride)) {
      while (view_d >= 0 && (view_numel < old_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != old_numel) return std::nullopt;
      if (d > 0) {
        chunk_stride = old_strides[d - 1];
        old_numel = view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  const Shape s = infer_shape(requested, numel(), *this, "view");
  if (is_contiguous()) {
    Tensor out = make_view(*this, s, contiguous_strides(s), offset());
    record_reshape_backward(out, "view", *this);
    return out;
  }
  const std::optional<Shape> strides = view_strides(shape(), this->strides(), s);
  CMHA_CHECK(strides.has_value(), "view: " + describe() + " cannot be viewed as " + shape_str(s) +
                                      " without a copy (it merges dims that are not laid out one after the "
                                      "other); use reshape(), which copies");
  Tensor out = make_view(*this, s, *strides, offset());
  record_reshape_backward(out, "view", *this);
  return out;
}

Tensor Tensor::reshape(const Shape& requested) const {
  const Shape s = infer_shape(requested, numel(), *this, "reshape");
  if (s == shape()) return *this;
  if (is_contiguous()) return view(s);
  return contiguous().view(s);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, "flatten");
  end = wrap_dim(end, "flatten");
  CMHA_CHECK(start <= end, "flatten: start dim after end dim for " + describe());
  Shape s(shape().begin(), shape().begin() + start);
  int64_t m = 1;
  for (int64_t i = start; i <= end; ++i) m *= shape()[i];
  s.push_back(m);
  s.insert(s.end(), shape().begin() + end + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  CMHA_CHECK(static_cast<int64_t>(dims.size()) == dim(),
             "permute: " + std::to_string(dims.size()) + " dims given for " + describe());
  std::vector<int64_t> p(dims.size());
  std::vector<bool> seen(dims.size(), false);
  Shape s(dims.size()), st(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    p[i] = wrap_dim(dims[i], "permute");
    CMHA_CHECK(!seen[p[i]], "permute: dim " + std::to_string(p[i]) + " repeated in " + shape_str(dims));
    seen[p[i]] = true;
    s[i] = shape()[p[i]];
    st[i] = strides()[p[i]];
  }
  Tensor out = make_view(*this, s, st, offset());
  if (autograd::needs_grad({*this})) {
    std::vector<int64_t> inverse(p.size());
    for (size_t i = 0; i < p.size(); ++i) inverse[p[i]] = static_cast<int64_t>(i);
    autograd::record(out, "permute", {*this},
                     [inverse](const Tensor& g) { return std::vector<Tensor>{g.permute(inverse)}; });
  }
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  std::vector<int64_t> p(dim());
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[wrap_dim(d0, "transpose")], p[wrap_dim(d1, "transpose")]);
  return permute(p);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, "slice");
  const int64_t n = shape()[d];
  CMHA_CHECK(step > 0, "slice: step must be positive, got " + std::to_string(step));
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape(), st = strides();
  s[d] = (end - start + step - 1) / step;
  st[d] *= step;
  Tensor out = make_view(*this, s, st, offset() + start * strides()[d]);
  if (autograd::needs_grad({*this})) {
    Shape in_shape = shape();
    DType dt = dtype();
    autograd::Node& node =
        autograd::record(out, "slice", {*this}, [in_shape, dt, d, start, end, step](const Tensor& g) {
          Tensor full = Tensor::zeros(in_shape, dt, g.device());
          full.slice(d, start, end, step).copy_(g);
          return std::vector<Tensor>{full};
        });
    // A later piece of the same tensor adds into the first one's full gradient.
    node.accumulate = [d, start, end, step](Tensor& pending, const Tensor& g) {
      Tensor region = pending.slice(d, start, end, step);
      region.copy_(add(region, g));
    };
  }
  return out;
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, "select");
  const int64_t n = shape()[d];
  CMHA_CHECK(index >= -n && index < n, "select: index " + std::to_string(index) + " is out of range for dim " +
                                           std::to_string(d) + " of " + describe());
  if (index < 0) index += n;
  return slice(d, index, index + 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& target) const {
  CMHA_CHECK(target.size() >= shape().size(), "expand: cannot expand " + describe() + " to fewer dims " +
                                                  shape_str(target));
  const size_t lead = target.size() - shape().size();
  Shape s(target.size()), st(target.size(), 0);
  for (size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      CMHA_CHECK(target[i] >= 0, "expand: size -1 is not allowed for a new leading dim in " + shape_str(target));
      s[i] = target[i];
      continue;
    }
    const int64_t have = shape()[i - lead];
    const int64_t want = target[i] == -1 ? have : target[i];
    CMHA_CHECK(have == want || have == 1, "expand: cannot expand " + describe() + " to " + shape_str(target));
    s[i] = want;
    st[i] = have == want ? strides()[i - lead] : 0;
  }
  Tensor out = make_view(*this, s, st, offset());
  if (autograd::needs_grad({*this})) {
    Shape in_shape = shape();
    autograd::record(out, "expand", {*this}, [in_shape](const Tensor& g) { return std::vector<Tensor>{sum_to(g, in_shape)}; });
  }
  return out;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const int64_t n = dim() + 1;
  CMHA_CHECK(d >= -n && d < n, "unsqueeze: dim " + std::to_string(d) + " is out of range for " + describe());
  if (d < 0) d += n;
  Shape s = shape(), st = strides();
  const int64_t stride = d < dim() ? strides()[d] * shape()[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  Tensor out = make_view(*this, s, st, offset());
  record_reshape_backward(out, "unsqueeze", *this);
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, "squeeze");
  CMHA_CHECK(shape()[d] == 1, "squeeze: dim " + std::to_string(d) + " of " + describe() + " is not of size 1");
  Shape s = shape(), st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = make_view(*this, s, st, offset());
  record_reshape_backward(out, "squeeze", *this);
  return out;
}

}  // namespace cmha
