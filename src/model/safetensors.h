// Reader for the safetensors format: an 8-byte little-endian header length, a JSON header mapping
// tensor names to {dtype, shape, data_offsets}, then the raw data. The file is memory-mapped and fully
// validated on open, so later code can trust every offset.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "util/mapped_file.h"

namespace spark {

struct TensorInfo {
  std::string name;
  std::string dtype;  // as written in the file: "BF16", "F16", "F32", "I32", ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  std::string file;  // file name, for error messages
  int64_t numel() const;
};

// Bytes per element of a safetensors dtype name, or 0 when the name is not a safetensors dtype.
int safetensors_dtype_size(const std::string& dtype);

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  MappedFile file_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors in safetensors format (header padded to 8 bytes, tensors in the given order).
struct TensorToWrite {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void write_safetensors(const std::filesystem::path& path, const std::vector<const TensorToWrite*>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The same for bytes someone else owns (a quantized model's packed buffers, a mapped checkpoint), so a
// writer needs no second copy of what it writes.
struct TensorBytesView {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorBytesView>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace spark
