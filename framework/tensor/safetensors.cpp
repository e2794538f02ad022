#include "tensor/safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "tensor/regular_file.h"
#include "tensor/atomic_file.h"

namespace cmha {

namespace {

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::b8: return "BOOL";
    case DType::u8: return "U8";
  }
  return "?";
}

bool st_dtype_from_name(const std::string& s, DType& out) {
  static const std::pair<const char*, DType> table[] = {{"F32", DType::f32}, {"BF16", DType::bf16},
                                                        {"F16", DType::f16}, {"I32", DType::i32},
                                                        {"I64", DType::i64}, {"BOOL", DType::b8},
                                                        {"U8", DType::u8}};
  for (auto& [name, dt] : table)
    if (s == name) {
      out = dt;
      return true;
    }
  return false;
}

}  // namespace

namespace {

// The header limit of the safetensors reference implementation: a hostile
// length field cannot make us allocate more than this before parsing.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;  // byte range within the data section
};

// Bytes of a dtype[shape] tensor, or false when a count overflows 63 bits.
// Zero dims count as 1 in the product so that the strides of an empty
// [0, 2^62, 4] fit as well.
bool tensor_bytes(const Shape& shape, DType dt, uint64_t& bytes) {
  int64_t extent = static_cast<int64_t>(dtype_size(dt));
  bool empty = false;
  for (int64_t d : shape) {
    empty = empty || d == 0;
    if (__builtin_mul_overflow(extent, std::max<int64_t>(d, 1), &extent)) return false;
  }
  bytes = empty ? 0 : static_cast<uint64_t>(extent);
  return true;
}

// Checks one header entry against the data section of `data_size` bytes.
Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& e, uint64_t data_size) {
  const std::string where = "safetensors file '" + path + "', tensor '" + name + "'";
  CMHA_CHECK(e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"),
             where + ": entry needs dtype, shape and data_offsets");
  Entry out{name, DType::f32, {}, 0, 0};
  CMHA_CHECK(e["dtype"].is_string() && st_dtype_from_name(e["dtype"].get<std::string>(), out.dtype),
             where + ": unsupported dtype " + e["dtype"].dump());
  CMHA_CHECK(e["shape"].is_array(), where + ": shape is not a list");
  for (const auto& d : e["shape"]) {
    CMHA_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0, where + ": bad shape " + e["shape"].dump());
    out.shape.push_back(d.get<int64_t>());
  }
  const auto& off = e["data_offsets"];
  CMHA_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
             where + ": data_offsets must be two non-negative integers");
  out.begin = off[0].get<uint64_t>();
  out.end = off[1].get<uint64_t>();
  uint64_t expected = 0;
  CMHA_CHECK(tensor_bytes(out.shape, out.dtype, expected),
             where + ": shape " + e["shape"].dump() + " has too many elements to address");
  CMHA_CHECK(out.begin <= out.end && out.end - out.begin == expected,
             where + ": data_offsets span " + std::to_string(out.end - out.begin) + " bytes but " +
                 dtype_name(out.dtype) + shape_str(out.shape) + " needs " + std::to_string(expected));
  CMHA_CHECK(out.end <= data_size, where + ": data runs past the end of the file (truncated: the data section has " +
                                       std::to_string(data_size) + " bytes, the tensor ends at " +
                                       std::to_string(out.end) + ")");
  return out;
}

// Two tensors sharing bytes would alias each other's data: refused.
void check_no_overlap(const std::string& path, std::vector<Entry> entries) {
  std::erase_if(entries, [](const Entry& e) { return e.begin == e.end; });  // empty tensors hold no bytes
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i)
    CMHA_CHECK(entries[i].begin >= entries[i - 1].end,
               "safetensors file '" + path + "': tensors '" + entries[i - 1].name + "' (bytes " +
                   std::to_string(entries[i - 1].begin) + "-" + std::to_string(entries[i - 1].end) + ") and '" +
                   entries[i].name + "' (bytes " + std::to_string(entries[i].begin) + "-" +
                   std::to_string(entries[i].end) + ") overlap");
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  // stat first: a directory "opens" as a stream of garbage and a FIFO blocks
  // the open until a writer comes.
  struct stat st {};
  CMHA_CHECK(::stat(path.c_str(), &st) == 0, "cannot open safetensors file '" + path + "': " + std::strerror(errno));
  CMHA_CHECK(!S_ISDIR(st.st_mode), "'" + path + "' is a directory, not a safetensors file");
  refuse_special_file(path, "safetensors file");
  std::ifstream in(path, std::ios::binary);
  CMHA_CHECK(in.good(), "cannot open safetensors file '" + path + "': " + std::strerror(errno));
  const auto file_size = static_cast<uint64_t>(st.st_size);
  CMHA_CHECK(file_size >= 8, "safetensors file '" + path + "' is truncated: " + std::to_string(file_size) +
                                 " bytes, shorter than its 8-byte header length");
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  CMHA_CHECK(in.good(), "cannot read safetensors file '" + path + "'");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  CMHA_CHECK(header_len <= file_size - 8, "safetensors file '" + path + "' is truncated or corrupt: header of " +
                                              std::to_string(header_len) + " bytes in a file of " +
                                              std::to_string(file_size));
  CMHA_CHECK(header_len <= kMaxHeaderBytes, "safetensors file '" + path + "' is corrupt: its header of " +
                                                std::to_string(header_len) + " bytes exceeds the limit of " +
                                                std::to_string(kMaxHeaderBytes));
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  CMHA_CHECK(in.good() || header_len == 0, "safetensors file '" + path + "': its header could not be read");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    throw Error("safetensors file '" + path + "' has a corrupt JSON header: " + e.what());
  }
  CMHA_CHECK(j.is_object(), "safetensors file '" + path + "': the header is not a JSON object");
  const uint64_t data_size = file_size - 8 - header_len;
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      CMHA_CHECK(it->is_object(), "safetensors file '" + path + "': __metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        CMHA_CHECK(m->is_string(), "safetensors file '" + path + "': metadata '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, it.key(), *it, data_size));
  }
  // Every range is inside the file and none overlaps: what we allocate below
  // adds up to at most the file's size.
  check_no_overlap(path, entries);
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    const uint64_t n = e.end - e.begin;
    in.seekg(static_cast<std::streamoff>(8 + header_len + e.begin));
    in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(n));
    CMHA_CHECK(in.good() || n == 0, "safetensors file '" + path + "', tensor '" + e.name +
                                        "': read failed (the file shrank while being read?)");
    out.tensors.emplace(e.name, t.set_name(e.name));
  }
  return out;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // The reference implementation's layout: __metadata__ first, each entry's
  // fields in the order dtype, shape, data_offsets, tensors (and their data)
  // in name order: a single-dtype file laid out that way (tests/reference/
  // safetensors_io.py writes so) is rewritten byte for byte.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    // Device tensors come to the host; detached, so nothing is recorded.
    Tensor c = t.detach().to(Device::cpu()).contiguous();
    const uint64_t n = c.nbytes();
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = st_dtype_name(c.dtype());
    entry["shape"] = c.shape();
    entry["data_offsets"] = {offset, offset + n};
    header[name] = std::move(entry);
    offset += n;
    contiguous.push_back(c);
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h.push_back(' ');  // data starts 8-byte aligned
  AtomicFile f(path);
  unsigned char len_bytes[8];
  uint64_t len = h.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(len >> (8 * i));
  f.write(len_bytes, 8);
  f.write(h);
  for (const Tensor& c : contiguous)
    if (c.nbytes() > 0) f.write(c.raw_data(), c.nbytes());
  f.commit();
}

}  // namespace cmha
