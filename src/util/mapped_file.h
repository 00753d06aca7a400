// Read-only memory mapping of a whole file: checkpoints are mapped, never copied, so weights in the
// checkpoint's own dtype cost page cache rather than anonymous memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace spark {

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace spark
