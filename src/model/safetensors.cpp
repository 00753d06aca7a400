#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "spark/error.h"
#include "util/bounded_json.h"

namespace spark {

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, int> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},  {"I32", 4},     {"I16", 2},    {"I8", 1},
      {"U8", 1},  {"U16", 2}, {"U32", 4}, {"U64", 8},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : file_(path) {
  const std::string fname = path.filename().string();
  auto fail = [&](const std::string& what) -> void { throw Error(path.string() + ": " + what); };
  if (file_.size() < 8)
    fail("truncated file: " + std::to_string(file_.size()) + " bytes, shorter than the header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, file_.data(), 8);  // little-endian on every target we build for
  if (header_len > file_.size() - 8) {
    fail("header length " + std::to_string(header_len) + " runs past the end of the file (" +
         std::to_string(file_.size()) + " bytes)");
  }
  const char* header_begin = reinterpret_cast<const char*>(file_.data() + 8);
  nlohmann::json header;
  try {
    header = parse_json_bounded(std::string_view(header_begin, header_len));
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail("header is not a JSON object");

  const uint8_t* data_begin = file_.data() + 8 + header_len;
  const uint64_t data_size = file_.size() - 8 - header_len;
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, std::string>> spans;
  for (auto& item : header.items()) {
    // Named references, not a structured binding: clang before 16 cannot capture bindings in a lambda.
    const std::string& name = item.key();
    const nlohmann::json& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("__metadata__ is not an object");
      for (auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail("__metadata__." + k + " is not a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    auto tfail = [&](const std::string& what) { fail("tensor " + name + ": " + what); };
    if (!entry.is_object()) tfail("entry is not an object");
    TensorInfo t;
    t.name = name;
    t.file = fname;
    auto dtype = entry.find("dtype");
    if (dtype == entry.end() || !dtype->is_string()) tfail("missing dtype");
    t.dtype = dtype->get<std::string>();
    int elem = safetensors_dtype_size(t.dtype);
    if (elem == 0) tfail("unknown dtype " + t.dtype);
    auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array()) tfail("missing shape");
    for (auto& d : *shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        tfail("shape has a non-integer or negative dimension");
      t.shape.push_back(d.get<int64_t>());
    }
    auto offsets = entry.find("data_offsets");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
      tfail("data_offsets must be two non-negative integers");
    }
    uint64_t begin = (*offsets)[0].get<uint64_t>();
    uint64_t end = (*offsets)[1].get<uint64_t>();
    if (end < begin) tfail("data_offsets end before they begin");
    if (end > data_size) {
      tfail("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
            "] run past the end of the data (" + std::to_string(data_size) + " bytes): truncated file?");
    }
    // Counted with overflow checks: a shape whose byte count wraps 64 bits must not match a small span
    // (and numel() then never overflows for a tensor that opened).
    uint64_t want = static_cast<uint64_t>(elem);
    for (int64_t d : t.shape) {
      if (__builtin_mul_overflow(want, static_cast<uint64_t>(d), &want) ||
          want > static_cast<uint64_t>(INT64_MAX)) {
        tfail("shape needs more bytes than a file can hold");
      }
    }
    if (end - begin != want) {
      tfail("data_offsets span " + std::to_string(end - begin) + " bytes but shape and dtype need " +
            std::to_string(want));
    }
    t.data = data_begin + begin;
    t.nbytes = end - begin;
    spans.push_back({{begin, end}, name});
    tensors_.emplace(name, std::move(t));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first.first < spans[i - 1].first.second) {
      fail("tensors " + spans[i - 1].second + " and " + spans[i].second + " overlap in the data section");
    }
  }
}

void write_safetensors(const std::filesystem::path& path, const std::vector<const TensorToWrite*>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorBytesView> views;
  views.reserve(tensors.size());
  for (const TensorToWrite* t : tensors)
    views.push_back({t->name, t->dtype, t->shape, t->bytes.data(), t->bytes.size()});
  write_safetensors(path, views, metadata);
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorBytesView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorBytesView& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  // Spaces after the JSON put the data at a 64-byte boundary of the file (so of a mapping), which keeps
  // every packed tensor cache-line aligned for the kernels; the format only asks for 8.
  text.append((64 - (8 + text.size()) % 64) % 64, ' ');
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(path.string() + ": cannot write");
  uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const TensorBytesView& t : tensors) {
    out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.bytes));
  }
  out.flush();
  if (!out) throw Error(path.string() + ": write failed (disk full?)");
}

}  // namespace spark
